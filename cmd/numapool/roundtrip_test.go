package main

import (
	"errors"
	"os"
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
// nanoseconds); a side that cannot be pinned, either one, is an error
// that carries pin's, not a hang; and neither side leaves a thread
// narrowed behind it, the calling one included.
func TestRoundTrip(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("threads are pinned on Linux only")
	}
	topo := topology.Discover()
	// narrowed counts the process's threads whose mask is not the
	// process's: a side that ended on a thread the runtime keeps (the
	// main thread is parked, not ended) must have put its mask back.
	narrowed := func() int {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			if m, err := topology.ThreadAffinity(tid); err == nil && !m.Equal(topo.Allowed) {
				n++
			}
		}
		return n
	}
	before := narrowed()
	if a, b, ok := roundTripPair(topo); ok && runtime.GOMAXPROCS(0) > 1 {
		d, err := roundTrip(a, b)
		if errors.Is(err, errRoundTripSlow) {
			// Both CPUs busy with other processes (tests of other packages
			// run at the same time): the probe gives up, as it should.
			t.Logf("CPUs %d and %d: %v (the machine is busy)", a, b, err)
		} else if err != nil || d <= 0 || d > time.Millisecond {
			t.Errorf("CPUs %d and %d: %v, %v; want a duration under a millisecond", a, b, d, err)
		}
	} else {
		t.Log("no two cores to time between")
	}
	bad := 100000
	for _, pair := range [][2]int{{topo.Allowed.First(), bad}, {bad, topo.Allowed.First()}} {
		done := make(chan error, 1)
		go func() { _, err := roundTrip(pair[0], pair[1]); done <- err }()
		select {
		case err := <-done:
			var inner error
			if err != nil {
				inner = errors.Unwrap(err)
			}
			if inner == nil || !strings.Contains(inner.Error(), strconv.Itoa(bad)) {
				t.Errorf("CPUs %d and %d: err %v, want pin's error naming CPU %d", pair[0], pair[1], err, bad)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("CPUs %d and %d: the probe hung", pair[0], pair[1])
		}
	}
	if after := narrowed(); after > before {
		t.Errorf("%d threads with a narrowed mask after the probes, %d before", after, before)
	}
}

// With one processor the two sides cannot spin at once: each answer waits
// for the runtime to preempt the other side. The probe then gives up at
// its time limit, with an error, and both sides end.
func TestRoundTripGivesUp(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to pin to")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cpus := topology.Discover().Allowed.List()
	begin := time.Now()
	_, err := roundTrip(cpus[0], cpus[1])
	took := time.Since(begin)
	if !errors.Is(err, errRoundTripSlow) || took > 10*roundTripLimit {
		t.Errorf("one processor: %v after %v, want %v after about %v", err, took, errRoundTripSlow, roundTripLimit)
	}
}

// bench prints the round trip before and after the run, and not with
// --mode, whose run perf stat measures. A probe may give up on a machine
// so busy that one of its two threads waits a second for a CPU (under
// go test ./..., beside other packages' tests): bench then says so in the
// same place, which is what is checked; other errors are not accepted.
// TestRoundTrip checks the figure itself.
func TestBenchPrintsTheRoundTrip(t *testing.T) {
	if _, _, ok := roundTripPair(topology.Discover()); runtime.GOOS != "linux" || !ok || runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two cores to pin to")
	}
	_, out, _ := runCmd("bench", "--workload", "spawn,fib-20", "--contender", "sequential", "--reps", "2", "--size", "0.01")
	gaveUp := `not measured \(timing CPUs \d+ and \d+: ` + regexp.QuoteMeta(errRoundTripSlow.Error()) + `\)`
	re := regexp.MustCompile(`(?m)^a cache line from CPU \d+ to \d+ and back, (before the run|after it): (\d+ ns|` + gaveUp + `)$`)
	if n := len(re.FindAllString(out, -1)); n != 2 {
		t.Errorf("%d round-trip lines, want 2:\n%s", n, out)
	}
	// One under each table's title: the range over its rounds.
	re = regexp.MustCompile(`(?m)^(spawn|fib-20): .*\n  \(a cache line from CPU \d+ to \d+ and back, before its rounds: (?:(\d+)-(\d+) ns(?:, \d+ of \d+ ` + gaveUp + `)?|` + gaveUp + `)\)$`)
	tables := re.FindAllStringSubmatch(out, -1)
	if len(tables) != 2 {
		t.Errorf("%d tables with the round trip over their rounds, want 2:\n%s", len(tables), out)
	}
	for _, m := range tables {
		if m[2] == "" {
			t.Logf("%s: the probe gave up before every round (a busy machine)", m[1])
			continue
		}
		if lo, hi := atoi(t, m[2]), atoi(t, m[3]); lo <= 0 || lo > hi {
			t.Errorf("%s: round trips %d-%d ns", m[1], lo, hi)
		}
	}
	_, out, _ = runCmd("bench", "--workload", "spawn", "--mode", "sequential", "--reps", "1", "--size", "0.01")
	if strings.Contains(out, "cache line") {
		t.Errorf("--mode printed the round trip:\n%s", out)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Timings that fail are counted, not left to hide the rest: a note says
// how many of a workload's rounds went unmeasured and why.
func TestRoundTripNotesCountFailures(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("threads are pinned on Linux only")
	}
	notes := map[string]string{}
	before := roundTripsBetweenRounds(topology.Discover().Allowed.First(), 100000, notes)
	before("w")
	before("w")
	if n := notes["w"]; !strings.Contains(n, "not measured") || !strings.Contains(n, "100000") {
		t.Errorf("note %q: want not measured, naming CPU 100000", n)
	}
}
