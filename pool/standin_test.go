package pool

import (
	"context"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withReserve is a pool of spec whose running workers are one per CPU of
// the spec, with as many again placed in reserve (WithMaxWorkers).
func withReserve(t *testing.T, spec string, opts ...Option) *Pool {
	t.Helper()
	if !threadCPUs {
		t.Skip("no reading of threads' CPU clocks here: no block watch")
	}
	probe := newTestPool(t, WithSpec(spec))
	n := probe.Workers()
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}
	return newTestPool(t, append([]Option{WithSpec(spec), WithWorkers(n), WithMaxWorkers(2 * n)}, opts...)...)
}

// TestStandInsRunWorkQueuedBehindBlockedTasks is the deadlock of tasks
// that wait for work queued behind them, without Worker.Block: every
// running worker blocks on a channel that a task queued after them
// closes. On a pool with workers in reserve, they stand in and run it;
// once the blocked tasks return, the stand-ins retire.
func TestStandInsRunWorkQueuedBehindBlockedTasks(t *testing.T) {
	for _, spec := range []string{"1x1", "1x2", "2x2"} {
		t.Run(spec, func(t *testing.T) {
			p := withReserve(t, spec)
			defer p.Close()
			n := p.Size()
			release := make(chan struct{})
			var blocked, done sync.WaitGroup
			blocked.Add(n)
			for range n { // one per running worker: Submit's round robin spreads them
				done.Add(1)
				if err := p.Submit(ctx, func(*Worker) {
					defer done.Done()
					blocked.Done()
					<-release // unmarked
				}); err != nil {
					t.Fatal(err)
				}
			}
			within(t, hangBound, "the blocked tasks and the one releasing them", func() {
				blocked.Wait()
				done.Add(1)
				if err := p.Submit(ctx, func(*Worker) { close(release); done.Done() }); err != nil {
					t.Fatal(err)
				}
				done.Wait()
			})
			st := p.Stats()
			if st.StandInsStarted == 0 {
				t.Errorf("the releasing task ran with no stand-in started: %+v", st.Tasks)
			}
			if why := settleSize(p, n); why != "" {
				t.Errorf("after the blocked tasks returned, the stand-ins did not retire: %s", why)
			}
		})
	}
}

// TestComputeGetsNoStandIn: tasks that compute for long, with work queued
// behind them, have the CPU all along: no stand-in starts. Also with more
// running workers than GOMAXPROCS (1x4, 2x2 on a machine of 2): those
// waiting for a processor sleep off their CPU, and the runtime counts
// them runnable.
func TestComputeGetsNoStandIn(t *testing.T) {
	for _, spec := range []string{"1x2", "1x4", "2x2"} {
		t.Run(spec, func(t *testing.T) {
			p := withReserve(t, spec)
			defer p.Close()
			n := p.Size()
			var done sync.WaitGroup
			for range 2 * n {
				done.Add(1)
				mustSubmit(t, p, func(*Worker) { defer done.Done(); spinFor(100 * time.Millisecond) })
			}
			for range 100 {
				done.Add(1)
				mustSubmit(t, p, func(*Worker) { done.Done() })
			}
			done.Wait()
			if got := p.Stats().StandInsStarted; got != 0 {
				t.Errorf("%d stand-ins started for tasks that computed (%d workers running, GOMAXPROCS %d)", got, n, runtime.GOMAXPROCS(0))
			}
			// The watch needs a processor, which the computing workers
			// hold but for the runtime's preemptions: it looks less often
			// than its interval, but it looks.
			if looks := p.blocked.looks.Load(); looks < 5 {
				t.Errorf("the block watch looked %d times in 200ms", looks)
			}
		})
	}
}

// TestCloseRunsWorkQueuedBehindBlockedTasks: Close drains a pool whose
// running worker waits, unmarked, for work queued behind it (a channel a
// later task closes; spawned tasks it waits for on a WaitGroup): the
// watch looks on while Close drains, and a stand-in runs that work.
func TestCloseRunsWorkQueuedBehindBlockedTasks(t *testing.T) {
	t.Run("channel", func(t *testing.T) {
		p := withReserve(t, "1x1")
		release := make(chan struct{})
		started := make(chan struct{})
		mustSubmit(t, p, func(*Worker) { close(started); <-release })
		<-started
		mustSubmit(t, p, func(*Worker) { close(release) })
		within(t, hangBound, "Close after a blocked task and its releaser", func() {
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		})
	})
	t.Run("spawned", func(t *testing.T) {
		p := withReserve(t, "1x1")
		started := make(chan struct{})
		mustSubmit(t, p, func(w *Worker) {
			close(started)
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				w.Spawn(func(*Worker) { wg.Done() })
			}
			wg.Wait()
		})
		<-started
		within(t, hangBound, "Close after a task waiting for its spawns", func() {
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		})
	})
}

// TestStandInsStartedCountsWorkersBroughtBack: a stand-in slot that a
// worker still running (marked to retire by a Resize, and blocked) fills
// starts no worker, and StandInsStarted does not count it.
func TestStandInsStartedCountsWorkersBroughtBack(t *testing.T) {
	p := withReserve(t, "1x2")
	defer p.Close()
	release := make(chan struct{})
	var blocked, done sync.WaitGroup
	blocked.Add(2)
	for range 2 {
		done.Add(1)
		mustSubmit(t, p, func(*Worker) { defer done.Done(); blocked.Done(); <-release })
	}
	blocked.Wait()
	if err := p.Resize(1); err != nil { // marks worker 1, blocked, to retire
		t.Fatal(err)
	}
	ran, hold := make(chan struct{}), make(chan struct{})
	done.Add(1)
	mustSubmit(t, p, func(*Worker) { defer done.Done(); close(ran); <-hold })
	within(t, hangBound, "the task queued behind the blocked ones", func() { <-ran })
	st := p.Stats()
	brought := 0
	for _, ws := range st.Workers[2:] { // workers 0 and 1 never retired
		if !ws.Retired {
			brought++
		}
	}
	if st.StandInsStarted != uint64(brought) {
		t.Errorf("StandInsStarted = %d, but %d workers were brought back (StandIns %d)", st.StandInsStarted, brought, st.StandIns)
	}
	close(hold)
	close(release)
	done.Wait()
}

// TestStandInsRefusedCountsStandIns: a node that wants more stand-ins
// than its reserve counts each stand-in it could not start once, however
// many looks the block lasts, not once a look.
func TestStandInsRefusedCountsStandIns(t *testing.T) {
	p := withReserve(t, "1x1") // one running worker, one in reserve
	defer p.Close()
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce() // before Close, if the test stops early
	var blocked, done sync.WaitGroup
	const tasks = 3
	blocked.Add(2) // the worker and its stand-in, each in one of them
	for range tasks {
		done.Add(1)
		mustSubmit(t, p, func(*Worker) { defer done.Done(); blocked.Done(); <-release })
	}
	within(t, hangBound, "the worker and its stand-in to block", blocked.Wait)
	from := p.blocked.looks.Load()
	if !eventually(hangBound, func() bool { return p.blocked.looks.Load() >= from+50 }) {
		t.Fatalf("the block watch looked %d times in %v", p.blocked.looks.Load()-from, hangBound)
	}
	st := p.Stats()
	// Both workers of the node are blocked: it wants at least one more
	// (one per blocked worker) and at most twice its running workers in
	// all, 2 beyond the reserve; a node whose blocked count flickers on a
	// busy machine may count them again, but not at every look.
	if st.StandInsRefused < 1 || st.StandInsRefused > 6 {
		t.Errorf("StandInsRefused = %d over %d looks with both workers of a 1x1 pool with a reserve of 1 blocked; want 1 to 6",
			st.StandInsRefused, p.blocked.looks.Load()-from)
	}
	blocked.Add(tasks - 2) // the third task's Done: it runs once one returns
	releaseOnce()
	done.Wait()
}

// TestBlockWatchOff: WithBlockWatch(0) and NUMAPOOL_BLOCK_WATCH=0 start
// no watch, and a pool that can never have workers in reserve has none
// either.
func TestBlockWatchOff(t *testing.T) {
	if !threadCPUs {
		t.Skip("no block watch here")
	}
	for _, tc := range []struct {
		name  string
		opts  []Option
		env   map[string]string
		watch bool
	}{
		{"default with a reserve", []Option{WithWorkers(2), WithMaxWorkers(4)}, nil, true},
		{"option off", []Option{WithWorkers(2), WithMaxWorkers(4), WithBlockWatch(0)}, nil, false},
		{"env off", []Option{WithWorkers(2), WithMaxWorkers(4)}, map[string]string{envBlockWatch: "0"}, false},
		{"env 5ms", []Option{WithWorkers(2), WithMaxWorkers(4)}, map[string]string{envBlockWatch: "5ms"}, true},
		{"env 5, ms as NUMAPOOL_BLOCKTIME takes", []Option{WithWorkers(2), WithMaxWorkers(4)}, map[string]string{envBlockWatch: "5"}, true},
		{"no reserve ever", []Option{WithSpec("2x1")}, nil, false},
	} {
		p, err := newPool(tc.opts, env(tc.env))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := p.idle.watchKick != nil; got != tc.watch {
			t.Errorf("%s: block watch running %v, want %v", tc.name, got, tc.watch)
		}
		if tc.env[envBlockWatch] != "" && tc.env[envBlockWatch] != "0" && p.blocked.every != 5*time.Millisecond {
			t.Errorf("%s: interval %v", tc.name, p.blocked.every)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newPool(nil, env(map[string]string{envBlockWatch: "soon"})); err == nil {
		t.Errorf("NUMAPOOL_BLOCK_WATCH=soon was accepted")
	}
	if _, err := New(WithBlockWatch(-time.Second), WithoutEnv()); err == nil {
		t.Errorf("WithBlockWatch(-1s) was accepted")
	}
}

// TestBlockWatchRestsInAnIdlePool: once every worker sleeps the watch
// takes no look until one wakes.
func TestBlockWatchRestsInAnIdlePool(t *testing.T) {
	p := withReserve(t, "1x2")
	defer p.Close()
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		_ = p.Submit(ctx, func(*Worker) { wg.Done() })
	}
	wg.Wait()
	if !eventually(hangBound, func() bool { return p.idle.unparked.Load() == 0 }) {
		t.Fatal("the workers never all parked")
	}
	time.Sleep(20 * time.Millisecond) // a look under way ends
	before := p.blocked.looks.Load()
	time.Sleep(100 * time.Millisecond)
	if got := p.blocked.looks.Load() - before; got > 1 {
		t.Errorf("the block watch looked %d times in 100ms of an idle pool", got)
	}
	wg.Add(1)
	_ = p.Submit(ctx, func(*Worker) { time.Sleep(30 * time.Millisecond); wg.Done() })
	wg.Wait()
	if got := p.blocked.looks.Load() - before; got < 5 {
		t.Errorf("the block watch looked %d times while a task slept 30ms", got)
	}
}

// TestStandInsCountedStream: a stream where one task in ten waits
// without Block (a sleep, a channel, a read from a pipe), beside joins
// and loops, with Resize now and then: every task runs exactly once, and
// Close leaves no goroutine of the pool behind.
func TestStandInsCountedStream(t *testing.T) {
	for _, spec := range []string{"1x2", "2x2"} {
		t.Run(spec, func(t *testing.T) {
			p := withReserve(t, spec)
			placed := p.Workers()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			go func() { // feeds the pipe's readers
				b := make([]byte, 1)
				for {
					time.Sleep(200 * time.Microsecond)
					if _, err := w.Write(b); err != nil {
						return
					}
				}
			}()
			const tasks = 3000
			var runs [tasks]atomic.Int32
			tick := make(chan struct{})
			stopTick := make(chan struct{})
			go func() {
				for {
					select {
					case <-stopTick:
						return
					case <-time.After(300 * time.Microsecond):
						select {
						case tick <- struct{}{}:
						default:
						}
					}
				}
			}()
			var done sync.WaitGroup
			for i := range tasks {
				done.Add(1)
				err := p.Submit(ctx, func(wk *Worker) {
					defer done.Done()
					runs[i].Add(1)
					switch i % 10 {
					case 1:
						time.Sleep(500 * time.Microsecond)
					case 3:
						select {
						case <-tick:
						case <-time.After(2 * time.Millisecond):
						}
					case 5:
						b := make([]byte, 1)
						_, _ = r.Read(b)
					case 7:
						_ = wk.Join(func(*Worker) {}, func(*Worker) {})
					case 9:
						_ = wk.Pool().ParallelFor(context.Background(), 8, 1, func(*Worker, int, int) error { return nil })
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if i%500 == 250 {
					_ = p.Resize(len(p.domains) + i%(placed-len(p.domains)+1))
				}
			}
			within(t, 2*hangBound, "the stream", done.Wait)
			close(stopTick)
			for i := range runs {
				if n := runs[i].Load(); n != 1 {
					t.Fatalf("task %d ran %d times", i, n)
				}
			}
			st := p.Stats()
			t.Logf("%s: stand-ins started %d, refused %d", spec, st.StandInsStarted, st.StandInsRefused)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			// A worker's goroutine returns a moment after the last one
			// closes done, which Close waits for.
			var left []string
			if !eventually(hangBound, func() bool { left = poolGoroutines(); return len(left) == 0 }) {
				t.Fatalf("after Close, %d goroutines of the pool:\n%s", len(left), left[0])
			}
		})
	}
}

// TestStandInsForBlockedStrictGroupAndLoopWork blocks, unmarked, every
// running worker of a node in strict tasks, in a Group's functions or in
// a ParallelFor's bodies, and releases them from strict work for that
// node queued after: stand-ins of the node run it, on the node.
func TestStandInsForBlockedStrictGroupAndLoopWork(t *testing.T) {
	for _, how := range []string{"strict", "group", "loop"} {
		t.Run(how, func(t *testing.T) {
			p := withReserve(t, "2x2")
			defer p.Close()
			d := p.domains[0]
			node := p.Node(d.node.ID).Strict()
			n := int(d.size.Load())
			release := make(chan struct{})
			// blocked is closed once n waits have begun on the node's
			// workers; stand-ins may begin more.
			blocked := make(chan struct{})
			var waiting atomic.Int32
			wait := func(w *Worker) {
				if w.Node() == d.node.ID && waiting.Add(1) == int32(n) {
					close(blocked)
				}
				<-release
			}
			var done sync.WaitGroup
			done.Add(1)
			switch how {
			case "strict":
				done.Add(n - 1)
				for range n {
					if err := node.Submit(ctx, func(w *Worker) { defer done.Done(); wait(w) }); err != nil {
						t.Fatal(err)
					}
				}
			case "group":
				go func() {
					defer done.Done()
					_, _ = Run(node, func(w *Worker) (int, error) {
						g := w.Pool().Group(ctx)
						for range 64 * n { // more than node 1's thieves take
							g.Go(func(w *Worker) error { wait(w); return nil })
						}
						return 0, g.Wait()
					})
				}()
			case "loop":
				go func() {
					defer done.Done()
					// Each body waits on its own worker; pieces on node 1
					// wait too, which only needs node 1's stand-ins.
					_ = p.ParallelFor(ctx, 64*p.Size(), 1, func(w *Worker, lo, hi int) error { wait(w); return nil })
				}()
			}
			var ranOn atomic.Int64
			ranOn.Store(-1)
			within(t, hangBound, "the blocked "+how+" work and the strict task releasing it", func() {
				<-blocked
				if err := node.Submit(ctx, func(w *Worker) { ranOn.Store(int64(w.Node())); close(release) }); err != nil {
					t.Fatal(err)
				}
				done.Wait()
			})
			if got := ranOn.Load(); got != int64(d.node.ID) {
				t.Errorf("the strict releaser ran on node %d, want %d", got, d.node.ID)
			}
			if got := p.Stats().Nodes[0].StandInsStarted; got == 0 {
				t.Errorf("node %d started no stand-in", d.node.ID)
			}
		})
	}
}

// TestStandInRunsWhatABlockedTaskSpawned: a task that spawns work and
// waits for it on a sync.WaitGroup, unmarked, on a pool of one running
// worker and a reserve: a stand-in steals the work from the blocked worker's
// LIFO slot and queue. (A caller that joined, as Run from outside does,
// holds a seat on its own thread, which the watch does not read: a wait
// there is not made up for.)
func TestStandInRunsWhatABlockedTaskSpawned(t *testing.T) {
	p := withReserve(t, "1x1")
	defer p.Close()
	within(t, hangBound, "the waiting task", func() {
		done := make(chan struct{})
		err := p.Submit(ctx, func(w *Worker) {
			var wg sync.WaitGroup
			for range 10 {
				wg.Add(1)
				w.Spawn(func(*Worker) { wg.Done() })
			}
			wg.Wait()
			close(done)
		})
		if err != nil {
			t.Error(err)
		}
		<-done
	})
}

// TestBlockWatchRestsWithoutReserve: a pool that runs every worker it placed
// has none in reserve, and its watch takes no look while a task sleeps;
// a Resize that retires some wakes it.
func TestBlockWatchRestsWithoutReserve(t *testing.T) {
	if !threadCPUs {
		t.Skip("no block watch here")
	}
	p := newTestPool(t, WithSpec("1x2"))
	defer p.Close()
	sleep := func() {
		if _, err := Run(p.Node(p.Nodes()[0]).Strict(), func(*Worker) (int, error) {
			time.Sleep(30 * time.Millisecond)
			return 0, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	sleep()
	if got := p.blocked.looks.Load(); got != 0 {
		t.Errorf("with none in reserve, the block watch looked %d times", got)
	}
	if err := p.Resize(1); err != nil {
		t.Fatal(err)
	}
	sleep()
	if got := p.blocked.looks.Load(); got < 5 {
		t.Errorf("with a reserve after a Resize, the block watch looked %d times while a task slept 30ms", got)
	}
}

// TestStandInsFor: the stand-ins that keep a node's share busy, from its
// workers' CPU time over an interval.
func TestStandInsFor(t *testing.T) {
	const span = time.Millisecond
	for _, tc := range []struct {
		running, cur int
		busy         time.Duration
		want         int
	}{
		{2, 0, 0, 2},               // both wait: no reading, at most twice the running
		{2, 0, span, 2},            // one CPU of two busy: twice the workers
		{2, 0, 2 * span, 0},        // both busy: none
		{4, 2, 2 * span, 2},        // the stand-ins keep the share busy: as many as now
		{200, 198, span, 398},      // each worker busy half a percent: 400 in all
		{200, 198, span / 10, 398}, // a greater need, but at most twice the running at one look
		{3, 0, 3 * span / 2, 3},    // 1.5 of 3 CPUs busy: twice the workers
		{0, 0, 0, 0},               // nothing runs
	} {
		if got := standInsFor(tc.running, tc.cur, tc.busy, span); got != tc.want {
			t.Errorf("standInsFor(%d running, %d standing in, busy %v of %v) = %d, want %d", tc.running, tc.cur, tc.busy, span, got, tc.want)
		}
	}
}
