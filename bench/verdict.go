package bench

import (
	"fmt"
	"io"
	"strings"
)

// The verdict on a workload compares numapool's default configuration
// (the contender "numapool") with the best contender of another family
// by median, sequential left out: numapool leads when even its worst
// repetition beats the other's best, trails when even its best is beaten
// by the other's worst, and ties when their ranges (min to max over the
// repetitions) overlap or touch. Ranges rather than medians, because a
// shared machine moves a median from one minute to the next by more than
// most differences between contenders, and only a gap wider than every
// repetition's spread says which is faster; with one repetition a range is a single figure, so nothing
// ties. TestVerdicts holds the rule.
const (
	Leads  = "leads"
	Ties   = "ties"
	Trails = "trails"
)

// VerdictRule is the rule in a sentence, for the prose beside a table.
const VerdictRule = "numapool's default leads when its worst repetition beats the best repetition of the best other " +
	"contender (by median, sequential aside), trails when its best is beaten by that contender's worst, and ties " +
	"when their ranges (min–max) overlap"

// VerdictShort is the rule in a clause, for a table that links to the
// report where VerdictRule is.
const VerdictShort = "leads and trails mean that the min–max ranges of numapool's default and " +
	"of the best other contender are apart, ties that they overlap"

// A Verdict is the outcome of one workload for numapool's default.
type Verdict struct {
	Workload string
	Outcome  string  // Leads, Ties or Trails
	Other    string  // the best contender of another family, by median
	VsBest   float64 // numapool's median against Other's, as Summary.VsBest
}

// defaultContender is the configuration the verdicts are about.
const defaultContender = "numapool"

// Verdicts returns a verdict for each workload of wls, in their order,
// that both numapool's default and a contender of another family ran;
// the others have none.
func Verdicts(sums []Summary, wls []Workload) []Verdict {
	var out []Verdict
	for _, wl := range wls {
		if v, ok := verdictOf(sums, wl); ok {
			out = append(out, v)
		}
	}
	return out
}

func verdictOf(sums []Summary, wl Workload) (Verdict, bool) {
	var np, best *Summary
	for i := range sums {
		s := &sums[i]
		if s.Workload != wl.Name || s.NA != "" {
			continue
		}
		switch {
		case s.Contender == defaultContender:
			np = s
		case s.Contender == "sequential" || family(s.Contender) == family(defaultContender):
		case best == nil || beats(s.Median, best.Median, wl.Higher):
			best = s
		}
	}
	if np == nil || best == nil {
		return Verdict{}, false
	}
	// worst and top are each side's worst and best repetitions.
	npWorst, npTop, oWorst, oTop := np.Max, np.Min, best.Max, best.Min
	if wl.Higher {
		npWorst, npTop, oWorst, oTop = np.Min, np.Max, best.Min, best.Max
	}
	v := Verdict{Workload: wl.Name, Outcome: Ties, Other: best.Contender, VsBest: np.VsBest}
	switch {
	case beats(npWorst, oTop, wl.Higher):
		v.Outcome = Leads
	case beats(oWorst, npTop, wl.Higher):
		v.Outcome = Trails
	}
	return v, true
}

// beats reports whether figure a is strictly better than b.
func beats(a, b float64, higher bool) bool {
	if higher {
		return a > b
	}
	return a < b
}

// verdictLine is a workload's verdict in words, for under its table.
func verdictLine(v Verdict) string {
	how := map[string]string{
		Leads:  "their ranges do not overlap",
		Ties:   "their ranges overlap",
		Trails: "their ranges do not overlap",
	}[v.Outcome]
	return fmt.Sprintf("verdict: numapool %s %s (%s; median %s)", v.Outcome, v.Other, how, ratio(v.VsBest))
}

// WriteVerdictTable writes, as Markdown, the verdicts grouped by outcome:
// a row for leads, ties and trails each, listing the workloads with the
// best other contender and the ratio of the medians; an outcome no
// workload has is left out. It writes nothing when there is no verdict.
func WriteVerdictTable(w io.Writer, vs []Verdict) {
	if len(vs) == 0 {
		return
	}
	fmt.Fprintln(w, "| numapool's default | workloads (against the best other contender: median ratio, >1 is better) |")
	fmt.Fprintln(w, "| --- | --- |")
	for _, o := range []string{Leads, Ties, Trails} {
		var cells []string
		for _, v := range vs {
			if v.Outcome == o {
				cells = append(cells, fmt.Sprintf("%s (%s, %s)", v.Workload, v.Other, ratio(v.VsBest)))
			}
		}
		if len(cells) == 0 {
			continue
		}
		label := o
		if o == Leads {
			label = "**" + o + "**"
		}
		fmt.Fprintf(w, "| %s | %s |\n", label, mdText(strings.Join(cells, ", ")))
	}
}
