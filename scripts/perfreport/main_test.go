package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numapool/numapool/bench"
)

// The report has the header, the machine, the round trip and a section
// per workload in the suite's order, the triad's with its sizing and
// locality table.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	results := []bench.Result{
		{Workload: "triad", Contender: "numapool", Value: 20, Unit: "GB/s",
			Memory: &bench.MemoryFacts{Bytes: 1260 << 20, LLCBytes: 300 << 20, BudgetBytes: 4 << 30, MemoryNodes: 2, Allocation: "pool.AllocFirstTouch", LocalPct: ptr(99.5)}},
		{Workload: "triad", Contender: "goroutines", Value: 12, Unit: "GB/s",
			Memory: &bench.MemoryFacts{Bytes: 1260 << 20, LLCBytes: 300 << 20, BudgetBytes: 4 << 30, MemoryNodes: 2, Allocation: "pin.Map", LocalPct: ptr(52)}},
		{Workload: "spawn", Contender: "numapool", Value: 40, Unit: "ns/task"},
		{Workload: "spawn", Contender: "errgroup", NA: "a | b", Unit: "ns/task"},
		{Workload: "pingpong", Contender: "numapool", Value: 1.5, Unit: "µs", Extra: map[string]float64{"p99": 20}},
	}
	js := filepath.Join(dir, "bench.json")
	var b bytes.Buffer
	if err := bench.WriteJSON(&b, results); err != nil {
		t.Fatal(err)
	}
	write(t, js, b.String())
	topo := filepath.Join(dir, "topo.txt")
	write(t, topo, "available: 2 nodes (0-1)\n")
	rt := filepath.Join(dir, "rt.txt")
	write(t, rt, "a cache line from CPU 0 to 1 and back, before the suite: 70 ns\nnoise\n"+
		"a hand-off to another goroutine and back, both locked to their threads as a pool's workers are: 48 µs; between goroutines: 0.25 µs (before the suite)\n")

	r := report{run: "numapool bench --json", machine: "a test machine", date: "2026-01-02", goVersion: "go1.26"}
	if err := r.load(js, topo, rt); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.write(&out); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{
		"on 2026-01-02 on a test machine, built with go1.26",
		"available: 2 nodes (0-1)",
		"- a cache line from CPU 0 to 1 and back, before the suite: 70 ns",
		"- a hand-off to another goroutine and back, both locked to their threads as a pool's workers are: 48 µs; between goroutines: 0.25 µs (before the suite)",
		"| numapool | 20.0 | 20.0–20.0 | 1.67x |",
		"Arrays: 1.2 GiB together, sized against 300.0 MiB of last-level cache (4.2x it",
		"| numapool | 99.5 % | pool.AllocFirstTouch |",
		"| goroutines | 52.0 % | pin.Map |",
		`| errgroup | n/a | | | | a \| b |`,
		"### Hand-offs by wait policy",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "noise") || strings.Contains(md, "cannot tell the contenders apart") {
		t.Errorf("report has a line that is no round trip, or the one-node note on two nodes:\n%s", md)
	}
	if s, tr := strings.Index(md, "### spawn"), strings.Index(md, "### triad"); s < 0 || tr < 0 || s > tr {
		t.Errorf("sections not in the suite's order (spawn at %d, triad at %d)", s, tr)
	}
}

// Results of a workload the suite does not have are refused, not dropped.
// A run whose cache line could not be timed says so, even when the
// hand-off lines are there.
func TestReportSaysTheCacheLineWasNotMeasured(t *testing.T) {
	r := report{run: "numapool bench --json", date: "2026-01-02", goVersion: "go1.26",
		results:   []bench.Result{{Workload: "spawn", Contender: "numapool", Value: 100, Unit: "ns/task"}},
		roundTrip: []string{"a hand-off to another goroutine and back, both locked to their threads as a pool's workers are: 48 µs; between goroutines: 0.25 µs (before the suite)"}}
	var out bytes.Buffer
	if err := r.write(&out); err != nil {
		t.Fatal(err)
	}
	if md := out.String(); !strings.Contains(md, "The cache line was not measured with this run") || !strings.Contains(md, "- a hand-off to another goroutine") {
		t.Errorf("report without a cache line's timing:\n%s", md)
	}
}

func TestReportRefusesUnknownWorkloads(t *testing.T) {
	if _, err := workloadsOf([]bench.Result{{Workload: "gone"}}); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("workloadsOf: %v", err)
	}
}

func ptr(v float64) *float64 { return &v }

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The README's verdict table is rewritten from the results between its
// markers, the rest of the file kept byte for byte; a README without the
// markers is refused and left as it was.
func TestReadmeVerdicts(t *testing.T) {
	dir := t.TempDir()
	var results []bench.Result
	for i, v := range []float64{10, 11, 12} { // numapool leads goroutines on spawn
		results = append(results, bench.Result{Workload: "spawn", Contender: "numapool", Rep: i, Value: v, Unit: "ns/task"},
			bench.Result{Workload: "spawn", Contender: "goroutines", Rep: i, Value: v + 10, Unit: "ns/task"})
	}
	for i, v := range []float64{5, 8, 9} { // and ties it on fib-12, ranges touching at 5
		results = append(results, bench.Result{Workload: "fib-12", Contender: "numapool", Rep: i, Value: v, Unit: "ms"},
			bench.Result{Workload: "fib-12", Contender: "goroutines", Rep: i, Value: v - 4, Unit: "ms"})
	}
	r := report{run: "numapool bench --report --json (300 s)", date: "2026-01-02", goVersion: "go1.26", results: results}

	var out bytes.Buffer
	if err := r.write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### Verdicts",
		"| **leads** | spawn (goroutines, 1.91x) |",
		"| ties | fib-12 (goroutines, 0.50x) |",
		"Verdict: numapool leads goroutines (their ranges do not overlap; median 1.91x).",
		"*Verdict*, under each table: numapool's default leads when its worst",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	readme := filepath.Join(dir, "README.md")
	head, tail := "# x\n\n## Use it, or don't\n\n", "\n\nUse it when ...\n"
	write(t, readme, head+readmeBegin+"\n| old | table |\n"+readmeEnd+tail)
	if err := r.rewriteReadme(readme); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	want := head + readmeBegin + "\n" +
		"| numapool's default | workloads (against the best other contender: median ratio, >1 is better) |\n" +
		"| --- | --- |\n" +
		"| **leads** | spawn (goroutines, 1.91x) |\n" +
		"| ties | fib-12 (goroutines, 0.50x) |\n" +
		"\n" + wrap("From `numapool bench --report --json (300 s)`, 2026-01-02: "+bench.VerdictShort+".", 100) + "\n" +
		readmeEnd + tail
	if string(got) != want {
		t.Errorf("README:\n%s\nwant:\n%s", got, want)
	}
	if err := r.rewriteReadme(readme); err != nil { // a second run finds its markers again
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(readme); string(again) != want {
		t.Errorf("a second rewrite changed the README:\n%s", again)
	}

	for _, doc := range []string{head + tail, head + readmeEnd + "\n" + readmeBegin + "\n" + tail, head + readmeBegin + "\n" + readmeEnd + "\n" + readmeBegin + "\n" + readmeEnd + tail} {
		write(t, readme, doc)
		if err := r.rewriteReadme(readme); err == nil {
			t.Errorf("rewrote a README with misplaced markers:\n%s", doc)
		}
		if now, _ := os.ReadFile(readme); string(now) != doc {
			t.Errorf("a refused rewrite changed the README:\n%s", now)
		}
	}
}

// wrap keeps every line within the width and every word in order.
func TestWrap(t *testing.T) {
	text := "a bb ccc dddd eeeee ffffff µµµµ"
	got := wrap(text, 9)
	if want := "a bb ccc\ndddd\neeeee\nffffff\nµµµµ"; got != want {
		t.Errorf("wrap: %q, want %q", got, want)
	}
	if strings.Join(strings.Fields(got), " ") != text {
		t.Errorf("wrap lost or moved words: %q", got)
	}
}
