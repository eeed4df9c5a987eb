package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/tokenizer"
)

// segmentBytes is the size of the pieces a file is cut into for encoding on several cores.
const segmentBytes = 256 << 10

// progressMin is the input size from which count shows a progress bar (on a terminal).
const progressMin = 32 << 20

type countResult struct {
	Path   string `json:"path"`
	Tokens int    `json:"tokens"`
	Bytes  int    `json:"bytes"`
}

func newCountCmd() *cobra.Command {
	var (
		tokPath         string
		threads         int
		asJSON, special bool
		noProgress      bool
	)
	cmd := &cobra.Command{
		Use:   "count --tokenizer PATH [--threads N] [--json] FILE...",
		Short: "Count the tokens of files, and how fast they encode",
		Long: `Count the tokens of each FILE (- for standard input) as one text, without BOS/EOS
unless --special, and print tokens, bytes and tokens per byte.

--json prints {"tokens","bytes","tokens_per_byte","seconds","mb_s","cpu_seconds","threads",
"files"}; seconds, mb_s and cpu_seconds (user + system, all threads) time the encoding alone,
not reading the files.

Large files are cut into pieces right after a line end followed by an ASCII letter, where
the GPT-style pre-tokenizers (GPT-2, Llama-3, Qwen2/3, o200k) always split, and the pieces
encode in parallel; the count is the same as encoding the whole file at once.`,
		Example: `  tokenwise count --tokenizer Qwen3-0.6B/ --json corpus/*.txt`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tk, err := loadTokenizer(tokPath)
			if err != nil {
				return err
			}
			if threads <= 0 {
				threads = runtime.GOMAXPROCS(0)
			}
			var total int64
			for _, p := range args {
				if p == "-" {
					continue
				}
				st, err := os.Stat(p)
				if err != nil {
					return err
				}
				if st.IsDir() {
					return fmt.Errorf("%s: is a folder, want a file", p)
				}
				total += st.Size()
			}
			var bar *progressbar.ProgressBar
			if f, ok := cmd.ErrOrStderr().(*os.File); ok && !noProgress && total >= progressMin && isTerminal(f) {
				bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(f),
					progressbar.OptionShowBytes(true), progressbar.OptionSetDescription("encoding"),
					progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
			}
			c := counter{tk: tk, threads: threads, bar: bar}
			if special {
				c.perFile = len(tk.Encode("", true))
			}
			for _, p := range args {
				if err := c.file(cmd, p); err != nil {
					return err
				}
			}
			if err := c.flush(); err != nil {
				return err
			}
			if bar != nil {
				_ = bar.Finish()
			}

			tokens, bytes := 0, 0
			for _, r := range c.results {
				tokens += r.Tokens
				bytes += r.Bytes
			}
			secs := c.encode.Seconds()
			mbs := 0.0
			if secs > 0 {
				mbs = float64(bytes) / 1e6 / secs
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSONLine(out, struct {
					Tokens        int           `json:"tokens"`
					Bytes         int           `json:"bytes"`
					TokensPerByte float64       `json:"tokens_per_byte"`
					Seconds       float64       `json:"seconds"`
					MBs           float64       `json:"mb_s"`
					CPUSeconds    float64       `json:"cpu_seconds"`
					Threads       int           `json:"threads"`
					Files         []countResult `json:"files"`
				}{tokens, bytes, ratio(tokens, bytes), secs, mbs, c.cpu.Seconds(), threads, c.results})
			}
			if len(c.results) > 1 {
				for _, r := range c.results {
					fmt.Fprintf(out, "%s: %d tokens, %d bytes, %.4f tokens/byte\n", r.Path, r.Tokens, r.Bytes, ratio(r.Tokens, r.Bytes))
				}
			}
			fmt.Fprintf(out, "%d tokens, %d bytes, %.4f tokens/byte (%.3fs encoding, %.1f MB/s, %d threads)\n",
				tokens, bytes, ratio(tokens, bytes), secs, mbs, threads)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", tokFlagHelp)
	f.IntVar(&threads, "threads", 0, "encoding threads (0: all cores)")
	f.BoolVar(&asJSON, "json", false, `print {"tokens","bytes","seconds","mb_s",...} as JSON`)
	f.BoolVar(&special, "special", false, "count the BOS/EOS the post-processor adds to each file")
	f.BoolVar(&noProgress, "no-progress", false, "never show a progress bar")
	_ = cmd.MarkFlagRequired("tokenizer")
	return cmd
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// counter gathers the segments of several files into rounds big enough to keep every thread
// busy, so that many small files encode in parallel as well as one large file.
type counter struct {
	tk      *tokenizer.Tokenizer
	threads int
	bar     *progressbar.ProgressBar
	perFile int // special tokens added per file

	results []countResult
	pending []string
	owner   []int         // pending[i] belongs to results[owner[i]]
	size    int           // bytes pending
	encode  time.Duration // wall time in EncodeBatch
	cpu     time.Duration // CPU time in EncodeBatch, all threads
}

func (c *counter) file(cmd *cobra.Command, path string) error {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(cmd.InOrStdin())
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return err
	}
	name := path
	if path == "-" {
		name = "stdin"
	}
	text := string(data)
	if i := invalidUTF8(text); i >= 0 {
		line := 1
		for _, b := range data[:i] {
			if b == '\n' {
				line++
			}
		}
		return fmt.Errorf("%s:%d: invalid UTF-8 at byte %d; count reads UTF-8 text", name, line, i)
	}
	c.results = append(c.results, countResult{Path: name, Tokens: c.perFile, Bytes: len(text)})
	for _, s := range segments(text, segmentBytes) {
		c.pending = append(c.pending, s)
		c.owner = append(c.owner, len(c.results)-1)
		c.size += len(s)
		if c.size >= c.threads*4*segmentBytes {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *counter) flush() error {
	if len(c.pending) == 0 {
		return nil
	}
	start, cpu := time.Now(), cpuTime()
	ids := c.tk.EncodeBatch(c.pending, false, c.threads)
	c.encode += time.Since(start)
	c.cpu += cpuTime() - cpu
	if len(ids) != len(c.pending) {
		return errors.New("internal error: EncodeBatch returned a different number of results")
	}
	for i, x := range ids {
		c.results[c.owner[i]].Tokens += len(x)
	}
	if c.bar != nil {
		_ = c.bar.Add(c.size)
	}
	c.pending, c.owner, c.size = c.pending[:0], c.owner[:0], 0
	return nil
}

// segments cuts text into pieces of about size bytes, each cut right after a '\n' that is
// followed by an ASCII letter. The GPT-style split patterns never join a line end with a
// following letter (a letter run may take one leading character, but never \r or \n), so
// encoding the pieces one by one gives the same tokens as encoding text whole.
// TestCountMatchesWholeEncode checks this on the parity corpus for each reference tokenizer.
func segments(text string, size int) []string {
	var out []string
	for len(text) > size {
		cut := -1
		for i := size; i < len(text)-1; i++ {
			if text[i] == '\n' && isASCIILetter(text[i+1]) {
				cut = i + 1
				break
			}
		}
		if cut < 0 {
			break
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	if len(text) > 0 {
		out = append(out, text)
	}
	return out
}

func isASCIILetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }
