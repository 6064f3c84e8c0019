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
