package main

import (
	"regexp"
	"testing"
)

// A hand-off between locked goroutines wakes the other thread each way;
// between goroutines it does not: the first costs more on any machine.
func TestHandOff(t *testing.T) {
	locked, free := handOff(true), handOff(false)
	if free <= 0 || locked <= free {
		t.Errorf("hand-off and back: locked %v, between goroutines %v; want both above 0 and the locked one the costlier", locked, free)
	}
}

// bench prints the two hand-offs once, under its first line, and not
// with --mode, whose run perf stat measures.
func TestBenchPrintsTheHandOff(t *testing.T) {
	re := regexp.MustCompile(`(?m)^a hand-off to another goroutine and back, both locked to their threads as a pool's workers are: \d+(\.\d\d)? µs; between goroutines: \d+(\.\d\d)? µs$`)
	code, out, errs := runCmd("bench", "--workload", "spawn", "--contender", "sequential", "--reps", "1", "--size", "0.01")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, errs)
	}
	if n := len(re.FindAllString(out, -1)); n != 1 {
		t.Errorf("%d hand-off lines, want 1:\n%s", n, out)
	}
	code, out, errs = runCmd("bench", "--workload", "spawn", "--mode", "sequential", "--reps", "1", "--size", "0.01")
	if code != 0 {
		t.Fatalf("bench --mode: exit %d: %s", code, errs)
	}
	if re.MatchString(out) {
		t.Errorf("with --mode, a hand-off line:\n%s", out)
	}
}
