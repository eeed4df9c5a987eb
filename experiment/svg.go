package experiment

import (
	"fmt"
	"html"
	"strings"
)

var armColors = []string{"#9aa5b1", "#3b82f6", "#f97316"}

// svg draws two panels: field-exact accuracy per field (and all fields), per arm; and per
// request costs relative to arm 1 (output tokens, decode steps, measured time, the cost
// model on the CPU profile, LM-head rows).
func (r *Report) svg() string {
	const (
		w, h       = 1100, 420
		top, base  = 50, 330
		leftX      = 50
		leftW      = 620
		rightX     = 740
		rightW     = 330
		plotHeight = base - top
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", leftX, html.EscapeString("Debian task, "+fmt.Sprint(r.Arms[0].Prompts)+" held-out records: field-exact accuracy (%)"))
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">per request, arm 1 = 100%%</text>`+"\n", rightX)
	axis := func(x0, width int, maxV float64) {
		for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
			y := float64(base) - f*plotHeight
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e5e7eb"/><text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", x0, x0+width, y, y, x0-4, y+4, f*maxV)
		}
	}
	// Left: accuracy.
	axis(leftX, leftW, 100)
	groups := append(append([]string{}, Fields...), "all fields")
	gw := float64(leftW) / float64(len(groups))
	bw := gw * 0.8 / float64(len(r.Arms))
	for gi, g := range groups {
		for ai, a := range r.Arms {
			v := a.Exact
			if gi < len(Fields) {
				v = a.FieldAcc[gi]
			}
			x := float64(leftX) + float64(gi)*gw + gw*0.1 + float64(ai)*bw
			hh := v * plotHeight
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>arm %d %s: %.1f%%</title></rect>`+"\n", x, float64(base)-hh, bw, hh, armColors[ai%3], a.Arm, html.EscapeString(g), v*100)
		}
		cx := float64(leftX) + float64(gi)*gw + gw/2
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-35 %.1f %d)">%s</text>`+"\n", cx, base+14, cx, base+14, html.EscapeString(g))
	}
	// Right: relative costs.
	type metric struct {
		name string
		v    func(Arm) float64
	}
	metrics := []metric{
		{"output tokens", func(a Arm) float64 { return a.OutputTokens }},
		{"decode steps", func(a Arm) float64 { return a.DecodeSteps }},
		{"measured ms", func(a Arm) float64 { return a.PrefillMs + a.DecodeMs }},
		{"cost model (CPU)", func(a Arm) float64 {
			if len(a.Costs) == 0 {
				return 0
			}
			return a.Costs[0].Seconds
		}},
		{"LM-head rows", func(a Arm) float64 { return float64(a.LMHeadRows) }},
	}
	maxRel := 1.0
	for _, m := range metrics {
		ref := m.v(r.Arms[1])
		for _, a := range r.Arms {
			if ref > 0 {
				maxRel = max(maxRel, m.v(a)/ref)
			}
		}
	}
	maxRel = min(maxRel, 4)
	axis(rightX, rightW, maxRel*100)
	gw = float64(rightW) / float64(len(metrics))
	bw = gw * 0.8 / float64(len(r.Arms))
	for mi, m := range metrics {
		ref := m.v(r.Arms[1])
		for ai, a := range r.Arms {
			rel := 0.0
			if ref > 0 {
				rel = m.v(a) / ref
			}
			x := float64(rightX) + float64(mi)*gw + gw*0.1 + float64(ai)*bw
			hh := min(rel, maxRel) / maxRel * plotHeight
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>arm %d %s: %.3g (%.0f%% of arm 1)</title></rect>`+"\n", x, float64(base)-hh, bw, hh, armColors[ai%3], a.Arm, m.name, m.v(a), rel*100)
		}
		cx := float64(rightX) + float64(mi)*gw + gw/2
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-35 %.1f %d)">%s</text>`+"\n", cx, base+14, cx, base+14, html.EscapeString(m.name))
	}
	// Legend.
	for ai, a := range r.Arms {
		x := leftX + ai*230
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">arm %s</text>`+"\n", x, h-22, armColors[ai%3], x+16, h-12, html.EscapeString(a.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
