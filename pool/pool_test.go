package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/topology"
	"go.uber.org/goleak"
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

// maxThreadsEnv makes the test binary a child that lowers the runtime's
// thread limit (TestWorkersBeyondThreadLimit).
const maxThreadsEnv = "NUMAPOOL_TEST_MAX_THREADS"

// goMaxThreads reads the runtime's thread limit without changing it.
func goMaxThreads() int {
	limit := debug.SetMaxThreads(math.MaxInt32)
	debug.SetMaxThreads(limit)
	return limit
}

// More thread-locked workers than the runtime's thread limit allows are
// New's error, not the process's end ("fatal error: thread exhaustion"),
// and the room New computes follows the limit. Each limit is set in a
// child process, which the runtime would end.
func TestWorkersBeyondThreadLimit(t *testing.T) {
	if v := os.Getenv(maxThreadsEnv); v != "" {
		threadLimitChild(t, v)
		return
	}
	rooms := map[int]int{}
	for _, limit := range []int{150, 250} {
		t.Run(fmt.Sprintf("SetMaxThreads=%d", limit), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*hangBound)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorkersBeyondThreadLimit$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", maxThreadsEnv, limit))
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("child process hung:\n%s", out)
			}
			m := regexp.MustCompile(`child: room=(\d+)`).FindSubmatch(out)
			if err != nil || m == nil {
				t.Fatalf("child with the thread limit at %d (%v):\n%s", limit, err, out)
			}
			rooms[limit], _ = strconv.Atoi(string(m[1]))
		})
	}
	if len(rooms) != 2 {
		return
	}
	t.Logf("room for workers: %v", rooms)
	// The same test binary at the same point runs about the same threads
	// under both limits: the room moves with the limit.
	if d := rooms[250] - rooms[150]; d < 100-4 || d > 100+4 {
		t.Errorf("room %d under a limit of 150 threads, %d under 250: want it to grow by the 100 threads the limit did", rooms[150], rooms[250])
	}
}

// threadLimitChild lowers the runtime's thread limit to v and asks New
// for that many locked workers (an error naming the count, the room and
// the limit), then for the room it named (a pool, which runs a task on
// every worker), then for twice the limit under pin.Goroutines, which
// locks no thread (a pool). It prints the room for the parent.
func threadLimitChild(t *testing.T, v string) {
	limit, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	within(t, 3*hangBound, "the child", func() {
		debug.SetMaxThreads(limit)
		noEnv := func(string) (string, bool) { return "", false }

		_, err = newPool([]Option{WithWorkers(limit)}, noEnv)
		var le *place.LimitError
		if !errors.Is(err, ErrTooManyWorkers) || !errors.As(err, &le) {
			t.Fatalf("New with %d workers under a limit of %d threads: %v, want ErrTooManyWorkers", limit, limit, err)
		}
		for _, want := range []string{
			fmt.Sprintf("%d workers", limit),
			fmt.Sprintf("at most %d more", le.Room),
			fmt.Sprintf("limit of %d threads", limit),
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if le.Room <= 0 || le.Room >= limit {
			t.Fatalf("room %d under a limit of %d threads", le.Room, limit)
		}

		p, err := newPool([]Option{WithWorkers(le.Room)}, noEnv)
		if err != nil {
			t.Fatalf("New with the %d workers the error allowed: %v", le.Room, err)
		}
		onEveryWorker(t, p)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}

		p, err = newPool([]Option{WithWorkers(2 * limit), WithBinding(pin.Goroutines)}, noEnv)
		if err != nil {
			t.Fatalf("New with %d goroutine workers under a limit of %d threads: %v", 2*limit, limit, err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("child: room=%d\n", le.Room)
	})
}

// onEveryWorker runs one task on each of p's workers at once: each waits
// until all have started, which only one task per worker can do, so every
// worker's thread is in use together.
func onEveryWorker(t *testing.T, p *Pool) {
	t.Helper()
	n := p.Workers()
	started := make(chan struct{}, n)
	release := make(chan struct{})
	for range n {
		if err := p.Submit(context.Background(), func(*Worker) {
			started <- struct{}{}
			<-release
		}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		<-started
	}
	close(release)
}

// The count is checked wherever it comes from, against the limit the
// runtime has: the environment's is named as such.
func TestWorkerCountOverThreadLimit(t *testing.T) {
	over := goMaxThreads() + 1
	for _, tc := range []struct {
		name string
		opts []Option
		env  map[string]string
		want string
	}{
		{"WithWorkers", []Option{WithWorkers(over)}, nil, fmt.Sprintf("pool: %d workers", over)},
		{envNumWorkers, nil, map[string]string{envNumWorkers: fmt.Sprint(over)}, fmt.Sprintf("pool: %s=%d: %d workers", envNumWorkers, over, over)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPool(tc.opts, env(tc.env))
			if err == nil {
				p.Close()
			}
			if !errors.Is(err, ErrTooManyWorkers) || !strings.HasPrefix(fmt.Sprint(err), tc.want) {
				t.Fatalf("New = %v, want ErrTooManyWorkers starting %q", err, tc.want)
			}
		})
	}
}

// A task that blocks holds its worker (the package documentation, Tasks
// that block): on a pool of one worker, a task that waits with a
// sync.WaitGroup for a task it submitted waits with that task unrun,
// until something else lets it go; the same wait with Group.Wait runs the
// task meanwhile and returns.
func TestBlockedTaskHoldsItsWorker(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	var ran atomic.Bool
	blocked, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	_ = p.Submit(context.Background(), func(w *Worker) {
		defer close(done)
		var wg sync.WaitGroup
		wg.Add(1)
		_ = w.Pool().Submit(context.Background(), func(*Worker) { ran.Store(true); wg.Done() })
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		close(blocked)
		select {
		case <-waited:
		case <-release:
		}
	})
	<-blocked
	if eventually(30*time.Millisecond, ran.Load) {
		t.Errorf("the task a blocked task submitted ran on the pool's one worker")
	}
	close(release)
	waitClosed(t, done, hangBound, "the blocked task")

	var groupRan atomic.Bool
	err := inTask(p, func(w *Worker) {
		g := w.Pool().Group(context.Background())
		g.Go(func(*Worker) error { groupRan.Store(true); return nil })
		_ = g.Wait()
	})
	if err != nil || !groupRan.Load() {
		t.Errorf("Group.Wait inside a task on one worker: %v, its task ran: %v", err, groupRan.Load())
	}
}

// Two pools whose tasks wait for each other's work deadlock (the package
// documentation, pools that wait on each other): a task of A waits for a
// Run on B whose function waits for a Run on A, and with one worker each
// neither Run returns until the test lets B's function go.
func TestPoolsWaitingOnEachOtherDeadlock(t *testing.T) {
	a := newTestPool(t, WithWorkers(1))
	defer a.Close()
	b := newTestPool(t, WithWorkers(1))
	defer b.Close()
	release := make(chan struct{})
	result := Async(a, func(*Worker) (int, error) {
		return Run(b, func(*Worker) (int, error) {
			inner := Async(a, func(*Worker) (int, error) { return 1, nil })
			select {
			case <-inner.Done():
				return inner.Wait()
			case <-release:
				return 0, errors.New("let go")
			}
		})
	})
	if eventually(30*time.Millisecond, func() bool { return isDone(result.Done()) }) {
		t.Errorf("A's task waiting on B waiting on A returned: want them deadlocked")
	}
	close(release)
	waitClosed(t, result.Done(), hangBound, "the let-go Run")
	if _, err := result.Wait(); err == nil {
		t.Errorf("the Run returned nil, want the let-go error")
	}
}

// BenchmarkNew times New and Close of pools with a worker per synthetic
// CPU, laid over the real CPUs, beside a floor: as many goroutines, each
// locked to its thread and bound to one CPU, started and ended. new-ms
// and close-ms are per pool (for the floor: its start and its end).
func BenchmarkNew(b *testing.B) {
	for _, s := range []struct {
		workers int
		spec    string
	}{{64, "4x16"}, {256, "8x32"}, {512, "16x32"}, {1024, "16x64"}, {2048, "32x64"}} {
		b.Run(fmt.Sprint(s.workers), func(b *testing.B) {
			b.Run("pool", func(b *testing.B) { benchNewPool(b, s.spec, s.workers) })
			b.Run("floor", func(b *testing.B) { benchNewFloor(b, s.workers) })
		})
	}
}

func benchNewPool(b *testing.B, spec string, workers int) {
	var opened, closed time.Duration
	for b.Loop() {
		t0 := time.Now()
		p, err := New(WithSpec(spec), WithoutEnv())
		if err != nil {
			b.Skipf("New(%s): %v", spec, err)
		}
		t1 := time.Now()
		if n := p.Workers(); n != workers {
			b.Fatalf("New(%s) has %d workers, want %d", spec, n, workers)
		}
		t2 := time.Now()
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		opened += t1.Sub(t0)
		closed += time.Since(t2)
	}
	reportNew(b, opened, closed)
}

// benchNewFloor starts n goroutines that each lock their thread and bind
// it to one of the real CPUs in turn, waits until all are bound, then
// ends them: a locked goroutine that returns takes its thread with it, as
// a worker's does.
func benchNewFloor(b *testing.B, n int) {
	probe, err := pin.Lock(topology.CPUSet{})
	if err != nil {
		b.Skip(err)
	}
	cpus := probe.Original().List()
	_ = probe.Restore()
	if len(cpus) == 0 {
		b.Skip("no CPUs in the thread's mask")
	}
	var opened, closed time.Duration
	for b.Loop() {
		t0 := time.Now()
		var bound, ended sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, n)
		bound.Add(n)
		ended.Add(n)
		for i := range n {
			go func() {
				defer ended.Done()
				_, err := pin.Lock(topology.NewCPUSet(cpus[i%len(cpus)]))
				if err != nil {
					errs <- err
				}
				bound.Done()
				<-stop
			}()
		}
		bound.Wait()
		t1 := time.Now()
		close(stop)
		ended.Wait()
		opened += t1.Sub(t0)
		closed += time.Since(t1)
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	}
	reportNew(b, opened, closed)
}

func reportNew(b *testing.B, opened, closed time.Duration) {
	ops := float64(b.N)
	b.ReportMetric(float64(opened.Microseconds())/1e3/ops, "new-ms")
	b.ReportMetric(float64(closed.Microseconds())/1e3/ops, "close-ms")
}

// BenchmarkCostsAtScale measures what a pool costs per task and per idle
// second as it grows, where 2 CPUs cannot show it in wall time: the
// process's CPU time per task of a stream of tasks submitted from outside
// and a fork-join tree inside, the parks, steals and pulls from the
// node's shards per task (Stats), and the CPU time an idle second costs
// once every worker sleeps (over three).
func BenchmarkCostsAtScale(b *testing.B) {
	for _, spec := range []string{"2x4", "16x64", "32x64"} {
		b.Run(spec, func(b *testing.B) {
			p, err := New(WithSpec(spec), WithoutEnv())
			if err != nil {
				b.Skip(err)
			}
			defer p.Close()
			const stream = 20000
			var tasks, parks, steals, pulls uint64
			var cpu time.Duration
			for b.Loop() {
				before := p.Stats().Total
				c0 := processCPU()
				var wg sync.WaitGroup
				wg.Add(stream)
				for range stream {
					_ = p.Submit(context.Background(), func(*Worker) { wg.Done() })
				}
				wg.Wait()
				if _, err := Run(p, func(w *Worker) (int, error) { return fibJoin(w, 22, 4), nil }); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - c0
				after := p.Stats().Total
				tasks += after.Completed - before.Completed
				parks += after.Parks - before.Parks
				steals += after.StealsInNode + after.StealsCrossNode - before.StealsInNode - before.StealsCrossNode
				pulls += after.InjectPulls + after.InjectPullsCrossNode - before.InjectPulls - before.InjectPullsCrossNode
			}
			n := float64(tasks)
			b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/task")
			b.ReportMetric(float64(parks)/n, "parks/task")
			b.ReportMetric(float64(steals)/n, "steals/task")
			b.ReportMetric(float64(pulls)/n, "pulls/task")
			// Idle: once every worker sleeps and the workload's garbage is
			// collected, a second of nothing.
			b.StopTimer()
			for p.idle.unparked.Load() != 0 {
				time.Sleep(time.Millisecond)
			}
			runtime.GC()
			const idle = 3 * time.Second // one second is as noisy as the differences here
			c0 := processCPU()
			time.Sleep(idle)
			b.ReportMetric(float64((processCPU()-c0).Microseconds())/1e3/idle.Seconds(), "idle-cpu-ms/s")
		})
	}
}
