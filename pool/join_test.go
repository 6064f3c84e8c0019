package pool

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/numapool/numapool/pool/internal/goruntime"
)

// A Run from outside on a pool with a parked worker runs on the caller's
// own goroutine, on that worker's seat: its ID is one of the pool's, its
// spawns run, and the seat is parked again after. A strict node's Run is
// handed to a worker's goroutine.
func TestCallerJoinsRun(t *testing.T) {
	if !goruntime.Cheap {
		t.Skip("no cheap goroutine identity on this architecture")
	}
	p := newTestPool(t, WithSpec("1x2"))
	parkAll(t, p)
	me := goruntime.G()
	var spawned atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	id, err := Run(p, func(w *Worker) (int, error) {
		if goruntime.G() != me {
			t.Error("Run's function ran on another goroutine with a worker parked")
		}
		w.Spawn(func(*Worker) { spawned.Add(1); wg.Done() })
		return w.ID(), nil
	})
	if err != nil || id < 0 || id >= p.Workers() {
		t.Fatalf("Run = %d, %v; want an ID in [0, %d)", id, err, p.Workers())
	}
	wg.Wait()
	if got := p.Stats().Total.CallerRuns; got == 0 {
		t.Errorf("Stats counts %d caller runs", got)
	}
	parkAll(t, p) // the seat went back to the sleepers: every worker parks
	if _, err := Run(p.Node(p.Nodes()[0]).Strict(), func(*Worker) (int, error) {
		if goruntime.G() == me {
			t.Error("a strict node's Run ran on its caller")
		}
		return 0, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Callers from many goroutines at once join and leave seats while the
// pool runs submitted work, loops, reductions and joins: every task runs
// exactly once, and Close drains with no seat left lent.
func TestCallersCountedUnderLoad(t *testing.T) {
	for _, spec := range []string{"1x1", "1x2", "2x2"} {
		t.Run(spec, func(t *testing.T) {
			p := newTestPool(t, WithSpec(spec))
			const callers, calls = 8, 400
			var ran [callers][calls]atomic.Int32
			var loops atomic.Int64
			var wg sync.WaitGroup
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						switch i % 4 {
						case 0:
							_, _ = Run(p, func(w *Worker) (int, error) {
								return 0, w.Join(func(*Worker) { ran[c][i].Add(1) }, func(*Worker) {})
							})
						case 1:
							_ = p.ParallelFor(context.Background(), 8, 1, func(w *Worker, lo, hi int) error {
								if lo == 0 {
									ran[c][i].Add(1)
								}
								loops.Add(int64(hi - lo))
								return nil
							})
						case 2:
							sum, err := MapReduce(context.Background(), p, 8, 1, func(w *Worker, lo, hi int) (int, error) {
								if lo == 0 {
									ran[c][i].Add(1)
								}
								return hi - lo, nil
							}, func(a, b int) int { return a + b })
							if sum != 8 || err != nil {
								t.Errorf("MapReduce = %d, %v; want 8", sum, err)
							}
						default:
							done := make(chan struct{})
							_ = p.Submit(context.Background(), func(*Worker) { ran[c][i].Add(1); close(done) })
							<-done
						}
					}
				}()
			}
			within(t, 4*hangBound, "the callers", wg.Wait, idleState{p.sched})
			// Quiet again, every seat is back and parked, and the idle
			// counts balance: a seat's return that left a search counted
			// (or uncounted) shows here.
			parkAll(t, p)
			if s := p.idle.searching.Load(); s != 0 {
				t.Errorf("every worker parked with the searching count at %d: %s", s, idleState{p.sched})
			}
			for c := range callers {
				for i := range calls {
					if got := ran[c][i].Load(); got != 1 {
						t.Fatalf("caller %d call %d ran %d times", c, i, got)
					}
				}
			}
			if want := int64(callers * (calls / 4) * 8); loops.Load() != want {
				t.Errorf("loops ran %d indexes, want %d", loops.Load(), want)
			}
			var err error
			within(t, hangBound, "Close", func() { err = p.Close() })
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// idleState reports the idle protocol's counters and every worker's
// queues and seat, for a test that found the pool hung.
type idleState struct{ p *sched }

func (s idleState) String() string {
	p := s.p
	p.idle.mu.Lock()
	defer p.idle.mu.Unlock()
	out := fmt.Sprintf("unparked %d searching %d callers %d", p.idle.unparked.Load(), p.idle.searching.Load(), p.nCallers.Load())
	for _, d := range p.domains {
		out += fmt.Sprintf("; domain %d: sleeping %d searching %d sleepers %d inject %d pinned %d", d.index, d.sleeping.Load(), d.searching.Load(), len(p.idle.sleepers[d.index]), d.inject.Len(), d.pinned.Len())
	}
	for _, w := range p.workers {
		out += fmt.Sprintf("; worker %d: parked %v waiting %v seat %d queue empty %v lifo %v join %v", w.id, p.idle.parked[w.id], p.idle.waiting[w.id], w.seat.state.Load(), w.stealer.IsEmpty(), w.lifo.Load() != nil, w.joinSlot.Load() != nil)
	}
	return out
}
