package demo

import (
	"fmt"
	"html"
	"strings"

	"github.com/tokenwise/tokenwise/domain"
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
		{"LM-head share of decode time (cost model)", func(m *ModelResult) string { return pct(m.LMHeadShare) }},
		{"cost per 1M requests (cost model)", func(m *ModelResult) string { return fmt.Sprintf("$%.2f", 1e6*m.CostPerReq) }},
		{"with the schema: decode steps (avg)", func(m *ModelResult) string { return fmt.Sprintf("%.1f", m.Schema.DecodeSteps) }},
		{"with the schema: output tokens forced", func(m *ModelResult) string { return pct(m.Schema.ForcedShare) }},
		{"with the schema: ... appended by jump-forward", func(m *ModelResult) string { return pct(m.Schema.JumpedShare) }},
		{"with the schema: wall time (avg ms)", func(m *ModelResult) string {
			return fmt.Sprintf("%.1f (%.1f)", m.Schema.WallMs, m.Schema.PlainWallMs)
		}},
		{"with the schema: valid JSON verdicts", func(m *ModelResult) string { return pct(m.Schema.ValidJSON) }},
		{"with the schema: same text as without", func(m *ModelResult) string { return pct(m.Schema.SameText) }},
		{"with the schema: cost per 1M requests", func(m *ModelResult) string { return fmt.Sprintf("$%.2f", 1e6*m.Schema.CostPerReq) }},
	}
}

// Table renders the comparison as aligned text: the table, what the numbers mean, one
// sample, and a generate command to try the base model.
func (r *Result) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-42s %12s %22s\n", "", "base", "specialized+adapted")
	for _, rw := range r.rows() {
		fmt.Fprintf(&b, "%-42s %12s %22s\n", rw.name, rw.f(&r.Base), rw.f(&r.Adapted))
	}
	b.WriteString("\n")
	for _, n := range r.notes() {
		b.WriteString(n + "\n")
	}
	if len(r.Samples) > 0 {
		sm := r.Samples[0]
		fmt.Fprintf(&b, "\nsample: held-out prompt %d of %d\n", sm.Index+1, r.Base.Prompts)
		fmt.Fprintf(&b, "  input:     %s\n  expected:  %s\n  base:      %s\n  adapted:   %s\n", brief(sm.Prompt), sm.Expected, sm.Base, sm.Adapted)
	}
	if len(r.Generate) > 0 {
		fmt.Fprintf(&b, "\n%s\n  %s\n  answer:    %s\n  expected:  %s\n", r.generateIntro(), r.GenerateCommand(), r.GenerateAnswer, r.GenerateSample.Expected)
	}
	return b.String()
}

// notes are the sentences under the table: what changed, whether the accuracies differ
// beyond chance and why the score accuracy is what it is, what the specialization did,
// what the two LM-head shares are, and where the cost figures come from.
func (r *Result) notes() []string {
	n := r.Base.Prompts
	iv := func(acc float64, ci [2]float64) string {
		return fmt.Sprintf("%.1f%% [%.1f-%.1f]", 100*acc, 100*ci[0], 100*ci[1])
	}
	differ := func(p Paired) string {
		s := fmt.Sprintf("%s right only under the base model, %d only under the adapted one: sign test p = %.2g", plural(p.BaseOnly, "prompt"), p.AdaptedOnly, p.P)
		if p.P >= 0.05 {
			s += ", no evidence of a difference"
		}
		return s
	}
	out := []string{
		fmt.Sprintf("output tokens: %.1f%% fewer; verdict accuracy %+.1f points; %d held-out prompts each", 100*r.OutputReduction, 100*(r.Adapted.VerdictAcc-r.Base.VerdictAcc), n),
		fmt.Sprintf("verdict accuracy (95%% interval over %d prompts): %s -> %s (%s)", n, iv(r.Base.VerdictAcc, r.Base.VerdictCI), iv(r.Adapted.VerdictAcc, r.Adapted.VerdictCI), differ(r.Verdict)),
		fmt.Sprintf("score accuracy: %s -> %s (%s). A perfect grader expects %.0f%%: the essay shows only whether it is weak (score 1-2) or not (3-5), and within each group the score is drawn at random (domain.BestScoreAccuracy); the verdict is what the essay decides.",
			iv(r.Base.ScoreAcc, r.Base.ScoreCI), iv(r.Adapted.ScoreAcc, r.Adapted.ScoreCI), differ(r.Score), 100*r.ScoreCeiling),
	}
	guess := func(m *ModelResult) string {
		w, o := m.guesses()
		var parts []string
		for _, g := range []struct {
			scoreGuess
			of string
		}{{w, "the weak essays"}, {o, "the others"}} {
			if g.Score > 0 {
				parts = append(parts, fmt.Sprintf("%d for %.0f%% of %s", g.Score, 100*g.Share, g.of))
			}
		}
		if len(parts) == 0 {
			return "no valid score"
		}
		return strings.Join(parts, " and ")
	}
	out = append(out, fmt.Sprintf("score guesses: the base model answers %s; the adapted one %s. Which scores higher depends on how many held-out essays happen to have the scores it guesses.",
		guess(&r.Base), guess(&r.Adapted)))
	if sp := r.Specialization; sp != nil {
		out = append(out, "specialization: "+r.specializationSummary())
		if h := sp.HeldOut; h != nil {
			out = append(out, fmt.Sprintf("held-out texts (not used to choose tokens): input tokens %d -> %d (%s), output %d -> %d (%s)",
				h.Before.Input, h.After.Input, change(h.Before.Input, h.After.Input), h.Before.Output, h.After.Output, change(h.Before.Output, h.After.Output)))
		}
		if l := sp.LMHead; l != nil {
			out = append(out, fmt.Sprintf("LM-head share: %.1f%% -> %.1f%% of decode time in the cost model (the head's part of all a step reads: weights, KV cache, activations); of the weight bytes alone %.1f%% -> %.1f%% (the specialization report)",
				100*r.Base.LMHeadShare, 100*r.Adapted.LMHeadShare, 100*l.ShareBefore, 100*l.ShareAfter))
		}
	}
	out = append(out, fmt.Sprintf("cost model: profile %s at $%.2f per device-hour, batch 1, bf16 weights: %s", r.Profile, r.PricePerHour, r.ProfileWhy))
	if r.AdaptedFrom != "" {
		out = append(out, "adapted model: "+r.AdaptedFrom)
	}
	if !r.SameSpecialization {
		out = append(out, "note: its vocabulary differs from this run's specialization (package specialize changed since it was built)")
	}
	return out
}

// specializationSummary says what the specialization did, in the report's own counts.
func (r *Result) specializationSummary() string {
	sp := r.Specialization
	s := fmt.Sprintf("%d -> %d ids: %d kept, %d new tokens (at most %d): %d added tokens across word boundaries, %d merges inside words",
		sp.VocabBefore, sp.VocabAfter, sp.Kept, sp.NewAdded+sp.NewMerges, SpecializeOptions.Add, sp.NewAdded, sp.NewMerges)
	if sp.NewMerges == 0 && r.Analysis != nil && len(r.Analysis.Fragmented) == 0 {
		s += " (every word of the corpus is already one token of the base vocabulary)"
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func change(before, after int) string {
	if before == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*float64(after-before)/float64(before))
}

// brief is a prompt on one line, the fixed instruction named rather than repeated.
func brief(prompt string) string {
	s := strings.TrimPrefix(prompt, domain.Instruction)
	if len(s) < len(prompt) {
		s = "[the grading instruction]" + s
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		cut := strings.LastIndexByte(s[:200], ' ')
		s = s[:max(cut, 0)] + " …"
	}
	return fmt.Sprintf("%s (%d bytes)", s, len(prompt))
}

func (r *Result) generateIntro() string {
	return fmt.Sprintf("try it: the base model on held-out prompt %d, in the format it was trained on: the grading instruction, the topic and the essay, which --chat wraps in the model's chat template (<|im_start|>user ... <|im_end|> <|im_start|>assistant). It knows only this task in this form: other prompts get repeated tokens back.",
		r.GenerateSample.Index+1)
}

// GenerateCommand is Generate as one bash command line.
func (r *Result) GenerateCommand() string {
	parts := []string{"tokenwise"}
	for _, a := range r.Generate {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for bash: as it is when it is plain, in '...' when it has no quote or
// control character, else in $'...' with the escapes bash reads there.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@") == "" {
		return s
	}
	if !strings.ContainsFunc(s, func(c rune) bool { return c == '\'' || c < 0x20 || c == 0x7f }) {
		return "'" + s + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for _, c := range []byte(s) {
		switch {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
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
	b.WriteString("</table>\n<ul>\n")
	for _, n := range r.notes() {
		b.WriteString("<li>" + html.EscapeString(n) + "</li>\n")
	}
	b.WriteString("</ul>\n<h2>Per request</h2>\n")
	b.WriteString(r.chart())
	if r.Specialization != nil {
		b.WriteString("<h2>Specialization</h2><pre>" + html.EscapeString(r.Specialization.Text()) + "</pre>\n")
	}
	b.WriteString("<h2>Sample completions</h2>\n")
	for _, sm := range r.Samples {
		fmt.Fprintf(&b, "<h3>held-out prompt %d</h3><p>input:</p><pre>%s</pre><p>expected:</p><pre>%s</pre><p>base:</p><pre>%s</pre><p>specialized+adapted:</p><pre>%s</pre>\n",
			sm.Index+1, html.EscapeString(sm.Prompt), html.EscapeString(sm.Expected), html.EscapeString(sm.Base), html.EscapeString(sm.Adapted))
	}
	if len(r.Generate) > 0 {
		fmt.Fprintf(&b, "<h2>Try it</h2><p>%s</p><pre>%s</pre><p>answer:</p><pre>%s</pre><p>expected:</p><pre>%s</pre>\n",
			html.EscapeString(r.generateIntro()), html.EscapeString(r.GenerateCommand()), html.EscapeString(r.GenerateAnswer), html.EscapeString(r.GenerateSample.Expected))
	}
	fmt.Fprintf(&b, "<p>Run in %s.</p></body></html>\n", r.Elapsed.Round(1e8))
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
