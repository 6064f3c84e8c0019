package bench

import (
	"bytes"
	"strings"
	"testing"
)

// The wait-policy table has a row per hand-off workload the run has, with
// each policy's median and p99, and says which were not run.
func TestReportWaitPolicy(t *testing.T) {
	results := []Result{
		{Workload: "pingpong", Contender: "numapool", Value: 1.5, Unit: "µs", Extra: map[string]float64{"p99": 20}},
		{Workload: "pingpong", Contender: "numapool-active", Value: 1.2, Unit: "µs", Extra: map[string]float64{"p99": 3}},
		{Workload: "pingpong", Contender: "goroutines", Value: 0.4, Unit: "µs", Extra: map[string]float64{"p99": 0.8}},
		{Workload: "pingpong-spaced-2x1", Contender: "numapool", Value: 71, Unit: "µs", Extra: map[string]float64{"p99": 150}},
	}
	wls := Workloads()
	var out bytes.Buffer
	WriteWaitPolicy(&out, Summarize(results, wls))
	md := out.String()
	for _, want := range []string{
		"| hand-off | passive (default) | active | a goroutine and a channel |",
		"| back to back, the machine's nodes | 1.50 (p99 20.0) | 1.20 (p99 3.00) | 0.40 (p99 0.80) |",
		"| after a pause, two one-CPU nodes (2x1) | 71.0 (p99 150) | not run | not run |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "back to back, two one-CPU nodes") {
		t.Errorf("table has a row for a workload the run does not have:\n%s", md)
	}
	out.Reset()
	WriteWaitPolicy(&out, Summarize(results[:0], wls))
	if out.Len() != 0 {
		t.Errorf("a run without hand-offs has a wait-policy table:\n%s", out.String())
	}
}
