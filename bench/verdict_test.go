package bench

import (
	"bytes"
	"strings"
	"testing"
)

// results gives contender c on workload wl one repetition per value.
func results(wl, c, unit string, values ...float64) []Result {
	var out []Result
	for i, v := range values {
		out = append(out, Result{Workload: wl, Contender: c, Rep: i, Value: v, Unit: unit})
	}
	return out
}

// numapool's default leads or trails the best contender of another family
// only when their ranges do not meet; ranges that overlap or touch tie,
// whatever the medians; its own family and sequential do not count, and
// a workload it did not run has no verdict. For a throughput the sides
// swap.
func TestVerdicts(t *testing.T) {
	var rs []Result
	// spawn (lower is better): numapool 10-12 against goroutines 13-20; ants
	// is worse; numapool-flat and sequential are better but do not count.
	rs = append(rs, results("spawn", "numapool", "ns/task", 10, 11, 12)...)
	rs = append(rs, results("spawn", "numapool-flat", "ns/task", 1, 1, 1)...)
	rs = append(rs, results("spawn", "sequential", "ns/task", 2, 2, 2)...)
	rs = append(rs, results("spawn", "goroutines", "ns/task", 13, 14, 20)...)
	rs = append(rs, results("spawn", "ants", "ns/task", 30, 31, 32)...)
	// fib-12: numapool's best (5) equals goroutines' worst: touching ranges tie,
	// though numapool's median is twice as slow.
	rs = append(rs, results("fib-12", "numapool", "ms", 5, 8, 9)...)
	rs = append(rs, results("fib-12", "goroutines", "ms", 3, 4, 5)...)
	// triad (higher is better): numapool 10-11 GB/s against 12-14.
	rs = append(rs, results("triad", "numapool", "GB/s", 10, 11, 11)...)
	rs = append(rs, results("triad", "goroutines", "GB/s", 12, 13, 14)...)
	// uts: numapool 5-6 against pond 2-4, the best other, and goroutines n/a.
	rs = append(rs, results("uts", "numapool", "Mnodes/s", 5, 6)...)
	rs = append(rs, results("uts", "pond", "Mnodes/s", 2, 4)...)
	rs = append(rs, Result{Workload: "uts", Contender: "goroutines", NA: "no", Unit: "Mnodes/s"})
	// reduce: only numapool's family ran; pingpong: numapool did not run.
	rs = append(rs, results("reduce", "numapool", "ms", 1)...)
	rs = append(rs, results("reduce", "numapool-flat", "ms", 2)...)
	rs = append(rs, results("pingpong", "goroutines", "µs", 1)...)

	wls := Workloads()
	got := Verdicts(Summarize(rs, wls), wls)
	want := []Verdict{
		{Workload: "spawn", Outcome: Leads, Other: "goroutines"},
		{Workload: "fib-12", Outcome: Ties, Other: "goroutines"},
		{Workload: "triad", Outcome: Trails, Other: "goroutines"},
		{Workload: "uts", Outcome: Leads, Other: "pond"},
	}
	if len(got) != len(want) {
		t.Fatalf("verdicts %+v, want %+v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.Workload != w.Workload || g.Outcome != w.Outcome || g.Other != w.Other {
			t.Errorf("verdict %d: %+v, want %+v", i, g, w)
		}
	}
	if r := got[0].VsBest; r < 1.27 || r > 1.28 { // 14/11
		t.Errorf("spawn's ratio %v, want 14/11", r)
	}

	var b bytes.Buffer
	WriteVerdictTable(&b, got)
	md := b.String()
	for _, line := range []string{
		"| **leads** | spawn (goroutines, 1.27x), uts (pond, 1.83x) |",
		"| ties | fib-12 (goroutines, 0.50x) |",
		"| trails | triad (goroutines, 0.85x) |",
	} {
		if !strings.Contains(md, line) {
			t.Errorf("verdict table lacks %q:\n%s", line, md)
		}
	}
	b.Reset()
	WriteVerdictTable(&b, got[1:2])
	if strings.Contains(b.String(), "leads") || strings.Contains(b.String(), "trails") {
		t.Errorf("verdict table has a row for an outcome no workload has:\n%s", b.String())
	}

	b.Reset()
	WriteTables(&b, Summarize(rs, wls), wls)
	if !strings.Contains(b.String(), "verdict: numapool ties goroutines (their ranges overlap; median 0.50x)") {
		t.Errorf("the fib-12 table lacks its verdict:\n%s", b.String())
	}
	b.Reset()
	WriteMarkdown(&b, Summarize(rs, wls), wls, nil)
	if !strings.Contains(b.String(), "Verdict: numapool trails goroutines (their ranges do not overlap; median 0.85x).") {
		t.Errorf("the triad section lacks its verdict:\n%s", b.String())
	}
}
