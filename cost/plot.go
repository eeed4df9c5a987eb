package cost

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// PlotSVG draws time per token against batch size (both axes logarithmic) for prefill and
// decode, marks the decode points that are compute-bound, and draws a line where decode
// stops being bandwidth-bound. Written by hand: one self-contained SVG, no dependencies.
func PlotSVG(title string, pts []SweepPoint) string {
	const (
		width, height = 760, 460
		left, right   = 80, 30
		top, bottom   = 50, 60
	)
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	if len(pts) == 0 {
		return ""
	}
	minB, maxB := float64(pts[0].Batch), float64(pts[len(pts)-1].Batch)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		for _, v := range []float64{p.PrefillPerTokS, p.DecodePerTokS} {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	// Whole decades around the data, in milliseconds.
	dLo, dHi := math.Floor(math.Log10(lo*1000)), math.Ceil(math.Log10(hi*1000))
	if dHi == dLo {
		dHi++
	}
	x := func(b float64) float64 {
		if maxB == minB {
			return float64(left) + pw/2
		}
		return float64(left) + pw*(math.Log2(b)-math.Log2(minB))/(math.Log2(maxB)-math.Log2(minB))
	}
	y := func(s float64) float64 {
		return float64(top) + ph*(1-(math.Log10(s*1000)-dLo)/(dHi-dLo))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	// Grid and axes.
	for d := dLo; d <= dHi; d++ {
		yy := y(math.Pow(10, d) / 1000)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, width-right, yy)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", left-6, yy+4, msLabel(math.Pow(10, d)))
	}
	for _, p := range pts {
		xx := x(float64(p.Batch))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", xx, top, xx, height-bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%d</text>`+"\n", xx, height-bottom+16, p.Batch)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">batch size (sequences per step)</text>`+"\n", float64(left)+pw/2, height-18)
	fmt.Fprintf(&b, `<text transform="translate(20 %.0f) rotate(-90)" text-anchor="middle">time per token</text>`+"\n", float64(top)+ph/2)
	// Where decode stops being bandwidth-bound.
	for i, p := range pts {
		if p.DecodeBound == "compute" {
			xx := x(float64(p.Batch))
			if i > 0 {
				xx = (x(float64(pts[i-1].Batch)) + xx) / 2
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999" stroke-dasharray="5,4"/>`+"\n", xx, top, xx, height-bottom)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="end" fill="#666">decode compute-bound from here →</text>`+"\n", xx-6, float64(top)+ph*0.55)
			break
		}
	}
	line := func(color string, get func(SweepPoint) float64) {
		var path strings.Builder
		for i, p := range pts {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, x(float64(p.Batch)), y(get(p)))
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2.5"/>`+"\n", strings.TrimSpace(path.String()), color)
	}
	line("#1f77b4", func(p SweepPoint) float64 { return p.PrefillPerTokS })
	line("#d62728", func(p SweepPoint) float64 { return p.DecodePerTokS })
	for _, p := range pts {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="#1f77b4"/>`+"\n", x(float64(p.Batch)), y(p.PrefillPerTokS))
		fill := "#d62728" // memory-bound: filled
		if p.DecodeBound == "compute" {
			fill = "white"
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="#d62728" stroke-width="1.5"/>`+"\n", x(float64(p.Batch)), y(p.DecodePerTokS), fill)
	}
	// Legend.
	lx, ly := width-right-250, top+30
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="240" height="62" fill="white" stroke="#ccc"/>`+"\n", lx, ly-16)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f77b4" stroke-width="2.5"/><text x="%d" y="%d">prefill, per input token</text>`+"\n", lx+8, ly, lx+36, ly, lx+44, ly+4)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#d62728" stroke-width="2.5"/><text x="%d" y="%d">decode, per output token</text>`+"\n", lx+8, ly+18, lx+36, ly+18, lx+44, ly+22)
	fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="4" fill="#d62728"/><circle cx="%d" cy="%d" r="4" fill="white" stroke="#d62728" stroke-width="1.5"/><text x="%d" y="%d">memory- / compute-bound</text>`+"\n", lx+16, ly+36, lx+30, ly+36, lx+44, ly+40)
	b.WriteString("</svg>\n")
	return b.String()
}

func msLabel(ms float64) string {
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%g s", ms/1000)
	case ms >= 1:
		return fmt.Sprintf("%g ms", ms)
	case ms >= 0.001:
		return fmt.Sprintf("%g µs", ms*1000)
	}
	return fmt.Sprintf("%g ns", ms*1e6)
}
