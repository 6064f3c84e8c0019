package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/steal"
	"github.com/numapool/numapool/topology"
)

func TestMain(m *testing.M) {
	if child := os.Getenv("NUMAPOOL_TEST_PANIC_CHILD"); child != "" {
		panicChildren(child)
		return
	}
	goleak.VerifyTestMain(m,
		// ants (a baseline in bench_test.go) starts a default pool with
		// these two goroutines when its package initialises.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}

// Every task runs exactly once: submissions from many goroutines (Submit
// and SubmitTo, soft and strict), each task spawning two children; Close
// drains everything.
func TestExactlyOnce(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 30_000
	}
	for _, spec := range []string{"", "2x2", "4x1"} {
		t.Run("spec="+spec, func(t *testing.T) {
			var opts []Option
			if spec != "" {
				opts = append(opts, WithSpec(spec))
			}
			p := newTestPool(t, opts...)
			roots := total / 3
			runs := make([]atomic.Int32, roots*3)
			leaf := func(id int) func(*Worker) { return func(*Worker) { runs[id].Add(1) } }
			root := func(id int) func(*Worker) {
				return func(w *Worker) {
					runs[id].Add(1)
					w.Spawn(leaf(roots + 2*id))
					w.Spawn(leaf(roots + 2*id + 1))
				}
			}
			nodes := p.Nodes()
			const submitters = 4
			var wg sync.WaitGroup
			for s := range submitters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for id := s; id < roots; id += submitters {
						var err error
						switch id % 3 {
						case 0:
							err = p.Submit(context.Background(), root(id))
						case 1:
							err = p.Node(nodes[id%len(nodes)]).Submit(context.Background(), root(id))
						default:
							err = p.Node(nodes[id%len(nodes)]).Strict().Submit(context.Background(), root(id))
						}
						if err != nil {
							t.Errorf("submit %d: %v", id, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for id := range runs {
				if n := runs[id].Load(); n != 1 {
					if bad < 5 {
						t.Errorf("task %d ran %d times", id, n)
					}
					bad++
				}
			}
			st := p.Stats()
			if st.Total.TasksRun != uint64(len(runs)) || st.Total.Spawned != uint64(2*roots) {
				t.Errorf("stats: %d run, %d spawned; want %d, %d", st.Total.TasksRun, st.Total.Spawned, len(runs), 2*roots)
			}
			if bad > 0 {
				t.Fatalf("%d tasks did not run exactly once", bad)
			}
		})
	}
}

// Strict submissions run only on their node.
func TestSubmitToStrictStaysOnNode(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"), WithSteal(steal.Flat))
	defer p.Close()
	var wrong atomic.Int32
	var wg sync.WaitGroup
	for i := range 2000 {
		node := p.Nodes()[i%2]
		wg.Add(1)
		if err := p.Node(node).Strict().Submit(context.Background(), func(w *Worker) {
			defer wg.Done()
			if w.Node() != node {
				wrong.Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d strict tasks ran on another node", n)
	}
}

// Strict tasks for one node while the other node idles: the idle node's
// workers never get them (no cross-node steal, nothing sent home), so a
// dry node does not churn a busy node's strict work.
func TestStrictTasksAreNotStolen(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	node := p.Nodes()[0]
	var ran, wrong atomic.Int32
	var wg sync.WaitGroup
	for range 2000 {
		wg.Add(1)
		if err := p.Node(node).Strict().Submit(context.Background(), func(w *Worker) {
			defer wg.Done()
			ran.Add(1)
			if w.Node() != node {
				wrong.Add(1)
			}
			for start := time.Now(); time.Since(start) < 5*time.Microsecond; {
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	_ = p.Close()
	st := p.Stats().Total
	if ran.Load() != 2000 || wrong.Load() != 0 {
		t.Errorf("%d tasks ran, %d on the wrong node", ran.Load(), wrong.Load())
	}
	if st.StealsCrossNode != 0 || st.SentHome != 0 {
		t.Errorf("strict work of node %d: %d cross-node steals, %d tasks sent home", node, st.StealsCrossNode, st.SentHome)
	}
}

// Rounds of strict tasks that spawn work, on every node: a node's strict
// task must wake that node's workers even when the last searcher to park
// is another node's (a lost wake-up hangs here).
func TestStrictBurstsNoLostWakeups(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	for _, spec := range []string{"2x1", "2x2", "4x1"} {
		t.Run(spec, func(t *testing.T) {
			p := newTestPool(t, WithSpec(spec))
			defer p.Close()
			var wg sync.WaitGroup
			var ran atomic.Int64
			for range rounds {
				for _, node := range p.Nodes() {
					wg.Add(1)
					if err := p.Node(node).Strict().Submit(context.Background(), func(w *Worker) {
						defer wg.Done()
						for range 4 {
							w.Spawn(func(*Worker) { ran.Add(1) })
						}
					}); err != nil {
						t.Fatal(err)
					}
				}
				wg.Wait()
			}
			_ = p.Close()
			if want := int64(rounds * len(p.Nodes()) * 4); ran.Load() != want {
				t.Errorf("%d spawned tasks ran, want %d", ran.Load(), want)
			}
		})
	}
}

// A worker whose node has strict and soft work queued takes from both:
// a stream of strict tasks does not hold the soft ones back.
func TestPinnedAndInjectShardsAlternate(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	node := p.Nodes()[0]
	gate := make(chan struct{})
	if err := p.Node(node).Strict().Submit(context.Background(), func(*Worker) { <-gate }); err != nil {
		t.Fatal(err)
	}
	var order []bool // true: strict; written by the one worker only
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(2)
		_ = p.Node(node).Strict().Submit(context.Background(), func(*Worker) { order = append(order, true); wg.Done() })
		_ = p.Node(node).Submit(context.Background(), func(*Worker) { order = append(order, false); wg.Done() })
	}
	close(gate)
	wg.Wait()
	soft := 0
	for _, strict := range order[:50] {
		if !strict {
			soft++
		}
	}
	if soft < 10 || soft > 40 {
		t.Errorf("of the first 50 tasks run, %d were soft and %d strict: one shard starved the other", soft, 50-soft)
	}
}

// Strict tasks that block until all of them have started: each needs its
// own worker, so none may be held behind another (a worker that took
// several pinned tasks at once would strand the rest).
func TestBlockingStrictTasksEachGetAWorker(t *testing.T) {
	for _, spec := range []string{"1x2", "2x2"} {
		p := newTestPool(t, WithSpec(spec))
		var started sync.WaitGroup
		all := make(chan struct{})
		for _, node := range p.Nodes() {
			for range p.Workers() / len(p.Nodes()) {
				started.Add(1)
				if err := p.Node(node).Strict().Submit(context.Background(), func(*Worker) { started.Done(); <-all }); err != nil {
					t.Fatal(err)
				}
			}
		}
		done := make(chan struct{})
		go func() { started.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: blocking strict tasks did not all start within 10 s", spec)
		}
		close(all)
		_ = p.Close()
	}
}

// One task at a time, waited for: a lost wake-up would hang.
func TestNoLostWakeups(t *testing.T) {
	rounds := 100_000
	if testing.Short() {
		rounds = 10_000
	}
	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	done := make(chan struct{})
	for i := range rounds {
		var err error
		if i%2 == 0 {
			err = p.Submit(context.Background(), func(*Worker) { done <- struct{}{} })
		} else {
			err = p.Node(p.Nodes()[i%len(p.Nodes())]).Submit(context.Background(), func(w *Worker) {
				w.Spawn(func(*Worker) { done <- struct{}{} })
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: task never ran (lost wake-up)", i)
		}
	}
}

// An idle passive pool sleeps: its workers burn (almost) no CPU, with the
// default block time and with a long one once it has passed. An active
// pool keeps searchers spinning: it burns CPU while idle, the price of
// its faster hand-off. The figures go to the log (README: wait policy).
func TestIdleCPU(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process CPU time is read with getrusage")
	}
	const window = 300 * time.Millisecond
	for _, tc := range []struct {
		name     string
		opts     []Option
		min, max time.Duration // CPU used in window
	}{
		{"passive", nil, 0, 30 * time.Millisecond},
		{"passive, block time 20ms", []Option{WithBlockTime(20 * time.Millisecond)}, 0, 30 * time.Millisecond},
		{"block time 0", []Option{WithBlockTime(0)}, 0, 30 * time.Millisecond},
		{"active", []Option{WithBlockTime(-1)}, window / 3, 10 * window},
		{"passive, block time infinite", []Option{WithBlockTime(-1)}, window / 3, 10 * window},
	} {
		p := newTestPool(t, append(tc.opts, WithSpec("2x2"))...)
		var ran sync.WaitGroup
		ran.Add(100)
		for range 100 { // warm up
			_ = p.Submit(context.Background(), func(*Worker) { ran.Done() })
		}
		ran.Wait()
		if tc.min == 0 {
			// A sleeping pool: measure once every worker has parked (a
			// loaded machine may hold a searcher off its CPU past its
			// block time), then it must stay asleep.
			deadline := time.Now().Add(10 * time.Second)
			for p.idle.unparked.Load() != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		time.Sleep(10 * time.Millisecond)
		before := processCPU()
		time.Sleep(window)
		used := processCPU() - before
		_ = p.Close()
		t.Logf("%s: an idle pool of 4 workers used %v of CPU in %v", tc.name, used, window)
		if used < tc.min || used > tc.max {
			t.Errorf("%s: idle pool used %v of CPU in %v, want %v..%v", tc.name, used, window, tc.min, tc.max)
		}
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	var ran atomic.Int32
	block := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { <-block })
	for range 1000 {
		_ = p.Submit(context.Background(), func(w *Worker) { ran.Add(1); w.Spawn(func(*Worker) { ran.Add(1) }) })
	}
	time.AfterFunc(20*time.Millisecond, func() { close(block) })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ran.Load(); n != 2000 {
		t.Errorf("Close ran %d of 2000 tasks", n)
	}
	if err := p.Submit(context.Background(), func(*Worker) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestShutdownReportsAbandoned(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	block := make(chan struct{})
	started := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { close(started); <-block })
	<-started
	for range 100 {
		_ = p.Submit(context.Background(), func(*Worker) {})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	time.AfterFunc(60*time.Millisecond, func() { close(block) })
	n, err := p.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || n != 100 {
		t.Errorf("Shutdown = %d, %v; want 100 abandoned, DeadlineExceeded", n, err)
	}
	if p.Stats().Abandoned != 100 {
		t.Errorf("Stats().Abandoned = %d", p.Stats().Abandoned)
	}
}

func TestPanicGoesToHandlerAndWorkerLives(t *testing.T) {
	var got atomic.Value
	p := newTestPool(t, WithWorkers(1), WithPanicHandler(func(v any, stack []byte) {
		got.Store(fmt.Sprintf("%v|%s", v, stack))
	}))
	_ = p.Submit(context.Background(), func(*Worker) { panic("boom") })
	var after atomic.Bool
	_ = p.Submit(context.Background(), func(*Worker) { after.Store(true) })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ := got.Load().(string)
	if !strings.HasPrefix(s, "boom|") || !strings.Contains(s, "pool_test.go") {
		t.Errorf("handler got %q", s)
	}
	if !after.Load() {
		t.Error("the worker did not live on after a panic")
	}
}

// Without a handler a task's panic fails the process, like an unrecovered
// panic in a goroutine.
func TestPanicWithoutHandlerCrashes(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NUMAPOOL_TEST_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "unhandled-boom") {
		t.Errorf("child: %v\n%s", err, out)
	}
}

// One error policy: a nil function is misuse and panics with a message
// naming the call, from outside the pool and inside a task alike; an
// unknown node is an error for errors.Is that names the node.
func TestErrorPolicy(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	ctx := context.Background()
	outside := map[string]func(){
		"Submit":         func() { _ = p.Submit(context.Background(), nil) },
		"TrySubmit":      func() { _ = p.TrySubmit(nil) },
		"SubmitCtx":      func() { _ = p.Submit(ctx, nil) },
		"SubmitTo":       func() { _ = p.Node(p.Nodes()[0]).Submit(context.Background(), nil) },
		"SubmitToStrict": func() { _ = p.Node(p.Nodes()[0]).Strict().Submit(context.Background(), nil) },
		"ParallelFor":    func() { _ = p.ParallelFor(ctx, 10, 1, nil) },
		"Group.Go":       func() { p.Group(ctx).Go(nil) },
		"Group.TryGo":    func() { p.Group(ctx).TryGo(nil) },
	}
	inside := map[string]func(w *Worker){
		"Spawn":       func(w *Worker) { w.Spawn(nil) },
		"Join":        func(w *Worker) { _ = w.Join(nil, func(*Worker) {}) },
		"ParallelFor": func(w *Worker) { _ = w.Pool().ParallelFor(ctx, 10, 1, nil) },
		"Group.Go":    func(w *Worker) { w.Pool().Group(ctx).Go(nil) },
	}
	check := func(where, name string, call func()) {
		defer func() {
			msg := fmt.Sprint(recover())
			if !strings.HasPrefix(msg, "pool: ") || !strings.Contains(msg, "nil") {
				t.Errorf("%s %s(nil): recover() = %q, want a pool: panic about the nil function", where, name, msg)
			}
		}()
		call()
	}
	for name, call := range outside {
		check("outside", name, call)
	}
	for name, call := range inside {
		onWorker(t, p, func(w *Worker) int { check("inside a task", name, func() { call(w) }); return 0 })
	}
	for name, err := range map[string]error{
		"SubmitTo":       p.Node(42).Submit(context.Background(), func(*Worker) {}),
		"SubmitToStrict": p.Node(42).Strict().Submit(context.Background(), func(*Worker) {}),
	} {
		if !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
			t.Errorf("%s(42): %v, want ErrUnknownNode naming node 42", name, err)
		}
	}
}

func TestBoundedShard(t *testing.T) {
	p := newTestPool(t, WithWorkers(1), WithShardBound(4))
	block := make(chan struct{})
	started := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { close(started); <-block })
	<-started
	full := 0
	for range 10 {
		if err := p.TrySubmit(func(*Worker) {}); errors.Is(err, ErrFull) {
			full++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if full != 6 {
		t.Errorf("%d of 10 TrySubmits were refused, want 6 (bound 4)", full)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := p.Submit(ctx, func(*Worker) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SubmitCtx on a full shard: %v", err)
	}
	close(block)
	if err := p.Submit(context.Background(), func(*Worker) {}); err != nil { // waits for room
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWorkerMisusePanics(t *testing.T) {
	if !cheapGID && !raceEnabled {
		t.Skip("on this platform the owner check is compiled in with -race only")
	}
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	ch := make(chan *Worker)
	_ = p.Submit(context.Background(), func(w *Worker) { ch <- w })
	w := <-ch
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Spawn") {
			t.Errorf("Spawn from a foreign goroutine: recover() = %v", r)
		}
	}()
	w.Spawn(func(*Worker) {})
}

func TestStatsAndExplain(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		_ = p.Submit(context.Background(), func(*Worker) { wg.Done() })
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if len(st.Workers) != 2 || len(st.Nodes) != 2 || st.Total.TasksRun != 100 {
		t.Errorf("stats %+v", st)
	}
	ex := p.Explain()
	for _, want := range []string{"2 workers on 2 node groups", "synthetic:2x1", "numa_domains", "hierarchical", "node 0", "node 1", "worker 1"} {
		if !strings.Contains(ex, want) {
			t.Errorf("Explain lacks %q:\n%s", want, ex)
		}
	}
	if runtime.GOOS == "linux" && !strings.Contains(ex, "no thread now") {
		t.Errorf("Explain after Close does not say the threads ended:\n%s", ex)
	}
}

// With the goroutines binding the workers are plain goroutines: no
// thread locked, bound or recorded, and Explain says so; every other
// binding locks each worker to a thread. Fork-join, spawns and outside
// submissions all run, each exactly once, up to Close.
func TestGoroutineWorkersAreNotLocked(t *testing.T) {
	for _, b := range []pin.Binding{pin.Goroutines, pin.None} {
		p := newTestPool(t, WithSpec("2x2"), WithBinding(b))
		for _, w := range p.workers {
			if locked := w.thread != nil; locked != (b != pin.Goroutines) {
				t.Errorf("binding %v: worker %d locked to a thread: %v", b, w.id, locked)
			}
			if b == pin.Goroutines && (int(w.tid.Load()) != 0 || !w.bound.IsEmpty() || w.spreadable().Len() != 0) {
				t.Errorf("binding %v: worker %d has thread %d, bound %s", b, w.id, int(w.tid.Load()), w.bound)
			}
		}
		ex := p.Explain()
		if onAny := strings.Count(ex, "a goroutine on any thread and CPU"); (b == pin.Goroutines) != (onAny == 4) {
			t.Errorf("binding %v: Explain names %d workers as goroutines:\n%s", b, onAny, ex)
		}
		const outside, spawns = 2000, 8
		ran := make([]atomic.Int32, outside*(spawns+1))
		var wg sync.WaitGroup
		wg.Add(len(ran))
		for i := range outside {
			err := p.Submit(context.Background(), func(w *Worker) {
				ran[i].Add(1)
				wg.Done()
				for k := range spawns {
					w.Spawn(func(*Worker) { ran[outside+i*spawns+k].Add(1); wg.Done() })
				}
				if i%100 == 0 {
					x, y, err := Fork(w, fibFork, fibArg{18, 6}, fibFork, fibArg{17, 6})
					if n := x + y; err != nil || n != fibSeq(18)+fibSeq(17) {
						t.Errorf("Fork in task %d: %d, %v", i, x+y, err)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		within(t, 10*time.Second, "tasks", wg.Wait)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		for i := range ran {
			if n := ran[i].Load(); n != 1 {
				t.Fatalf("binding %v: task %d ran %d times", b, i, n)
			}
		}
	}
}

// A locked worker runs every task on its thread; a goroutine worker has
// nothing to place, so a placement that cannot be made (a topology whose
// CPU list lacks a CPU it allows) leaves it unlocked and undegraded, even
// WithStrict, while a locked worker runs unbound and says so.
func TestWorkerThreadsByBinding(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("needs Linux thread IDs and two CPUs")
	}
	p := newTestPool(t, WithWorkers(2), WithBinding(pin.None))
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		_ = p.Submit(context.Background(), func(w *Worker) {
			defer wg.Done()
			runtime.Gosched()
			if tid := threadID(); tid != int(w.tid.Load()) {
				t.Errorf("worker %d (thread %d) ran a task on thread %d", w.id, int(w.tid.Load()), tid)
			}
		})
	}
	wg.Wait()
	_ = p.Close()

	broken := func() *topology.Topology {
		topo := topology.Fallback("test")
		topo.CPUs = topo.CPUs[:len(topo.CPUs)-1] // still allowed, no longer a CPU of it
		return topo
	}
	// Two workers, whatever GOMAXPROCS: the second gets the missing CPU.
	locked := newTestPool(t, WithTopology(broken()), WithWorkers(2), WithBinding(pin.NUMADomains))
	if ex := locked.Explain(); !strings.Contains(ex, "runs unbound") {
		t.Errorf("a locked worker that could not be placed is not reported:\n%s", ex)
	}
	_ = locked.Close()
	// Goroutine workers need no CPU of their own, so the missing CPU is no
	// degradation for them (the fallback's own note is taken away: under
	// WithRequiredPlacement it would fail New by itself).
	quiet := broken()
	quiet.Degraded = nil
	free, err := New(WithoutEnv(), WithTopology(quiet), WithWorkers(2), WithBinding(pin.Goroutines), WithRequiredPlacement())
	if err != nil {
		t.Fatalf("goroutine workers refused: %v", err)
	}
	defer free.Close()
	for _, w := range free.workers {
		if w.thread != nil || int(w.tid.Load()) != 0 {
			t.Errorf("goroutine worker %d locked to thread %d", w.id, int(w.tid.Load()))
		}
	}
	if ex := free.Explain(); strings.Contains(ex, "runs unbound") {
		t.Errorf("goroutine workers degraded:\n%s", ex)
	}
}

// A task in the LIFO slot is not stranded behind the long task that
// spawned it: an idle worker takes it on its last pass.
func TestLIFOTaskNotStranded(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	result := make(chan error, 1)
	_ = p.Submit(context.Background(), func(w *Worker) {
		ran := make(chan struct{})
		w.Spawn(func(*Worker) { close(ran) })
		// Keep this worker busy until the child has run elsewhere.
		select {
		case <-ran:
			result <- nil
		case <-time.After(10 * time.Second):
			result <- errors.New("the spawned task was stranded in the LIFO slot of a busy worker")
		}
	})
	if err := <-result; err != nil {
		t.Fatal(err)
	}
}

// Pools that run at the same time spread their workers over the CPUs: a
// second one-worker pool bound to cores does not land on the first one's
// core; once the first ends, its CPU is free again.
func TestPoolsSpreadOverCPUs(t *testing.T) {
	topo := topology.Discover()
	if topo.Allowed.Len() < 2 {
		t.Skipf("one CPU allowed (%s): nothing to spread over", topo.Allowed)
	}
	one := func() *Pool {
		return newTestPool(t, WithTopology(topo), WithWorkers(1), WithBinding(pin.Cores))
	}
	a := one()
	b := one()
	if a.workers[0].cpu == b.workers[0].cpu {
		t.Errorf("two pools' only workers share CPU %d", a.workers[0].cpu)
	}
	first := a.workers[0].cpu
	_ = a.Close()
	c := one()
	if c.workers[0].cpu != first {
		t.Errorf("after the first pool closed, a new pool's worker is on CPU %d, not the freed CPU %d", c.workers[0].cpu, first)
	}
	_ = b.Close()
	_ = c.Close()
	cpuClaims.Lock()
	left := len(cpuClaims.n)
	cpuClaims.Unlock()
	if left != 0 {
		t.Errorf("%d CPUs still claimed after every pool closed", left)
	}
}

// Close from inside a task would wait for itself: it closes intake and
// returns ErrInsideTask at once; the pool still runs what was queued, and
// Close from outside waits for it.
func TestCloseFromInsideATask(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	release := make(chan struct{})
	blocked := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { close(blocked); <-release }) // holds one worker
	<-blocked
	var ran atomic.Int32
	for range 10 {
		_ = p.Submit(context.Background(), func(*Worker) { ran.Add(1) })
	}
	got := make(chan error, 1)
	if err := p.Submit(context.Background(), func(*Worker) { got <- p.Close() }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, ErrInsideTask) {
			t.Errorf("Close inside a task = %v, want ErrInsideTask", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close inside a task did not return")
	}
	if err := p.Submit(context.Background(), func(*Worker) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close inside a task = %v, want ErrClosed", err)
	}
	close(release)
	if err := p.Close(); err != nil {
		t.Errorf("Close from outside: %v", err)
	}
	if ran.Load() != 10 {
		t.Errorf("%d of 10 queued tasks ran", ran.Load())
	}
}

// A burst of submissions from outside an idle pool spreads over its
// nodes: whole-pool work goes where a worker searches only while the
// node picked in turn sleeps entirely, so the burst wakes both nodes and
// each runs a fair share and receives some of it in its shard.
func TestOutsideBurstSpreadsOverNodes(t *testing.T) {
	for _, spec := range []string{"2x1", "2x2"} {
		t.Run(spec, func(t *testing.T) {
			p := newTestPool(t, WithSpec(spec))
			defer p.Close()
			const n = 2000
			ran := make([]atomic.Int64, 2)
			var wg sync.WaitGroup
			wg.Add(n)
			for range n {
				if err := p.Submit(context.Background(), func(w *Worker) {
					defer wg.Done()
					for start := time.Now(); time.Since(start) < 20*time.Microsecond; {
					}
					ran[w.group.index].Add(1)
				}); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			st := p.Stats()
			t.Logf("ran %d and %d; queued on the nodes %d and %d", ran[0].Load(), ran[1].Load(), st.Nodes[0].Submitted, st.Nodes[1].Submitted)
			for i := range ran {
				// Shares, not halves: on a machine busy with other work a
				// node's workers may get less CPU than the other's.
				if got := ran[i].Load(); got < n/20 {
					t.Errorf("node %d ran %d of %d tasks; want at least %d", p.Nodes()[i], got, n, n/20)
				}
				if got := st.Nodes[i].Submitted; got < n/4 {
					t.Errorf("node %d's shard received %d of the %d tasks; want at least %d", p.Nodes()[i], got, n, n/4)
				}
			}
		})
	}
}

// A nil context is taken as context.Background by every method that
// takes one (vet flags it, but it must not end the process from a
// worker).
func TestNilContextIsBackground(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	var nilCtx context.Context
	within(t, hangBound, "nil contexts", func() {
		if err := p.ParallelFor(nilCtx, 100, 1, func(*Worker, int, int) error { return nil }); err != nil {
			t.Errorf("ParallelForCtx(nil) = %v", err)
		}
		if got, err := MapReduce(nilCtx, p, 100, 1, func(_ *Worker, lo, hi int) (int, error) { return hi - lo, nil },
			func(a, b int) int { return a + b }); got != 100 || err != nil {
			t.Errorf("MapReduce(nil) = %d, %v", got, err)
		}
		if err := p.Submit(nilCtx, func(*Worker) {}); err != nil {
			t.Errorf("Submit(nil) = %v", err)
		}
		if _, err := p.Shutdown(nilCtx); err != nil {
			t.Errorf("Shutdown(nil) = %v", err)
		}
	})
}

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

// The user's *Pool stays open while the user is inside a blocking call on
// it (Run, ParallelFor), even if nothing else refers to it: the cleanup
// for a dropped Pool must not close intake under work that still runs
// and submits through w.Pool().
func poolCleanupFiresDuringRun(t *testing.T) {
	var refused int
	for range 20 {
		err := func() error {
			p := newTestPool(t, WithWorkers(2))
			_, err := Run(p, func(w *Worker) (int, error) {
				for range 3 {
					runtime.GC()
					time.Sleep(time.Millisecond)
				}
				_, err := Run(w.Pool(), func(*Worker) (int, error) { return 1, nil })
				return 0, err
			})
			return err
		}()
		if errors.Is(err, ErrClosed) {
			refused++
		}
	}
	if refused > 0 {
		t.Errorf("%d of 20: Run(w.Pool(), ...) inside Run(p, ...) returned ErrClosed: the pool was closed by the collector while the caller was still waiting in Run(p)", refused)
	}
}

func poolCleanupFiresDuringParallelFor(t *testing.T) {
	var refused int
	for range 20 {
		func() {
			p := newTestPool(t, WithWorkers(2))
			_ = p.ParallelFor(context.Background(), 4, 1, func(w *Worker, lo, hi int) error {
				if lo == 0 {
					for range 3 {
						runtime.GC()
						time.Sleep(time.Millisecond)
					}
				}
				if err := w.Pool().Submit(context.Background(), func(*Worker) {}); errors.Is(err, ErrClosed) {
					refused++ // racy counter, only for the report
				}
				return nil
			})
		}()
	}
	if refused > 0 {
		t.Errorf("%d loop bodies: w.Pool().Submit inside p.ParallelFor returned ErrClosed (pool closed by the collector while ParallelFor runs)", refused)
	}
}

// A Node (or a Future) keeps its pool open: the cleanup for a dropped
// Pool does not close it while a kept Node is still used.
func poolNodeKeepsPoolOpen(t *testing.T) {
	n := func() Node {
		p := newTestPool(t, WithWorkers(2))
		return p.Node(p.Nodes()[0])
	}()
	for range 3 {
		runtime.GC()
	}
	done := make(chan struct{})
	if err := n.Submit(context.Background(), func(*Worker) { close(done) }); err != nil {
		t.Fatalf("Node.Submit after a GC: %v (the pool was closed as dropped while its Node is kept)", err)
	}
	within(t, hangBound, "the task", func() { <-done })
	within(t, hangBound, "Close", func() { _ = n.p.Close() })
}

// TestPoolAdversarial runs the adversarial cases of the cleanup of a dropped Pool, one subtest
// each: races and load meant to break what the tests above assert.
func TestPoolAdversarial(t *testing.T) {
	t.Run("CleanupFiresDuringRun", poolCleanupFiresDuringRun)
	t.Run("CleanupFiresDuringParallelFor", poolCleanupFiresDuringParallelFor)
	t.Run("NodeKeepsPoolOpen", poolNodeKeepsPoolOpen)
}
