package pool

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// After an abort, a worker waiting inside a task (runUntil) runs nothing
// but must still complete what it waits for: here that sits in a busy
// worker's LIFO slot, and that worker's task waits for the waiter. The
// waiter drops it from there, so both tasks and Shutdown return (a 3 s
// timeout inside T1 bounds the test if they do not).
func TestHardAbortWaiterTakesFromBusyWorkers(t *testing.T) {
	for _, abort := range []bool{false, true} {
		name := "running"
		if abort {
			name = "aborting"
		}
		t.Run(name, func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			var fut atomic.Pointer[Future[int]]
			startWait := make(chan struct{})
			t2done := make(chan struct{})
			t2entered := make(chan struct{})
			var t2err error
			var t1TimedOut atomic.Bool
			// T2 occupies one worker until told to wait for F.
			if err := p.Submit(context.Background(), func(w *Worker) {
				close(t2entered)
				<-startWait
				_, t2err = fut.Load().Wait()
				close(t2done)
			}); err != nil {
				t.Fatal(err)
			}
			<-t2entered
			t1started := make(chan struct{})
			if err := p.Submit(context.Background(), func(w *Worker) {
				// F goes to this worker's LIFO slot.
				fut.Store(Async(w, func(*Worker) (int, error) { return 1, nil }))
				close(t1started)
				if abort {
					// wait for the pool to abort (Shutdown below)
					for p.state.Load() != aborting {
						time.Sleep(time.Millisecond)
					}
				}
				close(startWait)
				select {
				case <-t2done:
				case <-time.After(3 * time.Second):
					t1TimedOut.Store(true)
				}
			}); err != nil {
				t.Fatal(err)
			}
			<-t1started
			var shutErr error
			shutDone := make(chan struct{})
			go func() {
				if abort {
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					defer cancel()
					_, shutErr = p.Shutdown(ctx)
				} else {
					shutErr = p.Close()
				}
				close(shutDone)
			}()
			select {
			case <-shutDone:
			case <-time.After(10 * time.Second):
				t.Fatal("exit hung")
			}
			t.Logf("T1 timed out waiting for T2 (a permanent hang without the bound): %v; T2's Wait: %v; exit: %v; abandoned %d",
				t1TimedOut.Load(), t2err, shutErr, p.Stats().Abandoned)
			if t1TimedOut.Load() {
				t.Errorf("hang: T2's Future.Wait (inside a task, pool aborting) neither ran nor dropped F while F sat in busy worker's LIFO slot")
			}
		})
	}
}

// With WithShardBound, Submit / Async / Pool.Join from inside a task do
// not wait for room (only the workers make it): a tree of tasks that each
// submit children completes instead of deadlocking the pool.
func TestHardBoundedSubmitFromInside(t *testing.T) {
	for _, how := range []string{"Submit", "RunJoin", "AsyncWait"} {
		t.Run(how, func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2), WithShardBound(1))
			var ran atomic.Int64
			var wg sync.WaitGroup
			var rec func(depth int) func(*Worker)
			rec = func(depth int) func(*Worker) {
				return func(w *Worker) {
					defer wg.Done()
					ran.Add(1)
					if depth == 0 {
						return
					}
					switch how {
					case "Submit":
						for range 2 {
							wg.Add(1)
							if err := w.Pool().Submit(context.Background(), rec(depth-1)); err != nil {
								wg.Done()
							}
						}
					case "RunJoin":
						wg.Add(2)
						_, _ = Run(w.Pool(), func(w *Worker) (struct{}, error) { return struct{}{}, w.Join(rec(depth-1), rec(depth-1)) })
					case "AsyncWait":
						wg.Add(2)
						f1 := Async(w.Pool(), func(w *Worker) (int, error) { rec(depth - 1)(w); return 0, nil })
						f2 := Async(w.Pool(), func(w *Worker) (int, error) { rec(depth - 1)(w); return 0, nil })
						f1.Wait()
						f2.Wait()
					}
				}
			}
			wg.Add(1)
			if err := p.Submit(context.Background(), rec(8)); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
				t.Logf("completed: %d tasks", ran.Load())
			case <-time.After(3 * time.Second):
				t.Errorf("deadlock: %d of %d tasks ran in 3s; every worker is blocked in a bounded push from inside a task", ran.Load(), 1<<9-1)
			}
			within(t, 5*time.Second, "Close", func() { p.Close() })
		})
	}
}

// Stats.Submitted matches TasksRun with loops called from inside tasks.
func TestHardStatsSubmittedInnerLoop(t *testing.T) {
	for _, spec := range []string{"", "2x1"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, specOpts(spec)...)
			for range 20 {
				_ = p.Submit(context.Background(), func(w *Worker) {
					_ = w.Pool().ParallelFor(context.Background(), 10000, 10, func(w *Worker, lo, hi int) error { spinFor(time.Microsecond); return nil })
				})
			}
			p.Close()
			st := p.Stats()
			t.Logf("Submitted %d, TasksRun %d, Completed %d, Spawned %d, SentHome %d, Abandoned %d",
				st.Submitted, st.Total.TasksRun, st.Total.Completed, st.Total.Spawned, st.Total.SentHome, st.Abandoned)
			if st.Submitted != st.Total.TasksRun+st.Abandoned {
				t.Errorf("after Close: Submitted %d != TasksRun %d + Abandoned %d", st.Submitted, st.Total.TasksRun, st.Abandoned)
			}
		})
	}
}

// Goroutines that reuse ended workers' g addresses are not taken for
// workers.
func TestHardGReuseAfterEnd(t *testing.T) {
	for round := range 20 {
		p := newTestPool(t, WithWorkers(2))
		var ws [2]*Worker
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			p.Submit(context.Background(), func(w *Worker) { mu.Lock(); ws[w.id] = w; mu.Unlock(); wg.Done() })
		}
		wg.Wait()
		g := p.Group(context.Background())
		p.Close()
		var bad atomic.Int32
		var wg2 sync.WaitGroup
		for range 2000 {
			wg2.Add(1)
			go func() {
				defer wg2.Done()
				if p.workerOf() != nil {
					bad.Add(1)
				}
				for _, w := range ws {
					if w == nil {
						continue
					}
					r := recovered(func() { w.Spawn(func(*Worker) {}) })
					if s, _ := r.(string); !strings.HasPrefix(s, "pool:") {
						bad.Add(1)
					}
				}
				g.Go(func(*Worker) error { return nil })
			}()
		}
		wg2.Wait()
		if err := g.Wait(); !errors.Is(err, ErrClosed) {
			t.Errorf("round %d: group on closed pool: %v", round, err)
		}
		if bad.Load() != 0 {
			t.Fatalf("round %d: %d goroutines taken for workers", round, bad.Load())
		}
	}
}

// Waiting on one pool's Group/Future/loop from inside tasks of another
// pool, while the first pool closes or aborts: every waiter returns.
func TestHardCrossPoolWaitersDuringExit(t *testing.T) {
	for iter := range 30 {
		a := newTestPool(t, WithSpec("2x1"))
		b := newTestPool(t, WithWorkers(2))
		var ran, accepted atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					fin := make(chan struct{})
					err := b.Submit(context.Background(), func(w *Worker) {
						defer close(fin)
						switch (c + i) % 4 {
						case 0:
							g := a.Group(context.Background())
							for range 4 {
								g.Go(func(w *Worker) error {
									w.Spawn(func(*Worker) { ran.Add(1) })
									return nil
								})
							}
							_ = g.Wait()
						case 1:
							f := Async(a, func(w *Worker) (int, error) { spinFor(10 * time.Microsecond); return 1, nil })
							_, _ = f.Wait()
						case 2:
							_ = a.ParallelFor(context.Background(), 1000, 10, func(*Worker, int, int) error { return nil })
						case 3:
							_, _ = MapReduce(context.Background(), a, 1000, 10, func(w *Worker, lo, hi int) (int, error) { return hi - lo, nil }, func(x, y int) int { return x + y })
						}
					})
					if err != nil {
						return
					}
					accepted.Add(1)
					select {
					case <-fin:
					case <-time.After(5 * time.Second):
						t.Errorf("iter %d: a waiter in pool b waiting on pool a hung", iter)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(iter%5) * time.Millisecond)
		if iter%2 == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iter%3)*100*time.Microsecond)
			within(t, 5*time.Second, "a.Shutdown", func() { a.Shutdown(ctx) })
			cancel()
		} else {
			within(t, 5*time.Second, "a.Close", func() { a.Close() })
		}
		close(stop)
		wg.Wait()
		within(t, 5*time.Second, "b.Close", func() { b.Close() })
	}
}

// Submit blocked on a full bounded shard while Close runs from
// inside a task, then from outside; TrySubmit/SubmitCtx racing.
func TestHardBoundedCloseFromInside(t *testing.T) {
	for iter := range 50 {
		p := newTestPool(t, WithSpec("2x1"), WithShardBound(2))
		var accepted, ran atomic.Int64
		release := make(chan struct{})
		// occupy both workers
		for range 2 {
			accepted.Add(1)
			p.Submit(context.Background(), func(*Worker) { ran.Add(1); <-release })
		}
		var wg sync.WaitGroup
		for c := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var err error
					fn := func(*Worker) { ran.Add(1) }
					switch c % 3 {
					case 0:
						err = p.Submit(context.Background(), fn)
					case 1:
						err = p.TrySubmit(fn)
						if errors.Is(err, ErrFull) {
							runtime.Gosched()
							continue
						}
					case 2:
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Microsecond)
						err = p.Submit(ctx, fn)
						cancel()
						if errors.Is(err, context.DeadlineExceeded) {
							continue
						}
					}
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("submit: %v", err)
						}
						return
					}
					accepted.Add(1)
				}
			}()
		}
		time.Sleep(time.Millisecond)
		close(release)
		if err := p.Node(p.Nodes()[iter%2]).Strict().Submit(context.Background(), func(w *Worker) { ran.Add(1); _ = w.Pool().Close() }); err == nil {
			accepted.Add(1)
		}
		within(t, 5*time.Second, "outside Close", func() { p.Close() })
		within(t, 5*time.Second, "submitters", func() { wg.Wait() })
		if ran.Load()+int64(p.Stats().Abandoned) != accepted.Load() {
			t.Fatalf("iter %d: accepted %d, ran %d, abandoned %d", iter, accepted.Load(), ran.Load(), p.Stats().Abandoned)
		}
	}
}
