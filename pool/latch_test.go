package pool

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"testing"
	"time"
)

// waitTree runs the leaves [lo, hi) of a tree whose every level waits
// inside tasks in a way of its own: Join, Fork, a Group (with a limit on
// some levels), Futures, a parallel loop and MapReduce. Each leaf counts
// its run in hits, and some are long enough that their waiters spin out
// the block time and park. Every wait is for work the waiting task made
// (strict fork-join): a task that waits for work it did not make, run by
// a worker on top of a wait of its own, can wait for a task suspended
// under that wait on another worker's stack, which waits for it in turn.
func waitTree(w *Worker, hits []atomic.Int32, lo, hi, seed int) error {
	n := hi - lo
	if n <= 4 {
		for i := lo; i < hi; i++ {
			if (i+seed)%7 == 0 {
				for begin := time.Now(); time.Since(begin) < time.Duration(i%3)*50*time.Microsecond; {
				}
			}
			if hits[i].Add(1) != 1 {
				return fmt.Errorf("leaf %d ran twice", i)
			}
		}
		return nil
	}
	sub := func(lo, hi int) func(w *Worker) error {
		return func(w *Worker) error { return waitTree(w, hits, lo, hi, seed) }
	}
	mid := lo + n/2
	quarter := func(k int) int { return lo + n*k/4 }
	switch (bits.Len(uint(n)) + seed) % 6 {
	case 0:
		var ea, eb error
		err := w.Join(func(w *Worker) { ea = sub(lo, mid)(w) }, func(w *Worker) { eb = sub(mid, hi)(w) })
		return errors.Join(err, ea, eb)
	case 1:
		part := func(w *Worker, r [2]int) error { return sub(r[0], r[1])(w) }
		ea, eb, err := Fork(w, part, [2]int{lo, mid}, part, [2]int{mid, hi})
		return errors.Join(err, ea, eb)
	case 2:
		g := w.Pool().Group(context.Background())
		if seed%2 == 0 {
			g.SetLimit(2) // the third Go waits for room
		}
		for k := range 4 {
			g.Go(sub(quarter(k), quarter(k+1)))
		}
		return g.Wait()
	case 3:
		var fs [4]*Future[struct{}]
		for k := range 4 {
			fn := sub(quarter(k), quarter(k+1))
			fs[k] = Async[struct{}](w, func(w *Worker) (struct{}, error) { return struct{}{}, fn(w) })
		}
		var errs []error
		for k := 3; k >= 0; k-- {
			_, e := fs[k].Wait()
			errs = append(errs, e)
		}
		return errors.Join(errs...)
	case 4:
		return w.Pool().ParallelFor(context.Background(), 4, 1, func(w *Worker, a, b int) error {
			for k := a; k < b; k++ {
				if err := sub(quarter(k), quarter(k+1))(w); err != nil {
					return err
				}
			}
			return nil
		})
	default:
		got, err := MapReduce(context.Background(), w.Pool(), 4, 1, func(w *Worker, a, b int) (int, error) {
			for k := a; k < b; k++ {
				if err := sub(quarter(k), quarter(k+1))(w); err != nil {
					return 0, err
				}
			}
			return b - a, nil
		}, func(x, y int) int { return x + y })
		if err == nil && got != 4 {
			err = fmt.Errorf("MapReduce over 4 parts summed to %d", got)
		}
		return err
	}
}

// Waiters of every kind park and are woken, nested in each other, and
// every leaf runs exactly once: with the block time 0 a waiter with
// nothing to run parks at once, so nearly every wait goes through the
// latch's sleeping state.
func TestWaitersParkAndWake(t *testing.T) {
	rounds := 24
	if testing.Short() {
		rounds = 6
	}
	const leaves = 1 << 11
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"2x1, block time 0", []Option{WithSpec("2x1"), WithBlockTime(0)}},
		{"2x2, block time 0", []Option{WithSpec("2x2"), WithBlockTime(0)}},
		{"2x2", []Option{WithSpec("2x2")}},
		{"4x1, active", []Option{WithSpec("4x1"), WithBlockTime(-1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, tc.opts...)
			within(t, 12*hangBound, "the trees and Close", func() {
				for r := range rounds {
					hits := make([]atomic.Int32, leaves)
					err := onWorker(t, p, func(w *Worker) error { return waitTree(w, hits, 0, leaves, r) })
					if err != nil {
						t.Fatalf("round %d: %v", r, err)
					}
					for i := range hits {
						if n := hits[i].Load(); n != 1 {
							t.Fatalf("round %d: leaf %d ran %d times", r, i, n)
						}
					}
				}
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%d parks", p.Stats().Total.Parks)
		})
	}
}

// Several tasks on different workers wait for one Future at once: each
// parks, and the Future's end wakes every one of them.
func TestFutureWaitersAllWake(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	p := newTestPool(t, WithSpec("2x2"), WithBlockTime(0))
	defer p.Close()
	within(t, 4*hangBound, "the waits", func() {
		for r := range rounds {
			release := make(chan struct{})
			f := Async(p, func(*Worker) (int, error) { <-release; return r, nil })
			const waiters = 3
			var got [waiters]*Future[int]
			for i := range got {
				got[i] = Async(p, func(*Worker) (int, error) { return f.Wait() })
			}
			close(release)
			for i, g := range got {
				if v, err := g.Wait(); v != r || err != nil {
					t.Fatalf("round %d, waiter %d: %d, %v", r, i, v, err)
				}
			}
		}
	})
}
