package experiment

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// display is the step-by-step progress: one line per step, and within a long step (adapt's
// optimizer steps, an evaluation's prompts) a bar redrawn in place on a terminal, or a line
// at most every 20 seconds elsewhere (a log file, CI).
type display struct {
	w     io.Writer
	tty   bool
	total int

	k        int
	title    string
	begin    time.Time
	lastLine time.Time
	drawn    bool
}

func (d *display) head(k int) string { return fmt.Sprintf("[%d/%d]", k, d.total) }

func (d *display) skip(k int, title string) {
	fmt.Fprintf(d.w, "%s %s: done earlier, skipped\n", d.head(k), title)
}

func (d *display) note(k int, title, msg string) {
	fmt.Fprintf(d.w, "%s %s: %s\n", d.head(k), title, msg)
}

func (d *display) start(k int, title string) {
	d.k, d.title, d.begin, d.lastLine, d.drawn = k, title, time.Now(), time.Now(), false
	if d.tty {
		fmt.Fprintf(d.w, "%s %s ...", d.head(k), title)
		d.drawn = true
	} else {
		fmt.Fprintf(d.w, "%s %s ...\n", d.head(k), title)
	}
}

// progress shows done of total units of the current step, with the time so far and a
// linear estimate of the time left.
func (d *display) progress(done, total int) {
	if total <= 0 {
		return
	}
	el := time.Since(d.begin)
	eta := ""
	if done > 0 && done < total {
		eta = fmt.Sprintf(", about %s left", (el * time.Duration(total-done) / time.Duration(done)).Round(time.Second))
	}
	if d.tty {
		const width = 24
		fill := width * done / total
		fmt.Fprintf(d.w, "\r\x1b[K%s %s [%s%s] %d/%d %s%s", d.head(d.k), d.title, strings.Repeat("█", fill), strings.Repeat("░", width-fill),
			done, total, el.Round(time.Second), eta)
		d.drawn = true
		return
	}
	if done == total || time.Since(d.lastLine) >= 20*time.Second {
		fmt.Fprintf(d.w, "%s %s: %d/%d, %s%s\n", d.head(d.k), d.title, done, total, el.Round(time.Second), eta)
		d.lastLine = time.Now()
	}
}

func (d *display) finish(el time.Duration) {
	if d.tty && d.drawn {
		fmt.Fprint(d.w, "\r\x1b[K")
	}
	fmt.Fprintf(d.w, "%s %s: done in %s\n", d.head(d.k), d.title, el.Round(100*time.Millisecond))
}

func (d *display) fail(err error) {
	if d.tty && d.drawn {
		fmt.Fprintln(d.w)
	}
	fmt.Fprintf(d.w, "%s %s: failed: %v\n", d.head(d.k), d.title, err)
}
