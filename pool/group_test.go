package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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
