// Package debian is a task with real variation: Debian package records (the deb822 stanzas of
// /var/lib/dpkg/status, or of `apt-cache dumpavail` where the apt lists are filled) turned
// into a fixed-schema JSON summary (answer.schema.json). Unlike package domain's phrase banks
// nothing here is a template: every prompt is a record some maintainer wrote, and the answer
// is computed from it.
//
// The data is made at run time from what the machine has installed (the status file is on
// every Debian system, CI included; the apt lists may be empty), so it is never committed.
// Train, validation and held-out are split by a seeded hash of the source package, so the
// binary packages built from one source (libfoo1, libfoo-dev, foo-doc: near copies of each
// other's description and dependencies) all land in the same split.
package debian

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// StatusFile is dpkg's record of the installed packages.
const StatusFile = "/var/lib/dpkg/status"

// Instruction opens every prompt.
const Instruction = `Summarize this Debian package record as JSON with the keys "name", "version", "section", "priority", "architecture", "maintainer" ({"name", "email"}), "depends" (package names), "homepage" (or null) and "description" (the one-line summary).`

// Schema is the answer's JSON Schema (Draft 2020-12).
//
//go:embed answer.schema.json
var Schema []byte

// Record is one package stanza: its fields in file order, continuation lines joined with "\n".
type Record struct {
	Fields []Field
}

// Field is one "Name: value" of a stanza.
type Field struct{ Name, Value string }

// Get returns the value of the field name (case-insensitive, as deb822 says), "" if absent.
func (r Record) Get(name string) string {
	for _, f := range r.Fields {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Parse reads deb822 stanzas separated by blank lines.
func Parse(rd io.Reader) ([]Record, error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var out []Record
	var cur Record
	line := 0
	flush := func() {
		if len(cur.Fields) > 0 {
			out = append(out, cur)
		}
		cur = Record{}
	}
	for sc.Scan() {
		line++
		s := sc.Text()
		switch {
		case strings.TrimSpace(s) == "":
			flush()
		case s[0] == ' ' || s[0] == '\t':
			if len(cur.Fields) == 0 {
				return nil, fmt.Errorf("line %d: a continuation line with no field before it", line)
			}
			f := &cur.Fields[len(cur.Fields)-1]
			f.Value += "\n" + s
		default:
			name, val, ok := strings.Cut(s, ":")
			if !ok || name == "" {
				return nil, fmt.Errorf("line %d: %q is neither \"Field: value\" nor a continuation", line, s)
			}
			cur.Fields = append(cur.Fields, Field{name, strings.TrimSpace(val)})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

// promptFields are the fields a prompt shows, in this order: what `apt-cache show` and the
// status file have in common. The status file's own fields (Status, Conffiles) and the
// archive's (Filename, Size, checksums) say nothing about the package and differ by source.
var promptFields = []string{"Package", "Source", "Version", "Installed-Size", "Maintainer", "Architecture",
	"Multi-Arch", "Essential", "Priority", "Section", "Pre-Depends", "Depends", "Recommends", "Suggests",
	"Breaks", "Conflicts", "Replaces", "Provides", "Homepage", "Description"}

// Example is one prompt and its answer.
type Example struct {
	Name       string `json:"-"`
	Group      string `json:"-"` // the source package: the split unit
	Prompt     string `json:"prompt"`
	Completion string `json:"completion"`
	Answer     Answer `json:"-"`
}

// Maintainer is a parsed "Name <email>".
type Maintainer struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// Answer is the JSON summary, in answer.schema.json's key order.
type Answer struct {
	Name         string     `json:"name"`
	Version      string     `json:"version"`
	Section      string     `json:"section"`
	Priority     string     `json:"priority"`
	Architecture string     `json:"architecture"`
	Maintainer   Maintainer `json:"maintainer"`
	Depends      []string   `json:"depends"`
	Homepage     *string    `json:"homepage"`
	Description  string     `json:"description"`
}

// NewExample builds the prompt and answer of a record; ok is false for a record that has no
// Package, Version or Description (a removed package's leftover stanza in the status file).
func NewExample(r Record) (Example, bool) {
	name, ver, desc := r.Get("Package"), r.Get("Version"), r.Get("Description")
	if name == "" || ver == "" || desc == "" {
		return Example{}, false
	}
	var p strings.Builder
	p.WriteString(Instruction)
	p.WriteString("\n\n")
	for _, fn := range promptFields {
		if v := r.Get(fn); v != "" {
			fmt.Fprintf(&p, "%s: %s\n", fn, v)
		}
	}
	a := Answer{
		Name: name, Version: ver, Section: r.Get("Section"), Priority: r.Get("Priority"),
		Architecture: r.Get("Architecture"), Maintainer: parseMaintainer(r.Get("Maintainer")),
		Depends: dependNames(r.Get("Pre-Depends"), r.Get("Depends")),
	}
	if h := r.Get("Homepage"); h != "" {
		a.Homepage = &h
	}
	a.Description, _, _ = strings.Cut(desc, "\n")
	group, _, _ := strings.Cut(r.Get("Source"), " ") // "Source: foo (1.2-3)" when the versions differ
	if group == "" {
		group = name
	}
	return Example{Name: name, Group: group, Prompt: strings.TrimSuffix(p.String(), "\n"),
		Completion: spaced(a), Answer: a}, true
}

// parseMaintainer splits "Full Name <email>"; a value without <...> is all name.
func parseMaintainer(s string) Maintainer {
	i, j := strings.LastIndexByte(s, '<'), strings.LastIndexByte(s, '>')
	if i < 0 || j < i {
		return Maintainer{Name: strings.TrimSpace(s)}
	}
	return Maintainer{Name: strings.TrimSpace(s[:i]), Email: strings.TrimSpace(s[i+1 : j])}
}

// dependNames lists the package names of dependency fields in order, once each: version
// constraints ("(>= 2.1)"), architecture qualifiers (":any") and restrictions ("[amd64]")
// dropped, every alternative of "a | b" listed.
func dependNames(fields ...string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, f := range fields {
		for _, dep := range strings.Split(f, ",") {
			for _, alt := range strings.Split(dep, "|") {
				n := strings.TrimSpace(alt)
				if k := strings.IndexAny(n, " ([<"); k >= 0 {
					n = n[:k]
				}
				n, _, _ = strings.Cut(n, ":")
				if n != "" && !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// spaced renders the answer the way Python's json.dumps writes it (", " and ": ").
func spaced(a Answer) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil { // strings and slices of strings always encode
		panic(fmt.Sprintf("debian: %v", err))
	}
	compact := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	var out strings.Builder
	inStr, esc := false, false
	for _, c := range compact {
		out.WriteByte(c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ':' || c == ','):
			out.WriteByte(' ')
		}
	}
	return out.String()
}

// System reads the records of this machine: the status file, then, when apt is true and
// apt-cache is there, every record of the apt lists (`apt-cache dumpavail`; none when the
// lists are empty, as on a fresh container). The status file must exist.
func System(apt bool) ([]Record, error) {
	data, err := os.ReadFile(StatusFile)
	if err != nil {
		return nil, fmt.Errorf("debian: %w (a Debian or Ubuntu system has it)", err)
	}
	recs, err := Parse(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StatusFile, err)
	}
	if !apt {
		return recs, nil
	}
	if _, err := exec.LookPath("apt-cache"); err != nil {
		return recs, nil
	}
	out, err := exec.Command("apt-cache", "dumpavail").Output()
	if err != nil {
		return nil, fmt.Errorf("apt-cache dumpavail: %w", err)
	}
	more, err := Parse(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("apt-cache dumpavail: %w", err)
	}
	return append(recs, more...), nil
}

// Split names, in the order Splits returns them.
const (
	Train      = "train"
	Validation = "validation"
	HeldOut    = "held-out"
)

// Splits turns records into examples and splits them by source package: a seeded FNV-1a hash
// of the group puts 10% in validation, 10% in held-out and the rest in train. A package
// listed twice (the status file and the apt lists) counts once, the first record winning.
// Each split is ordered by the seeded hash of the package name, so that taking its first N
// examples is a deterministic sample.
func Splits(recs []Record, seed uint64) map[string][]Example {
	out := map[string][]Example{}
	seen := map[string]bool{}
	for _, r := range recs {
		if st := r.Get("Status"); st != "" && !strings.HasSuffix(st, " installed") {
			continue // removed, its configuration files left behind
		}
		ex, ok := NewExample(r)
		if !ok || seen[ex.Name] {
			continue
		}
		seen[ex.Name] = true
		var s string
		switch h := hash(seed, ex.Group) % 10; h {
		case 0:
			s = Validation
		case 1:
			s = HeldOut
		default:
			s = Train
		}
		out[s] = append(out[s], ex)
	}
	for _, xs := range out {
		sort.Slice(xs, func(i, j int) bool {
			hi, hj := hash(seed, xs[i].Name), hash(seed, xs[j].Name)
			if hi != hj {
				return hi < hj
			}
			return xs[i].Name < xs[j].Name
		})
	}
	return out
}

func hash(seed uint64, s string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s", seed, s)
	return h.Sum64()
}

// WriteJSONL writes examples as {"prompt","completion"} lines, the corpus format
// `tokenwise specialize` and `tokenwise analyze` read.
func WriteJSONL(w io.Writer, xs []Example) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, x := range xs {
		if err := enc.Encode(x); err != nil {
			return err
		}
	}
	return bw.Flush()
}
