package main

import (
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numapool/numapool/topology"
)

// The pair to time is two CPUs of the first allowed CPU's node on
// different cores: SMT siblings share a core's caches and would time
// nothing a hand-off between two workers crosses.
func TestRoundTripPairTakesAnotherCore(t *testing.T) {
	topo := &topology.Topology{
		Nodes: []topology.Node{{ID: 0, CPUs: topology.NewCPUSet(0, 1, 2, 3)}, {ID: 1, CPUs: topology.NewCPUSet(4, 5)}},
		Cores: []topology.Core{
			{ID: 0, CPUs: topology.NewCPUSet(0, 2)}, {ID: 1, CPUs: topology.NewCPUSet(1, 3)},
			{ID: 2, CPUs: topology.NewCPUSet(4)}, {ID: 3, CPUs: topology.NewCPUSet(5)},
		},
	}
	for _, tc := range []struct {
		allowed []int
		a, b    int
		ok      bool
	}{
		{[]int{0, 1, 2, 3, 4, 5}, 0, 1, true},
		{[]int{0, 2, 3}, 0, 3, true},     // 2 is 0's sibling
		{[]int{0, 2, 4, 5}, 0, 0, false}, // one core on 0's node: 4 and 5 are another node's
		{[]int{4, 5}, 4, 5, true},
		{[]int{5}, 0, 0, false},
	} {
		topo.Allowed = topology.NewCPUSet(tc.allowed...)
		a, b, ok := roundTripPair(topo)
		if ok != tc.ok || ok && (a != tc.a || b != tc.b) {
			t.Errorf("allowed %v: got %d, %d, %v; want %d, %d, %v", tc.allowed, a, b, ok, tc.a, tc.b, tc.ok)
		}
	}
}

// The probe returns a time a cache line can take (tens to hundreds of
// nanoseconds), and a CPU it cannot pin to is an error that names it, not
// a hang.
func TestRoundTrip(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("threads are pinned on Linux only")
	}
	topo := topology.Discover()
	if a, b, ok := roundTripPair(topo); ok {
		d, err := roundTrip(a, b)
		if err != nil || d <= 0 || d > time.Millisecond {
			t.Errorf("CPUs %d and %d: %v, %v; want a duration under a millisecond", a, b, d, err)
		}
	}
	bad := 100000
	done := make(chan error, 1)
	go func() { _, err := roundTrip(topo.Allowed.First(), bad); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), strconv.Itoa(bad)) {
			t.Errorf("CPU %d: err %v, want one that names the CPU", bad, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("CPU %d: the probe hung", bad)
	}
}

// bench prints the round trip before and after the run, and not with
// --mode, whose run perf stat measures.
func TestBenchPrintsTheRoundTrip(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to pin to")
	}
	_, out, _ := runCmd("bench", "--workload", "spawn", "--contender", "sequential", "--reps", "1", "--size", "0.01")
	re := regexp.MustCompile(`(?m)^a cache line from CPU \d+ to \d+ and back, (before the run|after it): \d+ ns$`)
	if n := len(re.FindAllString(out, -1)); n != 2 {
		t.Errorf("%d round-trip lines, want 2:\n%s", n, out)
	}
	_, out, _ = runCmd("bench", "--workload", "spawn", "--mode", "sequential", "--reps", "1", "--size", "0.01")
	if strings.Contains(out, "cache line") {
		t.Errorf("--mode printed the round trip:\n%s", out)
	}
}
