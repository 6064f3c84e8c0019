package pool

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/goruntime"
	"github.com/numapool/numapool/topology"
)

// As many tasks as workers block, marked, on a channel that only a task
// queued after them closes: the spares run that task, and every one
// returns. Without Block this is the pool's deadlock (the tasks hold
// every worker).
func TestBlockedTasksLetLaterTasksRun(t *testing.T) {
	for _, spec := range []string{"1x1", "1x2", "2x2"} {
		t.Run(spec, func(t *testing.T) {
			p := newTestPool(t, WithSpec(spec))
			defer p.Close()
			n := p.Workers()
			release := make(chan struct{})
			var blocked sync.WaitGroup
			blocked.Add(n)
			var done sync.WaitGroup
			for range n {
				done.Add(1)
				if err := p.Submit(ctx, func(w *Worker) {
					defer done.Done()
					blocked.Done()
					w.Block(func() { <-release })
					_ = w.ID() // w is valid again
				}); err != nil {
					t.Fatal(err)
				}
			}
			within(t, hangBound, "the blocked tasks", func() {
				blocked.Wait()
				time.Sleep(20 * time.Millisecond) // the releaser comes well after
				done.Add(1)
				if err := p.Submit(ctx, func(*Worker) { close(release); done.Done() }); err != nil {
					t.Fatal(err)
				}
				done.Wait()
			})
			if got := p.Stats().Total.Blocks; got != uint64(n) {
				t.Errorf("Stats counts %d blocks, want %d", got, n)
			}
		})
	}
}

// A task that submits work and waits for it on a sync.WaitGroup inside
// Block completes, on a pool of one worker.
func TestBlockWaitingForSubmittedWork(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1"))
	defer p.Close()
	within(t, hangBound, "the waiting task", func() {
		_, err := Run(p, func(w *Worker) (int, error) {
			var wg sync.WaitGroup
			for range 10 {
				wg.Add(1)
				w.Spawn(func(*Worker) { wg.Done() })
			}
			w.Block(wg.Wait)
			return 0, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// Two tasks block, marked, on each other twice over (a send and a
// receive, then the reverse) on a pool of one worker: whichever returns
// first gets the seat, in any order. A stack of holders (the last to
// block must return first) deadlocks here.
func TestBlockedTasksReturnInAnyOrder(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1"))
	defer p.Close()
	within(t, 2*hangBound, "the ping-pong", func() {
		for range 300 {
			ch, ack := make(chan int), make(chan int)
			var wg sync.WaitGroup
			wg.Add(2)
			mustSubmit(t, p, func(w *Worker) {
				defer wg.Done()
				w.Block(func() { ch <- 1 })
				w.Block(func() { <-ack })
			})
			mustSubmit(t, p, func(w *Worker) {
				defer wg.Done()
				w.Block(func() { <-ch })
				w.Block(func() { ack <- 1 })
			})
			wg.Wait()
		}
	})
}

var ctx = context.Background()

func mustSubmit(t testing.TB, p *Pool, fn func(*Worker)) {
	t.Helper()
	if err := p.Submit(ctx, fn); err != nil {
		t.Fatal(err)
	}
}

// Past the node's cap, Block runs its function with no spare and counts
// it; WithSpares(0) starts none.
func TestBlockPastTheCap(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1"), WithSpares(0))
	defer p.Close()
	ran := false
	if _, err := Run(p, func(w *Worker) (int, error) {
		w.Block(func() { ran = true })
		return 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	parkAll(t, p) // a worker publishes its counters as it parks
	c := p.Stats().Total
	if !ran || c.SparesRefused != 1 || c.Blocks != 0 || c.SparesStarted != 0 {
		t.Errorf("ran %v; blocks %d, started %d, refused %d; want true, 0, 0, 1", ran, c.Blocks, c.SparesStarted, c.SparesRefused)
	}
	if _, err := New(WithSpares(-1)); err == nil {
		t.Error("WithSpares(-1) accepted")
	}
	if _, err := newPool(nil, env(map[string]string{envSpares: "many"})); err == nil {
		t.Errorf("%s=many accepted", envSpares)
	}
}

// A panic and a runtime.Goexit inside Block's function pass through it
// with the seat taken back: the task's waiter sees the panic, a Goexit
// ends the worker's goroutine, which is replaced, and the pool goes on.
func TestBlockPanicAndGoexit(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	defer p.Close()
	_, err := Run(p.Node(p.Nodes()[0]).Strict(), func(w *Worker) (int, error) {
		w.Block(func() { panic("in Block") })
		return 0, nil
	})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "in Block" {
		t.Fatalf("Run = %v, want the panic", err)
	}
	f := Async(p.Node(p.Nodes()[0]).Strict(), func(w *Worker) (int, error) {
		w.Block(runtime.Goexit)
		return 0, nil
	})
	if _, err := f.Wait(); !errors.Is(err, ErrGoexit) {
		t.Fatalf("Wait = %v, want ErrGoexit", err)
	}
	var n atomic.Int64
	within(t, hangBound, "work after the Goexit", func() {
		if err := p.ParallelFor(ctx, 1000, 1, func(w *Worker, lo, hi int) error {
			w.Block(func() { n.Add(int64(hi - lo)) })
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	if n.Load() != 1000 {
		t.Fatalf("ParallelFor ran %d of 1000", n.Load())
	}
}

// Inside Block's function the task's Worker is the spare's: using it
// panics with the pool's message, and submitting to the pool works.
func TestBlockFunctionUsesThePoolNotTheWorker(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	defer p.Close()
	var r any
	done := make(chan struct{})
	_, err := Run(p.Node(p.Nodes()[0]).Strict(), func(w *Worker) (int, error) {
		w.Block(func() {
			r = recovered(func() { w.Spawn(func(*Worker) {}) })
			if err := p.Submit(ctx, func(*Worker) { close(done) }); err != nil {
				t.Error(err)
			}
		})
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := r.(string); s == "" {
		t.Errorf("Spawn inside Block's function: recovered %v, want the pool's panic", r)
	}
	waitClosed(t, done, hangBound, "the task submitted inside Block")
}

// Marked blocking while tasks spawn, join, loop and wait on Groups, on
// several configurations: every task runs exactly once, and Close leaves
// no spare behind.
func TestBlockCountedUnderLoad(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"1x1", []Option{WithSpec("1x1")}},
		{"1x2", []Option{WithSpec("1x2")}},
		{"2x2", []Option{WithSpec("2x2")}},
		{"2x2/sleeps-at-once", []Option{WithSpec("2x2"), WithBlockTime(0)}},
		{"2x2/never-sleeps", []Option{WithSpec("2x2"), WithBlockTime(-1)}},
		{"2x2/goroutines", []Option{WithSpec("2x2"), WithBinding(pin.Goroutines)}},
		{"1x2/two-spares", []Option{WithSpec("1x2"), WithSpares(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			p, err := New(c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			const roots = 200
			var ran [roots * 8]atomic.Int32
			block := func(w *Worker, i int) {
				switch i % 4 {
				case 0:
					w.Block(func() { time.Sleep(50 * time.Microsecond) })
				case 1:
					w.Block(runtime.Gosched)
				}
			}
			var wg sync.WaitGroup
			for r := range roots {
				wg.Add(1)
				mustSubmit(t, p, func(w *Worker) {
					defer wg.Done()
					base := r * 8
					block(w, r)
					_ = w.Join(func(w *Worker) {
						block(w, r+1)
						ran[base].Add(1)
					}, func(w *Worker) {
						block(w, r+2)
						ran[base+1].Add(1)
					})
					g := w.Pool().Group(ctx)
					for k := 2; k < 5; k++ {
						g.Go(func(w *Worker) error {
							block(w, r+k)
							ran[base+k].Add(1)
							return nil
						})
					}
					_ = g.Wait()
					_ = w.Pool().ParallelFor(ctx, 8, 1, func(w *Worker, lo, hi int) error {
						for i := max(lo, 5); i < hi; i++ {
							block(w, r+i)
							ran[base+i].Add(1)
						}
						return nil
					})
				})
			}
			within(t, 4*hangBound, "the roots", wg.Wait)
			within(t, hangBound, "Close", func() {
				if err := p.Close(); err != nil {
					t.Error(err)
				}
			})
			for i := range ran {
				if n := ran[i].Load(); n != 1 {
					t.Fatalf("task %d ran %d times", i, n)
				}
			}
			c := p.Stats().Total
			if c.Blocks+c.SparesRefused == 0 {
				t.Error("no Block counted")
			}
			if !eventually(hangBound, func() bool { return runtime.NumGoroutine() <= before }) {
				t.Errorf("%d goroutines after Close, %d before: spares left behind", runtime.NumGoroutine(), before)
			}
			t.Logf("blocks %d, spares started %d, refused %d", c.Blocks, c.SparesStarted, c.SparesRefused)
		})
	}
}

// A task run on a spare runs on the blocked worker's CPUs: strict work
// for a node whose only worker is blocked runs there, on a thread bound
// as the worker's is. After Close no thread of the process is left
// narrowed.
func TestSpareRunsStrictWorkOnTheWorkersCPUs(t *testing.T) {
	onThreads(t)
	process, err := topology.ThreadAffinity(0)
	if err != nil {
		t.Skip(err)
	}
	p := newTestPool(t, WithSpec("2x1"))
	node := p.Nodes()[0]
	release := make(chan struct{})
	var blockedOn *Worker
	blocked := make(chan struct{})
	go func() {
		_, _ = Run(p.Node(node).Strict(), func(w *Worker) (int, error) {
			blockedOn = w
			close(blocked)
			w.Block(func() { <-release })
			return 0, nil
		})
	}()
	<-blocked
	var mask, bound topology.CPUSet
	var id int
	within(t, hangBound, "strict work on the blocked node", func() {
		_, err = Run(p.Node(node).Strict(), func(w *Worker) (int, error) {
			mask, _ = topology.ThreadAffinity(0)
			bound, id = w.th.Bound(), w.ID()
			return 0, nil
		})
	})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if id != blockedOn.ID() {
		t.Errorf("the strict task ran on worker %d, want the node's only one, %d", id, blockedOn.ID())
	}
	if bound.IsEmpty() || !mask.Equal(bound) {
		t.Errorf("the spare's thread had mask %s, want the worker's %s", mask, bound)
	}
	closeUnnarrowed(t, p, process)
}

// Close with tasks blocked and spares alive runs what is queued, waits
// for the blocked tasks, whose code after Block goes on, and leaves no
// spare goroutine behind.
func TestCloseWithBlockedTasks(t *testing.T) {
	before := runtime.NumGoroutine()
	p, err := New(WithSpec("1x2"))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var after, queued atomic.Int64
	var started sync.WaitGroup
	started.Add(2)
	for range 2 {
		mustSubmit(t, p, func(w *Worker) {
			started.Done()
			w.Block(func() { <-release })
			w.Spawn(func(*Worker) { after.Add(1) })
			after.Add(1)
		})
	}
	started.Wait()
	for range 100 {
		mustSubmit(t, p, func(*Worker) { queued.Add(1) })
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with two tasks blocked", err)
	default:
	}
	close(release)
	within(t, hangBound, "Close", func() {
		if err := <-closed; err != nil {
			t.Error(err)
		}
	})
	if queued.Load() != 100 || after.Load() != 4 {
		t.Errorf("ran %d of 100 queued tasks and %d of 4 after Block", queued.Load(), after.Load())
	}
	if st := p.Stats(); st.Spares != 0 || st.Blocked != 0 {
		t.Errorf("after Close: %d spares alive, %d tasks blocked; want none", st.Spares, st.Blocked)
	}
	if !eventually(hangBound, func() bool { return runtime.NumGoroutine() <= before }) {
		t.Errorf("%d goroutines after Close, %d before: spares left behind", runtime.NumGoroutine(), before)
	}
}

// A Shutdown that gives up with tasks blocked counts them abandoned and
// returns; the blocked tasks go on when their calls return, and the pool
// then ends with no spare left behind.
func TestShutdownWithBlockedTasks(t *testing.T) {
	before := runtime.NumGoroutine()
	p, err := New(WithSpec("1x2"))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var after atomic.Int64
	var started sync.WaitGroup
	started.Add(2)
	for range 2 {
		mustSubmit(t, p, func(w *Worker) {
			started.Done()
			w.Block(func() { <-release })
			after.Add(1)
		})
	}
	started.Wait()
	c, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	var n int
	within(t, hangBound, "Shutdown", func() { n, err = p.Shutdown(c) })
	var running int
	if m := regexp.MustCompile(`(\d+) tasks? still running`).FindStringSubmatch(fmt.Sprint(err)); m != nil {
		running, _ = strconv.Atoi(m[1])
	}
	if !errors.Is(err, ErrAbandoned) || running < 2 {
		t.Errorf("Shutdown = %d, %v; want the two blocked tasks counted running", n, err)
	}
	close(release)
	waitClosed(t, p.done, hangBound, "the pool's end after the blocked tasks returned")
	if after.Load() != 2 {
		t.Errorf("%d of 2 blocked tasks went on after Block", after.Load())
	}
	if !eventually(hangBound, func() bool { return runtime.NumGoroutine() <= before }) {
		t.Errorf("%d goroutines after the pool ended, %d before: spares left behind", runtime.NumGoroutine(), before)
	}
}

// Stats shows the tasks in Block and the spares: alive while they hold
// seats, parked once the tasks went on.
func TestBlockStats(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	defer p.Close()
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(2)
	done.Add(2)
	for range 2 {
		mustSubmit(t, p, func(w *Worker) {
			defer done.Done()
			started.Done()
			w.Block(func() { <-release })
		})
	}
	started.Wait()
	if !eventually(hangBound, func() bool { return p.Stats().Blocked == 2 }) {
		t.Fatalf("Stats counts %d tasks blocked, want 2", p.Stats().Blocked)
	}
	if st := p.Stats(); st.Spares < 1 || st.Nodes[0].Spares != st.Spares {
		t.Errorf("Stats counts %d spares (node %d) with two tasks blocked", st.Spares, st.Nodes[0].Spares)
	}
	close(release)
	done.Wait()
	var st Stats
	if !eventually(hangBound, func() bool {
		st = p.Stats()
		return st.Blocked == 0 && st.Spares > 0 && st.SparesParked == st.Spares
	}) {
		t.Errorf("after the tasks went on: %d blocked, %d spares, %d parked; want 0 and every spare parked", st.Blocked, st.Spares, st.SparesParked)
	}
}

// A caller from outside that leaves its seat while a task it spawned is
// in Block, as the pool closes, leaves the seat counted busy: the pool
// does not drain under the blocked task, and what the task spawns after
// Block runs.
func TestCallerLeavesWithTaskInBlock(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	parkAll(t, p)
	// The other worker is busy (an unmarked wait), so the spawned task
	// stays on the caller's seat.
	free := occupyWorker(t, p)
	xBlocked, leave, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var after, y atomic.Int64
	joined := false
	ran := make(chan error, 1)
	go func() {
		me := goruntime.G()
		_, err := Run(p, func(w *Worker) (int, error) {
			joined = goruntime.G() == me
			w.Spawn(func(w *Worker) {
				w.Block(func() { close(xBlocked); <-release })
				after.Add(1)
				w.Spawn(func(*Worker) { y.Add(1) })
			})
			w.Block(func() { <-xBlocked; <-leave })
			return 0, nil
		})
		ran <- err
	}()
	waitClosed(t, xBlocked, hangBound, "the spawned task's Block")
	free() // the other worker parks
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	time.Sleep(20 * time.Millisecond)
	close(leave) // the caller leaves last, with the spawned task in Block: the pool drains
	if err := recv(t, ran, "Run"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	var err error
	within(t, hangBound, "Close", func() { err = <-closed })
	if !joined {
		t.Skip("the caller did not join")
	}
	if err != nil || after.Load() != 1 || y.Load() != 1 {
		t.Errorf("Close = %v; after Block: %d of 1; spawned after Block: %d of 1 (Stats().Abandoned %d)", err, after.Load(), y.Load(), p.Stats().Abandoned)
	}
}

// A caller from outside that leaves its seat, with no task boundary on
// the way, while a task's thread waits for that seat after its Block
// returned, hands the seat on: the worker's thread wakes to it.
func TestCallerLeavesWithThreadWaitingForSeat(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	defer p.Close()
	parkAll(t, p)
	defer occupyWorker(t, p)()
	xBlocked, xRelease := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	joined := false
	ran := make(chan error, 1)
	go func() {
		me := goruntime.G()
		_, err := Run(p, func(w *Worker) (int, error) {
			joined = goruntime.G() == me
			w.Spawn(func(w *Worker) {
				w.Block(func() { close(xBlocked); <-xRelease })
				close(done)
			})
			w.Block(func() { <-xBlocked })
			// The seat is the caller's again; the spawned task's Block
			// returns now and its thread waits for the seat.
			close(xRelease)
			time.Sleep(20 * time.Millisecond)
			return 0, nil
		})
		ran <- err
	}()
	if err := recv(t, ran, "Run"); err != nil {
		t.Fatal(err)
	}
	if !joined {
		<-done
		t.Skip("the caller did not join")
	}
	select {
	case <-done:
	case <-time.After(hangBound):
		t.Errorf("the spawned task did not go on after its Block returned within %v (Stats().Blocked %d)", hangBound, p.Stats().Blocked)
		mustSubmit(t, p, func(*Worker) {}) // new work wakes the worker's thread, which hands the seat on
		waitClosed(t, done, hangBound, "the spawned task, after new work woke the worker")
	}
}

// Close and Shutdown from inside Block's function are calls from inside a
// task: they return ErrInsideTask at once instead of waiting for the task
// that calls them.
func TestShutdownInsideBlock(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	res := make(chan error, 1)
	took := make(chan time.Duration, 1)
	mustSubmit(t, p, func(w *Worker) {
		w.Block(func() {
			c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := p.Shutdown(c)
			took <- time.Since(start)
			res <- err
		})
	})
	var err error
	var d time.Duration
	within(t, hangBound, "Shutdown inside Block", func() { d, err = <-took, <-res })
	if !errors.Is(err, ErrInsideTask) || d > 100*time.Millisecond {
		t.Errorf("Shutdown inside Block's function = %v after %v; want ErrInsideTask at once", err, d)
	}
	within(t, hangBound, "Close", func() { _ = p.Close() })
}

// A task's unpaired runtime.UnlockOSThread calls on a spare, up to its
// lock slack, leave the spare on the thread it bound: no thread stays
// narrowed after Close. (Past the slack the spare gives the thread it was
// moved off its mask back by ID, but threads the runtime starts from that
// thread meanwhile inherit its mask: that is not tested.)
func TestStrayUnlockOnSpare(t *testing.T) {
	for _, unlocks := range []int{1, spareLockSlack} {
		t.Run(fmt.Sprint(unlocks), func(t *testing.T) { strayUnlocksOnSpare(t, unlocks) })
	}
}

func strayUnlocksOnSpare(t *testing.T, unlocks int) {
	onThreads(t)
	process, err := topology.ThreadAffinity(0)
	if err != nil {
		t.Skip(err)
	}
	p, err := New(WithSpec("2x1"), WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	node := p.Node(p.Nodes()[1]).Strict()
	release := make(chan struct{})
	blocked := make(chan struct{})
	outer := Async(node, func(w *Worker) (int, error) {
		w.Block(func() { close(blocked); <-release })
		return 0, nil
	})
	<-blocked
	within(t, hangBound, "the task on the spare", func() {
		if _, err := Run(node, func(w *Worker) (int, error) {
			for range unlocks {
				runtime.UnlockOSThread()
			}
			for range 20 {
				time.Sleep(time.Millisecond) // the goroutine may come back on another thread
			}
			return 0, nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	// Keep the runtime's threads busy so that the deserted one runs
	// other goroutines.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				time.Sleep(50 * time.Microsecond)
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	close(release)
	if _, err := outer.Wait(); err != nil {
		t.Fatal(err)
	}
	closeUnnarrowed(t, p, process)
}

// A Shutdown that gives up counts as running both the task in Block and
// the task its spare runs.
func TestShutdownCountsTaskOnSpare(t *testing.T) {
	p, err := New(WithSpec("1x1"), WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	release, stop := make(chan struct{}), make(chan struct{})
	var blocked, spinning sync.WaitGroup
	blocked.Add(1)
	spinning.Add(1)
	mustSubmit(t, p, func(w *Worker) {
		blocked.Done()
		w.Block(func() { <-release })
	})
	blocked.Wait()
	mustSubmit(t, p, func(w *Worker) {
		spinning.Done()
		for !isDone(stop) {
			time.Sleep(time.Millisecond) // unmarked: this task holds the spare
		}
	})
	spinning.Wait()
	c, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	var n int
	within(t, hangBound, "Shutdown", func() { n, err = p.Shutdown(c) })
	if !strings.Contains(fmt.Sprint(err), "2 tasks still running") {
		t.Errorf("Shutdown = %d, %v; want 2 tasks still running (one in Block, one on the spare)", n, err)
	}
	close(stop)
	close(release)
	waitClosed(t, p.done, hangBound, "the pool's end")
}

// The worker's own thread waiting at its loop's top for its seat has no
// task: a Shutdown that gives up does not count it running.
func TestShutdownCountsOwnThreadAtTop(t *testing.T) {
	p, err := New(WithSpec("1x1"), WithoutEnv())
	if err != nil {
		t.Fatal(err)
	}
	tRel, uRel, stop := make(chan struct{}), make(chan struct{}), make(chan struct{})
	tIn, uIn, uOn, tDone := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	mustSubmit(t, p, func(w *Worker) { // T, on the worker's own thread
		defer close(tDone)
		w.Block(func() { close(tIn); <-tRel })
	})
	<-tIn
	mustSubmit(t, p, func(w *Worker) { // U, on the spare
		w.Block(func() { close(uIn); <-uRel })
		close(uOn)
		for !isDone(stop) {
			time.Sleep(time.Millisecond) // unmarked
		}
	})
	<-uIn
	close(tRel) // T goes on and ends: the worker's thread is at its loop's top
	<-tDone
	time.Sleep(10 * time.Millisecond)
	close(uRel) // U's thread takes the seat from it: it waits at its top
	<-uOn
	time.Sleep(10 * time.Millisecond)
	c, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	var n int
	within(t, hangBound, "Shutdown", func() { n, err = p.Shutdown(c) })
	if !strings.Contains(fmt.Sprint(err), "1 task still running") {
		t.Errorf("Shutdown = %d, %v; want 1 task still running (U on the spare)", n, err)
	}
	close(stop)
	waitClosed(t, p.done, hangBound, "the pool's end")
}

// Spares count against the threads the process may start beyond the
// workers (New's count, place.Plan.ThreadsLeft): past that room a Block
// runs with no spare and is counted refused, below the node's cap.
func TestSparesWithinTheThreadRoom(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1"))
	defer p.Close()
	p.threadsLeft = 1
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(1)
	done.Add(2)
	mustSubmit(t, p, func(w *Worker) {
		defer done.Done()
		started.Done()
		w.Block(func() { <-release })
	})
	started.Wait()
	ran := false
	mustSubmit(t, p, func(w *Worker) { // on the spare: no room for a second
		defer done.Done()
		w.Block(func() { ran = true; close(release) })
	})
	within(t, hangBound, "the tasks", done.Wait)
	parkAll(t, p)
	c := p.Stats().Total
	if !ran || c.Blocks != 1 || c.SparesStarted != 1 || c.SparesRefused != 1 {
		t.Errorf("blocks %d, spares started %d, refused %d; want 1, 1, 1", c.Blocks, c.SparesStarted, c.SparesRefused)
	}
}

// occupyWorker keeps one of p's workers in a task, an unmarked wait,
// until the returned function is called.
func occupyWorker(t *testing.T, p *Pool) (free func()) {
	t.Helper()
	occupied, occupy := make(chan struct{}), make(chan struct{})
	mustSubmit(t, p, func(*Worker) { close(occupied); <-occupy })
	<-occupied
	return func() { close(occupy) }
}
