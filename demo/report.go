package demo

import (
	"fmt"
	"html"
	"strings"
)

type row struct {
	name string
	f    func(m *ModelResult) string
}

func (r *Result) rows() []row {
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	return []row{
		{"LM-head rows (vocab)", func(m *ModelResult) string { return fmt.Sprint(m.VocabRows) }},
		{"parameters", func(m *ModelResult) string { return fmt.Sprint(m.Params) }},
		{"prompt tokens (avg)", func(m *ModelResult) string { return fmt.Sprintf("%.1f", m.PromptTokens) }},
		{"output tokens (avg)", func(m *ModelResult) string { return fmt.Sprintf("%.1f", m.OutputTokens) }},
		{"decode steps (avg)", func(m *ModelResult) string { return fmt.Sprintf("%.1f", m.DecodeSteps) }},
		{"prefill time (avg ms)", func(m *ModelResult) string { return fmt.Sprintf("%.1f", m.PrefillMs) }},
		{"decode time (avg ms)", func(m *ModelResult) string { return fmt.Sprintf("%.1f", m.DecodeMs) }},
		{"valid JSON verdicts", func(m *ModelResult) string { return pct(m.ValidJSON) }},
		{"verdict accuracy", func(m *ModelResult) string { return pct(m.VerdictAcc) }},
		{"score accuracy", func(m *ModelResult) string { return pct(m.ScoreAcc) }},
		{"LM-head share of decode (model)", func(m *ModelResult) string { return pct(m.LMHeadShare) }},
		{"cost per 1M requests (model)", func(m *ModelResult) string { return fmt.Sprintf("$%.2f", 1e6*m.CostPerReq) }},
	}
}

// Table renders the comparison as aligned text.
func (r *Result) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %14s %22s\n", "", "base", "specialized+adapted")
	for _, rw := range r.rows() {
		fmt.Fprintf(&b, "%-34s %14s %22s\n", rw.name, rw.f(&r.Base), rw.f(&r.Adapted))
	}
	fmt.Fprintf(&b, "\noutput tokens: %.1f%% fewer; verdict accuracy %+.1f points; %d held-out prompts each\n",
		100*r.OutputReduction, 100*(r.Adapted.VerdictAcc-r.Base.VerdictAcc), r.Base.Prompts)
	fmt.Fprintf(&b, "cost model: profile %s at $%.2f per device-hour, batch 1, bf16 weights\n", r.Profile, r.PricePerHour)
	if r.AdaptedFrom != "" {
		fmt.Fprintf(&b, "adapted model: %s\n", r.AdaptedFrom)
	}
	if !r.SameSpecialization {
		b.WriteString("note: its vocabulary differs from this run's specialization (package specialize changed since it was built)\n")
	}
	return b.String()
}

// HTML renders a self-contained report: the table and a bar chart of output tokens, decode
// steps and decode time, base against specialized.
func (r *Result) HTML() string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>tokenwise demo</title>
<style>body{font-family:system-ui,sans-serif;max-width:900px;margin:2em auto;color:#222}
table{border-collapse:collapse}td,th{padding:4px 12px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}</style></head><body>
<h1>tokenwise demo: vocabulary specialization on essay grading</h1>`)
	fmt.Fprintf(&b, "<p>The same %d held-out prompts through the embedded base model and its specialized, adapted version (greedy decoding). Output tokens: <b>%.1f%% fewer</b>; verdict accuracy %.1f%% &rarr; %.1f%%.</p>\n",
		r.Base.Prompts, 100*r.OutputReduction, 100*r.Base.VerdictAcc, 100*r.Adapted.VerdictAcc)
	b.WriteString("<table><tr><th></th><th>base</th><th>specialized+adapted</th></tr>\n")
	for _, rw := range r.rows() {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", html.EscapeString(rw.name), html.EscapeString(rw.f(&r.Base)), html.EscapeString(rw.f(&r.Adapted)))
	}
	b.WriteString("</table>\n<h2>Per request</h2>\n")
	b.WriteString(r.chart())
	if r.Specialization != nil {
		b.WriteString("<h2>Specialization</h2><pre>" + html.EscapeString(r.Specialization.Text()) + "</pre>\n")
	}
	b.WriteString("<h2>Sample completions</h2>\n")
	for i := range min(len(r.Base.Samples), len(r.Adapted.Samples)) {
		fmt.Fprintf(&b, "<p>base:</p><pre>%s</pre><p>specialized+adapted:</p><pre>%s</pre>\n", html.EscapeString(r.Base.Samples[i]), html.EscapeString(r.Adapted.Samples[i]))
	}
	fmt.Fprintf(&b, "<p>Cost model: profile %s at $%.2f per device-hour, batch 1. Run in %s.</p></body></html>\n", html.EscapeString(r.Profile), r.PricePerHour, r.Elapsed.Round(1e8))
	return b.String()
}

// chart draws grouped horizontal bars, each metric scaled to its larger value.
func (r *Result) chart() string {
	metrics := []struct {
		name string
		a, b float64
		unit string
	}{
		{"output tokens", r.Base.OutputTokens, r.Adapted.OutputTokens, ""},
		{"decode steps", r.Base.DecodeSteps, r.Adapted.DecodeSteps, ""},
		{"decode time", r.Base.DecodeMs, r.Adapted.DecodeMs, " ms"},
		{"LM-head rows", float64(r.Base.VocabRows), float64(r.Adapted.VocabRows), ""},
		{"cost per request", 1e6 * r.Base.CostPerReq, 1e6 * r.Adapted.CostPerReq, " $/1M"},
	}
	const w, left, barW = 760, 150, 520
	h := 30 + 56*len(metrics)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-size="12">`, w, h)
	fmt.Fprintf(&b, `<rect x="%d" y="4" width="12" height="12" fill="#888"/><text x="%d" y="14">base</text><rect x="%d" y="4" width="12" height="12" fill="#2a7"/><text x="%d" y="14">specialized+adapted</text>`, left, left+16, left+80, left+96)
	for i, m := range metrics {
		y := 30 + 56*i
		top := max(m.a, m.b, 1e-12)
		fmt.Fprintf(&b, `<text x="0" y="%d">%s</text>`, y+24, html.EscapeString(m.name))
		for j, v := range []float64{m.a, m.b} {
			color := "#888"
			if j == 1 {
				color = "#2a7"
			}
			bw := int(barW * v / top)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="20" fill="%s"/><text x="%d" y="%d">%.4g%s</text>`, left, y+22*j, bw, color, left+bw+4, y+22*j+15, v, m.unit)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
