package pool

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func forkIdentity(_ *Worker, x int) int { return x }

type fibArg struct{ n, cutoff int }

func fibFork(w *Worker, a fibArg) int {
	if a.n <= a.cutoff {
		return fibSeq(a.n)
	}
	x, y, err := Fork(w, fibFork, fibArg{a.n - 1, a.cutoff}, fibFork, fibArg{a.n - 2, a.cutoff})
	if err != nil {
		panic(err)
	}
	return x + y
}

// A Fork that nobody steals from allocates nothing: a fib by Fork on a
// one-worker pool, after a first call has made the records.
func TestForkAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newTestPool(t, WithWorkers(1)) // nobody to steal fb
	defer p.Close()
	want := fibSeq(20)
	allocs := onWorker(t, p, func(w *Worker) float64 {
		_ = fibFork(w, fibArg{20, 2}) // warm: the first Forks make the records
		return testing.AllocsPerRun(20, func() {
			if got := fibFork(w, fibArg{20, 2}); got != want {
				t.Errorf("fib(20) = %d, want %d", got, want)
			}
		})
	})
	if allocs != 0 {
		t.Errorf("a fib(20) by Fork allocated %.1f times", allocs)
	}
}

// fb runs on another worker while fa waits for it, and its value comes
// back from there.
func TestForkHalfIsStolen(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	for range 50 {
		bDone := make(chan struct{})
		type ran struct{ worker, value int }
		got := onWorker(t, p, func(w *Worker) [3]int {
			ra, rb, err := Fork(w, func(w *Worker, x int) ran {
				select {
				case <-bDone:
				case <-time.After(10 * time.Second):
					panic("Fork's fb never ran while fa waited: nobody took it from the join slot")
				}
				return ran{w.ID(), x}
			}, 1, func(w *Worker, x int) ran {
				close(bDone)
				return ran{w.ID(), x}
			}, 2)
			if err != nil {
				t.Error(err)
			}
			if ra.value != 1 || rb.value != 2 {
				t.Errorf("Fork = %v, %v; want values 1 and 2", ra, rb)
			}
			return [3]int{ra.worker, rb.worker}
		})
		if got[0] == got[1] {
			t.Fatalf("fa and fb ran on worker %d", got[0])
		}
	}
}

// Forks of different types nest: each gets a record of its own types,
// whatever the worker's list holds, and every value comes back to its
// caller, also when thieves run the fb halves.
func TestForkNestsDifferentTypes(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	var leaves atomic.Int64
	var words func(w *Worker, d int) string
	count := func(w *Worker, d int) int {
		if d == 0 {
			leaves.Add(1)
			return 1
		}
		s, n, err := Fork(w, words, d-1, func(w *Worker, d int) int { return len(words(w, d)) }, d-1)
		if err != nil {
			panic(err)
		}
		return len(s) + n
	}
	words = func(w *Worker, d int) string {
		if d == 0 {
			leaves.Add(1)
			return "x"
		}
		n, s, err := Fork(w, count, d-1, words, d-1)
		if err != nil {
			panic(err)
		}
		return strings.Repeat("x", n) + s
	}
	for rep := range 20 {
		leaves.Store(0)
		got := onWorker(t, p, func(w *Worker) int { return len(words(w, 12)) })
		if got != 1<<12 || leaves.Load() != 1<<12 {
			t.Fatalf("rep %d: %d from %d leaves, want %d from %d", rep, got, leaves.Load(), 1<<12, 1<<12)
		}
	}
}

// Panics in fa and fb come back as one *PanicError each, joined, with
// the value of the half that did not panic.
func TestForkReturnsPanics(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	type out struct {
		ra, rb int
		err    error
	}
	boom := func(*Worker, int) int { panic("left") }
	for _, tc := range []struct {
		name           string
		fa, fb         func(*Worker, int) int
		wantA, wantB   int
		panics, absent string
	}{
		{"both", boom, func(*Worker, int) int { panic(errors.New("right")) }, 0, 0, "left", ""},
		{"fb only", forkIdentity, func(*Worker, int) int { panic("right") }, 3, 0, "right", "left"},
	} {
		r := onWorker(t, p, func(w *Worker) out {
			ra, rb, err := Fork(w, tc.fa, 3, tc.fb, 4)
			return out{ra, rb, err}
		})
		var pe *PanicError
		if !errors.As(r.err, &pe) || !strings.Contains(r.err.Error(), tc.panics) ||
			(tc.absent != "" && strings.Contains(r.err.Error(), tc.absent)) {
			t.Errorf("%s: Fork error = %v", tc.name, r.err)
		}
		if r.ra != tc.wantA || r.rb != tc.wantB {
			t.Errorf("%s: Fork = %d, %d; want %d, %d", tc.name, r.ra, r.rb, tc.wantA, tc.wantB)
		}
	}
	msg := onWorker(t, p, func(w *Worker) any {
		return recovered(func() { _, _, _ = Fork[int, int, int, int](w, nil, 1, forkIdentity, 2) })
	})
	if !strings.HasPrefix(fmt.Sprint(msg), "pool: Fork of a nil function") {
		t.Errorf("Fork of nil panicked with %v", msg)
	}
}
