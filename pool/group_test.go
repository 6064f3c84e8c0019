package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// Calls of Go from outside the pool that race Close: a function the pool
// refused never runs; one it accepted runs once, or is skipped because a
// refusal failed the group first, but is never left behind; and Wait
// returns. A turn that ran a function whose push was still under way ran
// a function that was then refused, and left an accepted one in the fifo
// with no turn to run it.
func TestGroupGoRacingClose(t *testing.T) {
	rounds := 600
	if testing.Short() {
		rounds = 50
	}
	const callers, calls = 4, 4
	var sawRefused, sawAccepted bool
	for round := range rounds {
		p := newTestPool(t, WithWorkers(2))
		g := p.Group(context.Background())
		var ran [callers * calls]atomic.Int32
		var refused [callers * calls]atomic.Bool
		var err error
		within(t, hangBound, fmt.Sprintf("round %d: Go, Close and Wait", round), func() {
			start := make(chan struct{})
			var began atomic.Int32 // calls begun
			var wg sync.WaitGroup
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for k := range calls {
						i := c*calls + k
						began.Add(1)
						// start is Go's queueing, which also says whether the
						// pool refused the function.
						if err := g.start(nil, func(*Worker) error { ran[i].Add(1); return nil }); err != nil {
							if !errors.Is(err, ErrClosed) {
								t.Errorf("round %d: function %d refused with %v, want ErrClosed", round, i, err)
							}
							refused[i].Store(true)
						}
					}
				}()
			}
			// Close once some of the calls have begun, a different number
			// each round, so that it meets calls in every stage.
			closeAfter := int32(round % (callers * calls))
			closed := make(chan error, 1)
			go func() {
				<-start
				for began.Load() < closeAfter {
					runtime.Gosched()
				}
				closed <- p.Close()
			}()
			close(start)
			wg.Wait()
			if err := <-closed; err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
			err = g.Wait()
		})
		nRefused := 0
		for i := range ran {
			if refused[i].Load() {
				nRefused++
			}
		}
		for i := range ran {
			n, r := ran[i].Load(), refused[i].Load()
			switch {
			case r && n != 0:
				t.Errorf("round %d: function %d was refused and ran %d times", round, i, n)
			case !r && n > 1:
				t.Errorf("round %d: function %d was accepted and ran %d times", round, i, n)
			case !r && n == 0 && nRefused == 0:
				t.Errorf("round %d: function %d was accepted and never ran, with nothing refused to fail the group", round, i)
			}
		}
		g.mu.Lock()
		left := len(g.fifo) - g.first
		g.mu.Unlock()
		if left != 0 {
			t.Errorf("round %d: Wait returned with %d functions in the group's fifo, which no turn will take", round, left)
		}
		if nRefused > 0 && !errors.Is(err, ErrClosed) {
			t.Errorf("round %d: %d functions refused, and Wait = %v; want ErrClosed", round, nRefused, err)
		}
		if nRefused == 0 && err != nil {
			t.Errorf("round %d: nothing refused, and Wait = %v", round, err)
		}
		if ab := p.Stats().Abandoned; ab != 0 {
			t.Errorf("round %d: Close abandoned %d tasks", round, ab)
		}
		sawRefused = sawRefused || nRefused > 0
		sawAccepted = sawAccepted || nRefused < len(ran)
		if t.Failed() {
			return
		}
	}
	if !sawRefused || !sawAccepted {
		t.Errorf("refusals seen: %v, acceptances seen: %v; the calls never raced Close", sawRefused, sawAccepted)
	}
}

// Functions started from outside begin in the order of the Go calls:
// function #100 starts among the first 100+2*workers, whether the workers
// run the functions while they are being queued or are held until all
// 200 are queued.
func TestGroupStartsInCallOrder(t *testing.T) {
	const tasks = 200
	for _, spec := range []string{"", "2x2"} {
		for _, hold := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/held=%v", specName(spec), hold), func(t *testing.T) {
				groupStartOrder(t, specOpts(spec), tasks, hold)
			})
		}
	}
}

func groupStartOrder(t *testing.T, opts []Option, tasks int, hold bool) {
	p := newTestPool(t, opts...)
	defer p.Close()
	workers := p.Workers()
	// Held: every worker waits until the whole group is queued.
	release := make(chan struct{})
	if hold {
		var held sync.WaitGroup
		held.Add(workers)
		for range workers {
			if err := p.Submit(context.Background(), func(*Worker) { held.Done(); <-release }); err != nil {
				t.Fatal(err)
			}
		}
		within(t, hangBound, "holding every worker", held.Wait)
	}

	pos := make([]int, tasks)
	var seq atomic.Int64
	g := p.Group(context.Background())
	for i := range tasks {
		g.Go(func(*Worker) error {
			pos[i] = int(seq.Add(1) - 1)
			spinFor(20 * time.Microsecond)
			return nil
		})
	}
	close(release)
	within(t, hangBound, "Group.Wait", func() {
		if err := g.Wait(); err != nil {
			t.Errorf("Wait = %v", err)
		}
	})
	far, maxLate := 0, 0
	for i, at := range pos {
		if d := at - i; d > 2*workers || d < -2*workers {
			far++
		}
		maxLate = max(maxLate, at-i)
	}
	t.Logf("%d workers: function #100 started %dth; %d of %d started more than %d places from their call; latest by %d",
		workers, pos[100]+1, far, tasks, 2*workers, maxLate)
	if pos[100] >= 100+2*workers {
		t.Errorf("function #100 started %dth, want among the first %d", pos[100]+1, 100+2*workers)
	}
	if far > tasks/10 {
		t.Errorf("%d of %d functions started more than %d places from their call", far, tasks, 2*workers)
	}
}

// When function #10 fails, the group skips what has not begun; errgroup
// (with the same limit of concurrency) starts everything. Both counts are
// logged; numapool's must be small.
func TestGroupFailureSkipsTheRestVersusErrgroup(t *testing.T) {
	const tasks, failing = 200, 10
	const work = 200 * time.Microsecond
	for _, spec := range []string{"", "2x2"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, specOpts(spec)...)
			defer p.Close()
			workers := p.Workers()

			var failed atomic.Bool
			var started, after atomic.Int64
			task := func(i int) error {
				started.Add(1)
				if failed.Load() {
					after.Add(1)
				}
				spinFor(work)
				if i == failing {
					failed.Store(true)
					return errBody
				}
				return nil
			}

			g := p.Group(context.Background())
			for i := range tasks {
				g.Go(func(*Worker) error { return task(i) })
			}
			var err error
			within(t, hangBound, "Group.Wait", func() { err = g.Wait() })
			if !errors.Is(err, errBody) {
				t.Errorf("Group.Wait = %v, want errBody", err)
			}
			ours, oursStarted := after.Load(), started.Load()

			failed.Store(false)
			started.Store(0)
			after.Store(0)
			eg, _ := errgroup.WithContext(context.Background())
			eg.SetLimit(workers)
			for i := range tasks {
				eg.Go(func() error { return task(i) })
			}
			if err := eg.Wait(); !errors.Is(err, errBody) {
				t.Errorf("errgroup.Wait = %v", err)
			}
			t.Logf("%d workers: after function #%d failed, numapool started %d (of %d started), errgroup (limit %d) %d (of %d)",
				workers, failing, ours, oursStarted, workers, after.Load(), started.Load())
			if limit := int64(2*workers + 2); ours > limit {
				t.Errorf("numapool started %d functions after the first error, want at most %d", ours, limit)
			}
		})
	}
}

// Changing a Group's limit while its tasks are active panics, as errgroup
// does; the pool is not harmed.
func TestSetLimitWithActiveTasksPanics(t *testing.T) {
	wantPoolPanic := func(t *testing.T, what string, r any) {
		t.Helper()
		if s, ok := r.(string); !ok || !strings.HasPrefix(s, "pool:") {
			if err, ok := r.(error); !ok || !strings.HasPrefix(err.Error(), "pool:") {
				t.Errorf("%s with tasks active: recover() = %v; want a panic starting \"pool:\"", what, r)
			}
		}
	}
	for _, c := range []struct {
		name         string
		before, next int // limit before Go (0: none), and the new one
	}{
		{"none-to-2", 0, 2},
		{"3-to-1", 3, 1},
		{"2-to-none", 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			g := p.Group(context.Background())
			if c.before > 0 {
				g.SetLimit(c.before)
			}
			release := make(chan struct{})
			started := make(chan struct{})
			var ran atomic.Int32
			g.Go(func(*Worker) error { close(started); <-release; ran.Add(1); return nil })
			waitClosed(t, started, hangBound, "the group's task starting")
			r := recovered(func() { g.SetLimit(c.next) })
			wantPoolPanic(t, fmt.Sprintf("SetLimit(%d)", c.next), r)
			close(release)
			var err error
			within(t, hangBound, "Group.Wait after SetLimit", func() { err = g.Wait() })
			if err != nil || ran.Load() != 1 {
				t.Errorf("Wait = %v with %d of 1 tasks run", err, ran.Load())
			}
			// The pool is still whole: every worker takes work, and it closes.
			var wg sync.WaitGroup
			for range 100 {
				wg.Add(1)
				if err := p.Submit(context.Background(), func(*Worker) { wg.Done() }); err != nil {
					t.Fatal(err)
				}
			}
			within(t, hangBound, "100 tasks after SetLimit", wg.Wait)
			within(t, hangBound, "Close after SetLimit", func() { _ = p.Close() })
		})
	}
	// The same inside a task, on a Worker.Group.
	t.Run("Worker.Group", func(t *testing.T) {
		p := newTestPool(t, WithWorkers(2))
		var r any
		var err error
		done := make(chan struct{})
		if e := p.Submit(context.Background(), func(w *Worker) {
			defer close(done)
			g := w.Pool().Group(context.Background())
			release := make(chan struct{})
			g.Go(func(*Worker) error { <-release; return nil })
			g.Go(func(*Worker) error { return nil })
			r = recovered(func() { g.SetLimit(1) })
			close(release)
			err = g.Wait()
		}); e != nil {
			t.Fatal(e)
		}
		waitClosed(t, done, hangBound, "a task's Worker.Group after SetLimit")
		wantPoolPanic(t, "Worker.Group SetLimit(1)", r)
		if err != nil {
			t.Errorf("Wait = %v", err)
		}
		within(t, hangBound, "Close after SetLimit", func() { _ = p.Close() })
	})
}

// A Worker.Group's tasks call g.Go again; idle workers steal them, so a
// child calls g.Go on another worker than the one that made the group.
// Each Go must push to the queue of the worker it is called on (the only
// goroutine that may push there): every task runs exactly once, Wait
// returns nil, nothing panics, and each worker's Spawned count is the
// number of Go calls made by tasks running on it (the push went to its
// own queue). Without -race a push from the wrong goroutine corrupts the
// group maker's queue (lost or doubled tasks).
func TestGroupGoFromStolenChildRunsOnItsWorker(t *testing.T) {
	depth, reps := 12, 20 // 8191 tasks a tree
	if testing.Short() {
		depth, reps = 10, 6
	}
	if raceEnabled {
		reps = max(reps/4, 2)
	}
	nTasks := 1<<(depth+1) - 1
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: the maker's worker runs its whole tree before another gets the processor to steal")
	}
	for _, spec := range []string{"", "2x2"} {
		t.Run(specName(spec), func(t *testing.T) {
			var panicked atomic.Value // the first task panic, reported after each tree
			p := newTestPool(t, specOpts(spec, WithPanicHandler(func(v any, stack []byte) {
				panicked.CompareAndSwap(nil, fmt.Sprintf("%v\n%s", v, stack))
			}))...)
			goCalls := make([]atomic.Int64, p.Workers()) // by the worker the caller runs on
			var stolenTasks, foreignGo int64
			for rep := range reps {
				runs := make([]atomic.Int32, nTasks)
				var foreign atomic.Int64
				var err error
				done := make(chan struct{})
				if e := p.Submit(context.Background(), func(w *Worker) {
					defer close(done)
					g := w.Pool().Group(context.Background())
					var node func(d, id int) func(*Worker) error
					node = func(d, id int) func(*Worker) error {
						return func(tw *Worker) error {
							runs[id].Add(1)
							if d < depth {
								if tw != w {
									foreign.Add(2)
								}
								goCalls[tw.ID()].Add(2)
								g.Go(node(d+1, 2*id+1))
								g.Go(node(d+1, 2*id+2))
							}
							return nil
						}
					}
					goCalls[w.ID()].Add(1)
					g.Go(node(0, 0))
					err = g.Wait()
				}); e != nil {
					t.Fatal(e)
				}
				waitClosed(t, done, hangBound, fmt.Sprintf("rep %d: a Worker.Group of %d recursive tasks", rep, nTasks))
				if v := panicked.Load(); v != nil {
					t.Errorf("rep %d: a task panicked: %s", rep, v)
				}
				if err != nil {
					t.Fatalf("rep %d: Wait = %v", rep, err)
				}
				bad := 0
				for id := range runs {
					if n := runs[id].Load(); n != 1 {
						if bad < 5 {
							t.Errorf("rep %d: task %d ran %d times", rep, id, n)
						}
						bad++
					}
				}
				if bad > 0 {
					t.Fatalf("rep %d: %d of %d tasks did not run exactly once", rep, bad, nTasks)
				}
				foreignGo += foreign.Load()
			}
			within(t, hangBound, "Close", func() { _ = p.Close() })
			st := p.Stats()
			for _, ws := range st.Workers {
				stolenTasks += int64(ws.TasksStolenInNode + ws.TasksStolenCrossNode)
				if got, want := ws.Spawned, uint64(goCalls[ws.Worker].Load()); got != want {
					t.Errorf("worker %d: Spawned = %d, but tasks running on it called g.Go %d times: Go pushed to another worker's queue",
						ws.Worker, got, want)
				}
			}
			if foreignGo == 0 {
				t.Errorf("no g.Go was called from a worker other than the group's maker (%d tasks stolen): the test did not test", stolenTasks)
			}
			t.Logf("%d trees of %d tasks: %d tasks stolen, %d Go calls from other workers than the maker", reps, nTasks, stolenTasks, foreignGo)
		})
	}
}

func TestGroupOutside(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	g := p.Group(context.Background())
	var n atomic.Int32
	for i := range 100 {
		g.Go(func(*Worker) error {
			n.Add(1)
			if i == 37 {
				return fmt.Errorf("task %d failed", i)
			}
			time.Sleep(100 * time.Microsecond) // some work: #37 fails while another runs
			return nil
		})
	}
	if err := g.Wait(); err == nil || !strings.Contains(err.Error(), "task 37") {
		t.Errorf("Wait = %v", err)
	}
	// Functions begin in the order of the calls, and those not begun when
	// #37 failed are skipped: at most one more per other worker.
	if got := int(n.Load()); got < 38 || got > 38+p.Workers()-1 {
		t.Errorf("%d of 100 tasks ran, want 38..%d (in order, the rest skipped after #37 failed)", got, 38+p.Workers()-1)
	}
	if g.Context().Err() == nil {
		t.Error("the group's context is not cancelled")
	}
}

func TestGroupFirstErrorCancels(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	g := p.Group(context.Background())
	g.Go(func(*Worker) error { return errors.New("first") })
	g.Go(func(*Worker) error {
		select {
		case <-g.Context().Done():
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("not cancelled")
		}
	})
	if err := g.Wait(); err == nil || err.Error() != "first" {
		t.Errorf("Wait = %v", err)
	}
}

func TestGroupInsideHelpsAndReturnsPanics(t *testing.T) {
	p := newTestPool(t, WithWorkers(1)) // one worker: Wait must run the tasks itself
	defer p.Close()
	err := onWorker(t, p, func(w *Worker) error {
		g := w.Pool().Group(context.Background())
		g.SetLimit(3)
		var sum atomic.Int64
		for i := range 50 {
			g.Go(func(w *Worker) error {
				inner := w.Pool().Group(context.Background())
				inner.Go(func(*Worker) error { sum.Add(int64(i)); return nil })
				return inner.Wait()
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if sum.Load() != 49*50/2 {
			return fmt.Errorf("sum %d", sum.Load())
		}
		g2 := w.Pool().Group(context.Background())
		g2.Go(func(*Worker) error { panic("inside") })
		return g2.Wait()
	})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "inside" {
		t.Fatalf("err = %v", err)
	}
}

// Wait on a Pool.Group from inside a task runs the group's tasks instead
// of blocking the worker: with one worker, blocking would never return.
func TestPoolGroupWaitInsideTaskHelps(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	var ran atomic.Int32
	err := onWorker(t, p, func(w *Worker) error {
		g := p.Group(context.Background())
		for range 10 {
			g.Go(func(*Worker) error { ran.Add(1); return nil })
		}
		return g.Wait()
	})
	if err != nil || ran.Load() != 10 {
		t.Fatalf("Wait = %v with %d of 10 tasks run", err, ran.Load())
	}
}

// A group used again after Wait runs its new functions: only a failure or
// the parent's cancellation skips functions that have not begun.
// A Group used again after a Wait that failed runs its new functions, as
// errgroup does: its context stays done and Wait returns the first error
// again, but nothing new is skipped.
func TestGroupReusedAfterFailedWait(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	for _, from := range []string{"outside", "inside"} {
		t.Run(from, func(t *testing.T) {
			g := p.Group(context.Background())
			first := errors.New("first")
			g.Go(func(*Worker) error { return first })
			if err := g.Wait(); !errors.Is(err, first) {
				t.Fatalf("Wait = %v, want the first error", err)
			}
			var ran atomic.Bool
			fn := func(*Worker) error { ran.Store(true); return nil }
			if from == "outside" {
				g.Go(fn)
			} else {
				started := make(chan struct{})
				_ = p.Submit(context.Background(), func(*Worker) { g.Go(fn); close(started) })
				waitClosed(t, started, hangBound, "the task that calls Go")
			}
			within(t, hangBound, "the second Wait", func() {
				if err := g.Wait(); !errors.Is(err, first) {
					t.Errorf("second Wait = %v, want the first error again", err)
				}
			})
			if !ran.Load() {
				t.Errorf("a function started after the failed Wait (from %s) did not run", from)
			}
		})
	}
}

func TestGroupReusedAfterWait(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	g := p.Group(context.Background())
	g.Go(func(*Worker) error { return nil })
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Bool
	g.Go(func(*Worker) error { ran.Store(true); return nil })
	if err := g.Wait(); err != nil || !ran.Load() {
		t.Errorf("second Wait = %v, ran %v", err, ran.Load())
	}
}
