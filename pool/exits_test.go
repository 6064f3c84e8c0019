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
)

// Tests of the ways out of a pool (Close, Shutdown, a pool dropped
// without either) and of the rules a task's Worker handle lives by. Every
// wait is bounded: a hang fails the test and names what hung instead of
// stalling the test binary.

// ---------------------------------------------------------------------
// Close racing submissions.

// closeRacingSubmits is one round: eight goroutines submit (Submit,
// SubmitTo, TrySubmit) in a loop until they are refused, and once closeAt
// submissions are accepted, Close runs among them. It returns how many
// submissions were accepted, how many tasks ran and how many the pool
// reports abandoned.
func closeRacingSubmits(t *testing.T, spec string, closeAt int64) (accepted, ran, abandoned int64) {
	t.Helper()
	p := newTestPool(t, specOpts(spec)...)
	nodes := p.Nodes()
	var ranN, acceptedN atomic.Int64
	task := func(*Worker) { ranN.Add(1) }
	const submitters = 8
	var done sync.WaitGroup
	closed := make(chan struct{})
	allDone := make(chan struct{})
	errs := make(chan error, submitters)
	for s := range submitters {
		done.Add(1)
		go func() {
			defer done.Done()
			for i := s; ; i++ {
				var err error
				switch i % 3 {
				case 0:
					err = p.Submit(context.Background(), task)
				case 1:
					err = p.Node(nodes[i%len(nodes)]).Submit(context.Background(), task)
				default:
					err = p.TrySubmit(task)
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("submitter %d: %w", s, err)
					return
				}
				if acceptedN.Add(1) == closeAt {
					go func() { _ = p.Close(); close(closed) }()
				}
			}
		}()
	}
	go func() { done.Wait(); close(allDone) }()
	waitClosed(t, closed, hangBound, "Close racing eight submitters")
	waitClosed(t, allDone, hangBound, "submitters seeing ErrClosed after Close")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return acceptedN.Load(), ranN.Load(), int64(p.Stats().Abandoned)
}

// Every submission that Close's racing does not refuse runs (or is
// counted abandoned): none is accepted into a shard that the workers have
// already given up on.
func TestCloseRacingSubmitsLosesNothing(t *testing.T) {
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	for _, spec := range []string{"", "2x2"} {
		t.Run(specName(spec), func(t *testing.T) {
			// The rounds are short; a time budget keeps slow machines
			// (and -race) within a few seconds.
			budget := time.Now().Add(2500 * time.Millisecond)
			lostRounds, played := 0, 0
			var lost, total int64
			for r := 0; r < rounds && time.Now().Before(budget); r++ {
				accepted, ran, abandoned := closeRacingSubmits(t, spec, int64(16<<(r%6)))
				played++
				total += accepted
				if ran+abandoned != accepted {
					if lostRounds < 5 {
						t.Errorf("round %d: %d submissions accepted, %d ran, %d abandoned: %d lost",
							r, accepted, ran, abandoned, accepted-ran-abandoned)
					}
					lostRounds++
					lost += accepted - ran - abandoned
				}
			}
			if lostRounds > 0 {
				t.Errorf("%d of %d rounds lost tasks (%d of %d accepted)", lostRounds, played, lost, total)
			}
			t.Logf("%d rounds, %d tasks accepted", played, total)
		})
	}
}

// ---------------------------------------------------------------------
// Exits after a Shutdown that timed out.

// stuckPool returns a one-worker pool whose worker runs a task that holds
// it until release is closed, with queued tasks behind it that count
// their runs in ran.
func stuckPool(t *testing.T, queued int) (p *Pool, release chan struct{}, ran *atomic.Int64) {
	t.Helper()
	p = newTestPool(t, WithWorkers(1))
	release = make(chan struct{})
	started := make(chan struct{})
	ran = new(atomic.Int64)
	if err := p.Submit(context.Background(), func(*Worker) { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, hangBound, "the long task starting")
	for range queued {
		if err := p.Submit(context.Background(), func(*Worker) { ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	return p, release, ran
}

// releaseAt closes release 20ms after ctx is done: the long task ends
// after Shutdown has given up on the queued ones. Nothing public tells
// when Shutdown has given up; should the worker still start a queued task
// or two first, the tests count what ran rather than expect every queued
// task abandoned.
func releaseAt(ctx context.Context, release chan struct{}) {
	go func() {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
}

type exitResult struct {
	what string
	n    int
	err  error
}

// A Shutdown that gave up at its deadline leaves the pool stopped:
// later exits (Close, Shutdown, in any order, concurrently) return and
// report the same abandoned count.
func TestCloseAfterTimedOutShutdownReturns(t *testing.T) {
	const queued = 100
	// timedOut shuts p down with a deadline the long task outlasts and
	// returns how many tasks it abandoned.
	timedOut := func(t *testing.T, p *Pool, release chan struct{}, ran *atomic.Int64) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		releaseAt(ctx, release)
		var n int
		var err error
		within(t, hangBound, "Shutdown with a 20ms deadline", func() { n, err = p.Shutdown(ctx) })
		if !errors.Is(err, context.DeadlineExceeded) || n+int(ran.Load()) != queued || n == 0 {
			t.Errorf("Shutdown = %d, %v with %d of %d queued tasks run; want the rest abandoned, DeadlineExceeded",
				n, err, ran.Load(), queued)
		}
		return n
	}
	// checkAfter runs the exits concurrently, each several times, and
	// checks that every one returns, the Shutdowns with the abandoned count.
	checkAfter := func(t *testing.T, p *Pool, want int, exits map[string]func() (int, error)) {
		t.Helper()
		results := make(chan exitResult, 3*len(exits))
		var wg sync.WaitGroup
		for what, exit := range exits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					n, err := exit()
					results <- exitResult{what, n, err}
				}
			}()
		}
		within(t, hangBound, "exits after a timed-out Shutdown", wg.Wait)
		close(results)
		for r := range results {
			if r.what != "Close" && r.n != want {
				t.Errorf("%s after a timed-out Shutdown = %d, %v; want %d abandoned", r.what, r.n, r.err, want)
			}
		}
		if got := int(p.Stats().Abandoned); got != want {
			t.Errorf("Stats().Abandoned = %d, want %d", got, want)
		}
	}
	closeExit := func(p *Pool) func() (int, error) {
		return func() (int, error) { return 0, p.Close() }
	}
	shutdownExit := func(p *Pool, d time.Duration) func() (int, error) {
		return func() (int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			return p.Shutdown(ctx)
		}
	}

	t.Run("Close", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		timedOut(t, p, release, ran)
		within(t, hangBound, "Close after a timed-out Shutdown", func() { _ = p.Close() })
	})
	t.Run("Shutdown-again", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		want := timedOut(t, p, release, ran)
		var n int
		within(t, hangBound, "Shutdown(Background) after a timed-out Shutdown", func() {
			n, _ = p.Shutdown(context.Background())
		})
		if n != want {
			t.Errorf("second Shutdown reports %d abandoned, want %d", n, want)
		}
	})
	t.Run("many-concurrently", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		want := timedOut(t, p, release, ran)
		checkAfter(t, p, want, map[string]func() (int, error){
			"Close":                 closeExit(p),
			"Shutdown(Background)":  shutdownExit(p, time.Hour),
			"Shutdown(1ms)":         shutdownExit(p, time.Millisecond),
			"Shutdown(expired ctx)": shutdownExit(p, 0),
		})
	})
	// Close is already waiting for the drain when a Shutdown gives up:
	// both return.
	t.Run("Close-then-timed-out-Shutdown", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		closed := make(chan struct{})
		go func() { _ = p.Close(); close(closed) }()
		timedOut(t, p, release, ran)
		waitClosed(t, closed, hangBound, "Close that was waiting when a Shutdown timed out")
	})
	// Several Shutdowns time out at once: each returns the same count,
	// the tasks are dropped once, and a Close after them returns.
	t.Run("timed-out-Shutdowns-concurrently", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		releaseAt(ctx, release)
		results := make(chan exitResult, 4)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := p.Shutdown(ctx)
				results <- exitResult{"Shutdown", n, err}
			}()
		}
		within(t, hangBound, "four concurrent Shutdowns with a 20ms deadline", wg.Wait)
		close(results)
		want := queued - int(ran.Load())
		for r := range results {
			if r.n != want || !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("concurrent Shutdown = %d, %v; want %d (of %d queued, %d ran), DeadlineExceeded", r.n, r.err, want, queued, ran.Load())
			}
		}
		within(t, hangBound, "Close after concurrent timed-out Shutdowns", func() { _ = p.Close() })
		if got := int(p.Stats().Abandoned); got != want {
			t.Errorf("Stats().Abandoned = %d, want %d (each task dropped once)", got, want)
		}
	})
}

// Waiters for work that a timed-out Shutdown dropped are released with an
// error saying so: ErrAbandoned, wrapping the deadline.
func TestTimedOutShutdownReleasesWaiters(t *testing.T) {
	wantAbandoned := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v; want an error wrapping ErrAbandoned and context.DeadlineExceeded", what, err)
		}
	}
	shutdownIn := func(t *testing.T, p *Pool, d time.Duration, release chan struct{}) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		if release != nil {
			releaseAt(ctx, release)
		}
		within(t, hangBound, fmt.Sprintf("Shutdown with a %v deadline", d), func() { _, _ = p.Shutdown(ctx) })
	}

	t.Run("ParallelFor", func(t *testing.T) {
		p := newTestPool(t, WithWorkers(2))
		const n = 1 << 12
		runs := make([]atomic.Int32, n)
		release := make(chan struct{})
		var blocked atomic.Int32
		allBlocked := make(chan struct{})
		body := func(w *Worker, lo, hi int) error {
			select {
			case <-release:
			default:
				if blocked.Add(1) == 2 {
					close(allBlocked)
				}
				<-release
			}
			for i := lo; i < hi; i++ {
				runs[i].Add(1)
			}
			return nil
		}
		var err error
		done := make(chan struct{})
		go func() { err = p.ParallelFor(context.Background(), n, 1, body); close(done) }()
		waitClosed(t, allBlocked, hangBound, "both workers entering the loop body")
		shutdownIn(t, p, 20*time.Millisecond, release)
		waitClosed(t, done, hangBound, "ParallelFor from outside when Shutdown gave up on its pieces")
		missing := unrun(t, runs)
		if missing > 0 {
			wantAbandoned(t, "ParallelFor", err)
		}
		if missing == 0 {
			// The workers finished the loop before they saw that Shutdown
			// had given up: nothing was dropped.
			if err != nil {
				t.Errorf("every index ran, yet ParallelFor = %v", err)
			}
			t.Logf("the loop finished before Shutdown gave up: nothing dropped")
		}
	})

	t.Run("Pool.Group", func(t *testing.T) {
		p := newTestPool(t, WithWorkers(1))
		release := make(chan struct{})
		started := make(chan struct{})
		g := p.Group(context.Background())
		g.Go(func(*Worker) error { close(started); <-release; return nil })
		const queued = 500
		var ran atomic.Int32
		for range queued {
			g.Go(func(*Worker) error { ran.Add(1); return nil })
		}
		waitClosed(t, started, hangBound, "the group's first task starting")
		var err error
		done := make(chan struct{})
		go func() { err = g.Wait(); close(done) }()
		shutdownIn(t, p, 20*time.Millisecond, release)
		waitClosed(t, done, hangBound, "Pool.Group.Wait when Shutdown gave up on the group's tasks")
		abandoned := int(p.Stats().Abandoned)
		if int(ran.Load())+abandoned != queued {
			t.Errorf("%d queued group tasks ran, %d abandoned; want %d in all", ran.Load(), abandoned, queued)
		}
		if abandoned > 0 {
			wantAbandoned(t, "Group.Wait", err)
		} else if err != nil {
			t.Errorf("every group task ran, yet Wait = %v", err)
		}
	})

	// A task waits in Join or Fork while the pool gives up: the call
	// returns; if b did not run, its error says it was abandoned (and
	// Fork's b value is zero). join runs a, which blocks until release,
	// and b, which counts itself and gives 7; it returns b's value.
	for _, c := range []struct {
		name string
		join func(w *Worker, a, b func()) (int, error)
	}{
		{"Join", func(w *Worker, a, b func()) (int, error) {
			rb := 0
			err := w.Join(func(*Worker) { a() }, func(*Worker) { b(); rb = 7 })
			return rb, err
		}},
		{"Fork", func(w *Worker, a, b func()) (int, error) {
			_, rb, err := Fork(w, func(*Worker, int) int { a(); return 1 }, 0, func(_ *Worker, x int) int { b(); return x }, 7)
			return rb, err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			release := make(chan struct{})
			inA := make(chan struct{})
			var bRan atomic.Int32
			var rb int
			var joinErr error
			joined := make(chan struct{})
			if err := p.Submit(context.Background(), func(w *Worker) {
				rb, joinErr = c.join(w, func() { close(inA); <-release }, func() { bRan.Add(1) })
				close(joined)
			}); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, inA, hangBound, c.name+"'s a starting")
			shutdownIn(t, p, 20*time.Millisecond, release)
			waitClosed(t, joined, hangBound, c.name+" in a task when Shutdown gave up")
			switch {
			case bRan.Load() > 1:
				t.Errorf("%s's b ran %d times", c.name, bRan.Load())
			case bRan.Load() == 1 && (joinErr != nil || rb != 7):
				t.Errorf("%s's b ran, yet %s = %d, %v", c.name, c.name, rb, joinErr)
			case bRan.Load() == 0 && (!errors.Is(joinErr, ErrAbandoned) || rb != 0):
				t.Errorf("%s's b was dropped, yet %s = %d, %v; want 0 and an error wrapping ErrAbandoned", c.name, c.name, rb, joinErr)
			}
		})
	}

	// A task waits in w.ParallelFor whose other node's block is queued
	// behind that node's long tasks when the pool gives up: the loop
	// returns (ErrAbandoned if it did not run every index), and Shutdown
	// with it.
	t.Run("Worker.ParallelFor", func(t *testing.T) {
		p := newTestPool(t, WithSpec("2x1"))
		nodes := p.Nodes()
		release := make(chan struct{})
		busy := make(chan struct{})
		if err := p.Node(nodes[1]).Strict().Submit(context.Background(), func(*Worker) { close(busy); <-release }); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, busy, hangBound, "node 1's worker taking the long task")
		const n = 64
		runs := make([]atomic.Int32, n)
		var loopErr error
		looping := make(chan struct{})
		looped := make(chan struct{})
		if err := p.Node(nodes[0]).Strict().Submit(context.Background(), func(w *Worker) {
			close(looping)
			loopErr = w.Pool().ParallelFor(context.Background(), n, 1, func(_ *Worker, lo, hi int) error {
				for i := lo; i < hi; i++ {
					runs[i].Add(1)
				}
				return nil
			})
			close(looped)
		}); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, looping, hangBound, "the looping task starting")
		shutdownIn(t, p, 20*time.Millisecond, release)
		waitClosed(t, looped, hangBound, "w.ParallelFor when Shutdown gave up on a block")
		missing := unrun(t, runs)
		if missing > 0 && !errors.Is(loopErr, ErrAbandoned) {
			t.Errorf("w.ParallelFor left %d indexes unrun and returned %v; want an error wrapping ErrAbandoned", missing, loopErr)
		}
		if missing == 0 && loopErr != nil {
			t.Errorf("w.ParallelFor ran every index and returned %v", loopErr)
		}
	})

	// Shutdown gives up at its deadline: it returns within the deadline,
	// plus the longest running task, plus a little to drop the backlog;
	// dropping does not wait for the backlog to be worked through.
	t.Run("returns-at-deadline", func(t *testing.T) {
		p := newTestPool(t, WithSpec("2x2"))
		const task = 200 * time.Microsecond
		// Enough queued tasks that working through them, or dropping
		// them one at a time, would show.
		backlog := 1_000_000
		if raceEnabled {
			backlog = 200_000
		}
		if testing.Short() {
			backlog /= 4
		}
		var ran atomic.Int64
		for range backlog {
			if err := p.Submit(context.Background(), func(*Worker) { spinFor(task); ran.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		// On a quiet machine Shutdown returns about 1 ms after the deadline;
		// the slack is for a shared 2-CPU machine, where another process
		// can hold a worker's thread off its CPU for tens of milliseconds.
		// Working through the backlog instead would take minutes.
		const deadline = 100 * time.Millisecond
		slack := 50 * time.Millisecond
		if raceEnabled {
			slack = 100 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		var n int
		var err error
		within(t, hangBound, "Shutdown with a 100ms deadline and a large backlog", func() { n, err = p.Shutdown(ctx) })
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %d, %v; want DeadlineExceeded", n, err)
		}
		if got := int64(n) + ran.Load(); got != int64(backlog) {
			t.Errorf("%d abandoned + %d ran = %d; want %d", n, ran.Load(), got, backlog)
		}
		if took > deadline+task+slack {
			t.Errorf("Shutdown with a %v deadline took %v (tasks take %v; %d abandoned)", deadline, took, task, n)
		}
		t.Logf("Shutdown took %v, %d of %d abandoned", took, n, backlog)
	})
}

// ---------------------------------------------------------------------
// Misuse that must panic rather than wedge or corrupt.

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

// A Worker used from a goroutine other than its task's panics with a
// "pool:" message in every build, not only under -race: both while the
// task that leaked it still runs, and after it returned.
func TestWorkerUsedFromAnotherGoroutinePanics(t *testing.T) {
	uses := []struct {
		name string
		use  func(w *Worker)
	}{
		{"Spawn", func(w *Worker) { w.Spawn(func(*Worker) {}) }},
		{"Join", func(w *Worker) { _ = w.Join(func(*Worker) {}, func(*Worker) {}) }},
		{"Fork", func(w *Worker) { _, _, _ = Fork(w, forkIdentity, 1, forkIdentity, 2) }},
		{"SpawnWith", func(w *Worker) { SpawnWith(w, func(*Worker, int) {}, 1) }},
		{"Run on the worker", func(w *Worker) { _, _ = Run(w, func(*Worker) (int, error) { return 1, nil }) }},
		{"Async on the worker", func(w *Worker) { Async(w, func(*Worker) (int, error) { return 1, nil }) }},
	}
	// foreign uses w from a new goroutine and returns what it panicked with.
	foreign := func(t *testing.T, w *Worker, use func(*Worker)) any {
		t.Helper()
		var r any
		within(t, hangBound, "a foreign use of a Worker", func() {
			done := make(chan struct{})
			go func() { defer close(done); r = recovered(func() { use(w) }) }()
			<-done
		})
		return r
	}
	check := func(t *testing.T, what string, r any) bool {
		t.Helper()
		if r == nil || !strings.Contains(fmt.Sprint(r), "pool:") {
			t.Errorf("%s from another goroutine: recover() = %v; want a panic with a \"pool:\" message", what, r)
			return false
		}
		return true
	}
	spawns := 2000
	if testing.Short() {
		spawns = 200
	}
	for _, u := range uses {
		t.Run(u.name+"/task-running", func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			leaked := make(chan *Worker, 1)
			release := make(chan struct{})
			if err := p.Submit(context.Background(), func(w *Worker) { leaked <- w; <-release }); err != nil {
				t.Fatal(err)
			}
			w := <-leaked
			ok := check(t, u.name, foreign(t, w, u.use))
			close(release)
			if ok && u.name == "Spawn" {
				// Every one of many foreign calls is refused, none corrupts.
				for i := range spawns {
					if !check(t, fmt.Sprintf("Spawn #%d", i), foreign(t, w, u.use)) {
						break
					}
				}
			}
			within(t, hangBound, "Close after foreign uses", func() { _ = p.Close() })
		})
		t.Run(u.name+"/task-returned", func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			leaked := make(chan *Worker, 1)
			if err := p.Submit(context.Background(), func(w *Worker) { leaked <- w }); err != nil {
				t.Fatal(err)
			}
			w := <-leaked
			// Keep the worker busy with other work meanwhile.
			var wg sync.WaitGroup
			for range 100 {
				wg.Add(1)
				_ = p.Submit(context.Background(), func(w *Worker) { defer wg.Done(); w.Spawn(func(*Worker) {}) })
			}
			check(t, u.name, foreign(t, w, u.use))
			within(t, hangBound, "tasks after a foreign use", wg.Wait)
			within(t, hangBound, "Close after a foreign use", func() { _ = p.Close() })
		})
	}
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

// ---------------------------------------------------------------------
// The LIFO slot and the fairness tuning.

// Spawned tasks go to the LIFO slot in every build: the race detector
// must see the code that runs in production.
func TestLIFOSlotUsedUnderRace(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	var ran atomic.Int32
	done := make(chan struct{})
	if err := p.Submit(context.Background(), func(w *Worker) {
		var chain func(k int) func(*Worker)
		chain = func(k int) func(*Worker) {
			return func(w *Worker) {
				ran.Add(1)
				if k == 0 {
					close(done)
					return
				}
				w.Spawn(chain(k - 1))
			}
		}
		w.Spawn(chain(20))
	}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, done, hangBound, "a chain of 21 spawned tasks")
	within(t, hangBound, "Close", func() { _ = p.Close() })
	if st := p.Stats().Total; st.LIFOHits == 0 {
		t.Errorf("21 tasks each spawned by the one before on one worker, LIFOHits = 0 (spawned %d, run %d): the LIFO slot is not used",
			st.Spawned, st.TasksRun)
	}
}

// Tasks put in the LIFO slot of a worker that never gets back to it
// (its task spins until they ran) are taken by thieves on their last
// pass, racing further spawns into the slot: each runs exactly once, none
// is stranded (after Tokio's lifo_bit_race).
func TestLIFOSlotStolenOnLastPass(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: the spinning task holds it, and each steal waits for a preemption")
	}
	for _, spec := range []string{"", "2x2"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, specOpts(spec)...)
			if p.Workers() < 2 {
				t.Skip("one worker: nobody to steal")
			}
			const perRound = 4
			runs := make([]atomic.Int32, rounds*perRound)
			stranded := make(chan string, 1)
			done := make(chan struct{})
			if err := p.Submit(context.Background(), func(w *Worker) {
				defer close(done)
				for r := range rounds {
					// A burst: each spawn displaces the last into the queue;
					// the newest stays in the slot.
					for k := range perRound {
						id := r*perRound + k
						w.Spawn(func(*Worker) { runs[id].Add(1) })
					}
					deadline := time.Now().Add(hangBound / 2)
					for k := range perRound {
						for runs[r*perRound+k].Load() == 0 {
							if time.Now().After(deadline) {
								stranded <- fmt.Sprintf("round %d: task %d stranded in the queue or LIFO slot of a busy worker", r, k)
								return
							}
						}
					}
				}
			}); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, done, hangBound, "the spawning task")
			select {
			case msg := <-stranded:
				t.Fatal(msg)
			default:
			}
			within(t, hangBound, "Close", func() { _ = p.Close() })
			for id := range runs {
				if n := runs[id].Load(); n != 1 {
					t.Fatalf("task %d ran %d times", id, n)
				}
			}
		})
	}
}

// The fairness interval is tuned from the time per task: a worker that
// turns its loop without running tasks (waiting in Join for a stolen b)
// has run no task, so the interval keeps its initial value.
func TestTuningCountsTasks(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer func() { within(t, hangBound, "Close", func() { _ = p.Close() }) }()
	type result struct {
		before, after uint32
		stolen        bool
	}
	res := make(chan result, 1)
	if err := p.Submit(context.Background(), func(w *Worker) {
		before := w.interval
		bStarted := make(chan struct{})
		stolen := false
		_ = w.Join(func(*Worker) {
			select {
			case <-bStarted:
				stolen = true
			case <-time.After(hangBound / 2):
			}
		}, func(*Worker) {
			close(bStarted)
			time.Sleep(20 * time.Millisecond) // the joiner waits in runUntil meanwhile
		})
		res <- result{before, w.interval, stolen}
	}); err != nil {
		t.Fatal(err)
	}
	var r result
	within(t, hangBound, "a Join whose b is stolen", func() { r = <-res })
	if !r.stolen {
		t.Fatal("Join's b was not taken by the other worker")
	}
	if r.after != initialInterval {
		t.Errorf("one task run, yet the fairness interval went from %d to %d (initial %d): the tuning counts loop turns, not tasks",
			r.before, r.after, initialInterval)
	}
}

// The tuning measures time spent running tasks: time parked between
// bursts of tiny tasks does not count, so the interval stays high (many
// tiny tasks fit in 200µs) all through each burst, also right after the
// worker wakes.
func TestTuningIgnoresParkedTime(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer func() { within(t, hangBound, "Close", func() { _ = p.Close() }) }()
	const perBurst, bursts, warmup = 200, 12, 2
	type burst struct {
		last, lowest uint32 // the interval seen by the last task, and the lowest seen by any
		took         time.Duration
	}
	lowest := uint32(1 << 31)
	var last burst
	for b := range bursts {
		res := make(chan burst, 1)
		if err := p.Submit(context.Background(), func(w *Worker) {
			start := time.Now()
			left, low := perBurst, w.interval // only this worker touches them
			for range perBurst {
				w.Spawn(func(w *Worker) {
					low = min(low, w.interval)
					if left--; left == 0 {
						res <- burst{w.interval, low, time.Since(start)}
					}
				})
			}
		}); err != nil {
			t.Fatal(err)
		}
		within(t, hangBound, fmt.Sprintf("burst %d", b), func() { last = <-res })
		if b >= warmup {
			lowest = min(lowest, last.lowest)
		}
		if b < bursts-1 {
			time.Sleep(20 * time.Millisecond) // idle: the worker parks
		}
	}
	perTask := last.took / perBurst
	expect := min(max(int(targetLookEvery/max(perTask, 1)), 2), 127)
	// The spawning task itself is one long task in each burst, the mean
	// moves by a tenth per look, and on a loaded machine a thread taken
	// off its CPU mid-burst reads as task time: allow a dip to an eighth.
	// Parked time counted as task time pulls the interval down to 2 or 3.
	want := min(64, expect/8)
	if want < 4 {
		t.Skipf("tasks take %v each here: too slow to tell the tuning's inputs apart", perTask)
	}
	if int(last.last) < want || int(lowest) < want {
		t.Errorf("bursts of %d tasks of ~%v with 20ms parked between: the fairness interval is %d at the end of the last burst and fell to %d after a park; want >= %d (about %d tasks fit in %v)",
			perBurst, perTask, last.last, lowest, want, expect, targetLookEvery)
	}
	t.Logf("interval %d at the end, %d at the lowest, %v per task", last.last, lowest, perTask)
}

// ---------------------------------------------------------------------
// A pool dropped without Close.

// dropPools starts n pools, runs a task on each and drops them without
// Close. Nothing of them stays reachable from the caller.
//
//go:noinline
func dropPools(t *testing.T, n int) {
	for range n {
		p, err := New(WithWorkers(2), WithoutEnv())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		if err := p.Submit(context.Background(), func(*Worker) { close(done) }); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, done, hangBound, "a task on a fresh pool")
	}
}

// A pool that becomes unreachable without Close ends its workers once
// collected: their goroutines and locked OS threads do not pile up.
func TestDroppedPoolReleasesThreads(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 50
	}
	runtime.GC()
	baseG := runtime.NumGoroutine()
	baseT := threads()
	dropPools(t, n)
	// The runtime may keep a few idle threads of its own (about one per P).
	slack := runtime.GOMAXPROCS(0) + 6
	ok := eventually(5*time.Second, func() bool {
		return runtime.NumGoroutine() <= baseG+slack && (baseT < 0 || threads() <= baseT+slack)
	})
	if !ok {
		g, th := runtime.NumGoroutine(), threads()
		if baseT < 0 {
			t.Errorf("%d pools dropped without Close: %d goroutines before, %d after collection", n, baseG, g)
		} else {
			t.Errorf("%d pools dropped without Close: goroutines %d before, %d after collection; OS threads %d before, %d after",
				n, baseG, g, baseT, th)
		}
	}
}

// unrun returns how many indexes never ran, and fails the test at one
// that ran more than once.
func unrun(t *testing.T, runs []atomic.Int32) (missing int) {
	t.Helper()
	for i := range runs {
		switch runs[i].Load() {
		case 0:
			missing++
		case 1:
		default:
			t.Fatalf("index %d ran %d times", i, runs[i].Load())
		}
	}
	return missing
}
