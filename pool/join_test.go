package pool

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/goruntime"
	"github.com/numapool/numapool/topology"
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
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"1x1", []Option{WithSpec("1x1")}},
		{"1x2", []Option{WithSpec("1x2")}},
		{"2x2", []Option{WithSpec("2x2")}},
		{"1x2/sleeps-at-once", []Option{WithSpec("1x2"), WithBlockTime(0)}},
		{"2x2/never-sleeps", []Option{WithSpec("2x2"), WithBlockTime(-1)}},
		{"2x2/goroutines", []Option{WithSpec("2x2"), WithBinding(pin.Goroutines)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, c.opts...)
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
			if p.startsParked() { // a pool that never sleeps never parks
				parkAll(t, p)
				if s := p.idle.searching.Load(); s != 0 {
					t.Errorf("every worker parked with the searching count at %d: %s", s, idleState{p.sched})
				}
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
	out := fmt.Sprintf("state %d live %d workers %d unparked %d searching %d waiting %d callers %d", p.state.Load(), p.live.Load(), p.idle.n.Load(), p.idle.unparked.Load(), p.idle.searching.Load(), p.idle.nWaiting, p.nCallers.Load())
	for _, d := range p.domains {
		out += fmt.Sprintf("; domain %d: sleeping %d searching %d sleepers %d inject %d pinned %d", d.index, d.sleeping.Load(), d.searching.Load(), len(p.idle.sleepers[d.index]), d.inject.Len(), d.pinned.Len())
	}
	for _, w := range p.workers {
		out += fmt.Sprintf("; worker %d: parked %v waiting %v retired %v (asked %v, ended %v) seat %d queue empty %v lifo %v join %v", w.id, p.idle.parked[w.id], p.idle.waiting[w.id], p.idle.retired[w.id], w.retire.Load(), w.owner.ended.Load(), w.seat.state.Load(), w.stealer.IsEmpty(), w.lifo.Load() != nil, w.joinSlot.Load() != nil)
	}
	return out
}

// Callers racing for the last places in the callers' table: join counts a
// place before it lends a seat, so none is lent without one (a place
// counted after the lend let two callers both take the 64th, and the
// second panicked with its seat lent for good: Close hung).
func TestCallersAtTheCap(t *testing.T) {
	p := newTestPool(t, WithSpec("1x80"))
	parkAll(t, p)
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Second)
	var joined atomic.Int64
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				_, _ = Run(p, func(w *Worker) (int, error) {
					if w.out.on {
						joined.Add(1)
					}
					time.Sleep(50 * time.Microsecond)
					return 0, nil
				})
			}
		}()
	}
	within(t, 4*hangBound, "the callers", wg.Wait, idleState{p.sched})
	if joined.Load() == 0 {
		t.Fatal("no caller joined")
	}
	if n := p.nCallers.Load(); n != 0 {
		t.Errorf("%d callers counted after every call returned", n)
	}
	var err error
	within(t, hangBound, "Close", func() { err = p.Close() }, idleState{p.sched})
	if err != nil {
		t.Fatal(err)
	}
}

// Strict work a caller takes while it waits inside its call runs on the
// node's CPUs: the caller's thread is bound to its seat's first, and gets
// its own mask back when the call ends. In a 2x1 pool the seat is its
// node's only worker, so the strict task must run on the caller.
func TestCallerRunsStrictWorkOnItsNode(t *testing.T) {
	onThreads(t)
	process, err := topology.ThreadAffinity(0)
	if err != nil {
		t.Skip(err)
	}
	p := newTestPool(t, WithSpec("2x1"))
	parkAll(t, p)
	var joined, onCaller bool
	var mask, bound topology.CPUSet
	_, err = Run(p, func(w *Worker) (int, error) {
		joined = w.out.on
		f := Async(p.Node(w.Node()).Strict(), func(w *Worker) (int, error) {
			onCaller = w.out.on
			mask, _ = topology.ThreadAffinity(0)
			bound = w.th.Bound()
			return 0, nil
		})
		return f.Wait()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !joined {
		t.Skip("the caller did not join (its CPU's node had no parked worker)")
	}
	if !onCaller {
		t.Fatal("the strict task of the seat's node ran elsewhere, but the seat is the node's only worker")
	}
	if bound.IsEmpty() || !mask.Equal(bound) {
		t.Errorf("the strict task ran on the caller's thread with mask %s, want the seat's %s", mask, bound)
	}
	closeUnnarrowed(t, p, process)
}

// A Run's caller keeps the user's Pool reachable while its function runs,
// as a Future and an awake worker do: the cleanup of a dropped Pool must
// not close it under the function.
func TestCallerKeepsThePoolOpen(t *testing.T) {
	for range 50 {
		var s *sched
		var joined, closedDuring bool
		var submitErr error
		func() {
			p := newTestPool(t, WithSpec("1x2"))
			parkAll(t, p)
			s = p.sched
			_, _ = Run(p, func(w *Worker) (int, error) {
				if joined = w.out.on; !joined {
					return 0, nil
				}
				for range 5 {
					runtime.GC()
					time.Sleep(time.Millisecond)
				}
				closedDuring = s.state.Load() != running
				h := w.Pool()
				done := make(chan error)
				go func() { done <- h.Submit(context.Background(), func(*Worker) {}) }()
				submitErr = <-done
				return 0, nil
			})
		}()
		if !joined {
			continue
		}
		if closedDuring || submitErr != nil {
			t.Errorf("the pool closed while Run's function ran: %v; a Submit from it: %v", closedDuring, submitErr)
		}
		return
	}
	t.Skip("never joined")
}

// A Run's function runs under the caller's own pprof labels before and
// after a wait inside it in which the caller ran other work.
func TestCallerKeepsItsLabels(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	defer p.Close()
	parkAll(t, p)
	// The other worker is busy, so the caller runs its own Async.
	release, started := make(chan struct{}), make(chan struct{})
	blocker := Async(p.Node(p.Nodes()[0]).Strict(), func(*Worker) (int, error) { close(started); <-release; return 0, nil })
	<-started
	defer func() { close(release); _, _ = blocker.Wait() }()
	for range 1000 {
		before, after := newLabelProbe(), newLabelProbe()
		joined := make(chan bool, 1)
		go pprof.Do(context.Background(), pprof.Labels("who", "caller"), func(context.Context) {
			_, _ = Run(p, func(w *Worker) (int, error) {
				joined <- w.out.on
				if !w.out.on {
					return 0, nil
				}
				labelProbeBlocked(before)
				_, _ = Async(w.Pool(), func(*Worker) (int, error) { return 1, nil }).Wait()
				labelProbeBlocked(after)
				return 0, nil
			})
		})
		if !<-joined {
			continue
		}
		if b, a := before.labels(t), after.labels(t); b["who"] != "caller" || a["who"] != "caller" {
			t.Errorf("Run's function ran under %v, and after a wait inside under %v; want who=caller both times", b, a)
		}
		return
	}
	t.Skip("never joined")
}
