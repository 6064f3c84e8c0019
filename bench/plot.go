package bench

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// WriteSVG draws one panel per workload: a bar per contender, its
// performance relative to the best contender of that workload (1 = best;
// times are inverted so that longer is always better). Contenders that
// cannot run a workload get no bar and an "n/a" label.
func WriteSVG(w io.Writer, sums []Summary, wls []Workload) error {
	var contenders []string
	for _, s := range sums {
		if !containsString(contenders, s.Contender) {
			contenders = append(contenders, s.Contender)
		}
	}
	const (
		barH     = 14
		gap      = 4
		labelW   = 150
		plotW    = 420
		panelPad = 34
	)
	panelH := len(contenders)*(barH+gap) + panelPad
	width := labelW + plotW + 90
	height := len(wls)*panelH + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="8" y="18" font-size="14" font-weight="bold">numapool bench: performance relative to the best contender (1 = best)</text>`+"\n")
	for i, wl := range wls {
		y0 := 40 + i*panelH
		fmt.Fprintf(&b, `<text x="8" y="%d" font-weight="bold">%s</text><text x="%d" y="%d" fill="#555">%s</text>`+"\n",
			y0+12, html.EscapeString(wl.Name), labelW, y0+12, html.EscapeString(wl.Unit+", "+wl.About))
		best := 0.0
		for _, s := range sums {
			if s.Workload == wl.Name && s.NA == "" && s.Median > 0 {
				if v := score(s.Median, wl.Higher); v > best {
					best = v
				}
			}
		}
		for k, c := range contenders {
			y := y0 + 20 + k*(barH+gap)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-6, y+barH-3, html.EscapeString(c))
			s, ok := find(sums, wl.Name, c)
			switch {
			case !ok:
			case s.NA != "" || s.Median <= 0 || best == 0:
				fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#999">n/a</text>`+"\n", labelW+4, y+barH-3)
			default:
				rel := score(s.Median, wl.Higher) / best
				color := "#9aa9b8"
				if strings.HasPrefix(c, "numapool") {
					color = "#2f6db5"
				}
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, y, rel*plotW, barH, color)
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.2f (%s %s)</text>`+"\n", float64(labelW)+rel*plotW+4, y+barH-3, rel, num(s.Median), html.EscapeString(s.Unit))
			}
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func score(v float64, higher bool) float64 {
	if higher {
		return v
	}
	return 1 / v
}

func find(sums []Summary, workload, contender string) (Summary, bool) {
	for _, s := range sums {
		if s.Workload == workload && s.Contender == contender {
			return s, true
		}
	}
	return Summary{}, false
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// WriteScaleSVG draws one panel per workload of a scaling study: speedup
// over sequential code on one CPU against the number of workers (a log2
// axis), a line per contender, and the ideal line (speedup = workers)
// dashed. Sequential itself is the baseline and gets no line.
func WriteScaleSVG(w io.Writer, rep ScaleReport, wls []Workload) error {
	const (
		panelW, panelH = 460, 240
		left, top      = 56, 30
		legendW        = 170
	)
	var panels []Workload
	for _, wl := range wls {
		for _, r := range rep.Rows {
			if r.Workload == wl.Name && r.Speedup > 0 && r.Contender != "sequential" {
				panels = append(panels, wl)
				break
			}
		}
	}
	maxK := 1
	for _, p := range rep.Points {
		maxK = max(maxK, p.Workers)
	}
	palette := []string{"#2f6db5", "#7fa7d9", "#d9822b", "#4f9d5d", "#a0522d", "#8e6bb8", "#999999"}
	var contenders []string
	for _, r := range rep.Rows {
		if r.Contender != "sequential" && !containsString(contenders, r.Contender) {
			contenders = append(contenders, r.Contender)
		}
	}
	color := func(c string) string {
		for i, x := range contenders {
			if x == c {
				return palette[i%len(palette)]
			}
		}
		return "#000"
	}
	height := 40 + len(panels)*(panelH+top+40)
	width := left + panelW + legendW
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="8" y="18" font-size="14" font-weight="bold">numapool bench --scale: speedup over sequential on one CPU (%s placement)</text>`+"\n", html.EscapeString(rep.Placement))
	// x: log2 of workers; with one point the axis still has a width.
	logK := func(k int) float64 {
		l := 0.0
		for v := float64(k); v > 1; v /= 2 {
			l++
		}
		return l
	}
	span := max(logK(maxK), 1)
	for i, wl := range panels {
		y0 := 40 + i*(panelH+top+40)
		ymax := float64(maxK)
		for _, r := range rep.Rows {
			if r.Workload == wl.Name && r.Speedup > ymax {
				ymax = r.Speedup
			}
		}
		x := func(k int) float64 { return float64(left) + logK(k)/span*panelW }
		y := func(s float64) float64 { return float64(y0+top) + panelH - s/ymax*panelH }
		fmt.Fprintf(&b, `<text x="8" y="%d" font-weight="bold">%s</text><text x="%d" y="%d" fill="#555">%s</text>`+"\n",
			y0+14, html.EscapeString(wl.Name), left+80, y0+14, html.EscapeString(wl.About))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>`+"\n", left, y0+top, panelW, panelH)
		for _, p := range rep.Points {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(p.Workers), y0+top+panelH+14, p.Workers)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#555">workers (CPUs, GOMAXPROCS)</text>`+"\n", left+panelW/2, y0+top+panelH+28)
		for _, f := range []float64{0, 0.5, 1} {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y(f*ymax)+4, num(f*ymax))
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb" stroke-dasharray="4,3"/>`+"\n", x(1), y(1), x(maxK), y(float64(maxK)))
		for _, c := range contenders {
			var pts []string
			for _, r := range rep.Rows {
				if r.Workload == wl.Name && r.Contender == c && r.Speedup > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Workers), y(r.Speedup)))
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %d workers: %.2fx</title></circle>`+"\n",
						x(r.Workers), y(r.Speedup), color(c), html.EscapeString(c), r.Workers, r.Speedup)
				}
			}
			if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color(c))
			}
		}
		for k, c := range contenders {
			ly := y0 + top + 10 + k*16
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
				left+panelW+12, ly, color(c), left+panelW+30, ly+5, html.EscapeString(c))
		}
		ly := y0 + top + 10 + len(contenders)*16
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#bbb" stroke-dasharray="4,3"/><text x="%d" y="%d">ideal</text>`+"\n",
			left+panelW+12, ly+1, left+panelW+24, ly+1, left+panelW+30, ly+5)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
