package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// writeCDF draws one panel per scenario with the startup-latency CDF of
// each mode, and the p99 lower bound as a dashed line, in plain SVG.
func writeCDF(w io.Writer, results []Result) error {
	var order []string
	byScenario := map[string][]Result{}
	for _, r := range results {
		if _, ok := byScenario[r.Scenario]; !ok {
			order = append(order, r.Scenario)
		}
		byScenario[r.Scenario] = append(byScenario[r.Scenario], r)
	}
	const pw, ph, pad, cols = 420, 260, 50, 2
	rows := (len(order) + cols - 1) / cols
	W, H := cols*pw, rows*ph+40
	colors := map[string]string{"baseline": "#d62728", "syncpod": "#1f77b4"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="20" font-size="14">Pod startup latency CDF, baseline (kubelet-like) vs syncpod, simulated node</text>`+"\n")
	for i, name := range order {
		x0, y0 := (i%cols)*pw+pad, 40+(i/cols)*ph+10
		w, h := pw-pad-20, ph-pad-20
		rs := byScenario[name]
		var xmax time.Duration
		for _, r := range rs {
			for _, d := range r.Startups {
				xmax = max(xmax, d)
			}
			xmax = max(xmax, r.LowerBoundP99)
		}
		if xmax == 0 {
			xmax = time.Second
		}
		xmaxS := niceCeil(xmax.Seconds())
		fmt.Fprintf(&b, `<g><text x="%d" y="%d" font-size="12" font-weight="bold">%s</text>`+"\n", x0, y0-2, html.EscapeString(name))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0+5, w, h)
		for k := 0; k <= 4; k++ {
			xv := xmaxS * float64(k) / 4
			px := float64(x0) + float64(w)*float64(k)/4
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%.3gs</text>`+"\n",
				px, y0+5, px, y0+5+h, px, y0+h+18, xv)
			py := float64(y0+5+h) - float64(h)*float64(k)/4
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%d%%</text>`+"\n", x0-4, py+4, k*25)
		}
		for j, r := range rs {
			col := colors[r.Mode]
			if col == "" {
				col = "#555"
			}
			n := len(r.Startups)
			if n > 0 {
				var pts []string
				pts = append(pts, fmt.Sprintf("%d,%d", x0, y0+5+h))
				for k, d := range r.Startups {
					px := float64(x0) + float64(w)*d.Seconds()/xmaxS
					pyPrev := float64(y0+5+h) - float64(h)*float64(k)/float64(n)
					py := float64(y0+5+h) - float64(h)*float64(k+1)/float64(n)
					pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", px, pyPrev, px, py))
				}
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s p99 %v</text>`+"\n", x0+w-150, y0+h-10-14*j, col, r.Mode, r.P99.Round(time.Millisecond))
			if r.LowerBoundP99 > 0 && j == 0 {
				px := float64(x0) + float64(w)*r.LowerBoundP99.Seconds()/xmaxS
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#2ca02c" stroke-dasharray="4,3"/><text x="%.1f" y="%d" fill="#2ca02c">p99 bound</text>`+"\n",
					px, y0+5, px, y0+5+h, px+3, y0+18)
			}
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
