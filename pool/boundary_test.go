package pool

// Tests of the boundary API: Future, Async and Run on a Target, the
// generic Join, Node handles, ParallelForErr, Group order, MapReduce and
// PerWorker, PanicError's formatting and the Stats JSON. Every wait that
// could hang is bounded (hangBound), so a hang fails the test.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sync/errgroup"
)

var errBody = errors.New("body failed")

// loopStopSlack is how many loop bodies (of ~5 µs each) may start on the
// other workers between the moment a body returns its error and the
// moment the loop records it and stops handing out parts: a couple per
// worker, and some room for a failing worker that the OS (a loaded
// machine, the race detector) holds up for tens of microseconds in that
// window. Without the stop the count is in the thousands.
func loopStopSlack(p *Pool) int64 { return int64(4*p.Workers() + 8) }

// isDone reports whether ch is closed now, without waiting.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ---------------------------------------------------------------------
// 1. A task hands a value back: Run, Async, Future.

func TestRunReturnsValueAndError(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	within(t, hangBound, "Run", func() {
		v, err := Run(p, func(*Worker) (int, error) { return 42, nil })
		if v != 42 || err != nil {
			t.Errorf("Run = %d, %v; want 42, nil", v, err)
		}
		s, err := Run(p, func(*Worker) (string, error) { return "partial", errBody })
		if s != "partial" || !errors.Is(err, errBody) {
			t.Errorf("Run = %q, %v; want the function's value and error", s, err)
		}
	})
	// On the calling task's own worker Run calls fn there.
	same := onWorker(t, p, func(w *Worker) bool {
		got, err := Run(w, func(w2 *Worker) (*Worker, error) { return w2, nil })
		return got == w && err == nil
	})
	if !same {
		t.Error("Run(w, fn) from a task did not run fn on w")
	}
}

func TestAsyncWaitOutside(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	futures := make([]*Future[int], 100)
	for i := range futures {
		futures[i] = Async(p, func(*Worker) (int, error) { return i * i, nil })
	}
	within(t, hangBound, "Wait on 100 futures", func() {
		for i, f := range futures {
			if v, err := f.Wait(); v != i*i || err != nil {
				t.Errorf("future %d: %d, %v", i, v, err)
			}
			<-f.Done()
			if v, err := f.Wait(); v != i*i || err != nil { // again: same result
				t.Errorf("future %d, second Wait: %d, %v", i, v, err)
			}
		}
	})
	// Many goroutines wait for one future.
	release := make(chan struct{})
	f := Async(p, func(*Worker) (string, error) { <-release; return "shared", nil })
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := f.Wait(); v != "shared" || err != nil {
				wrong.Add(1)
			}
		}()
	}
	close(release)
	within(t, hangBound, "8 goroutines waiting for one future", wg.Wait)
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d of 8 waiters got a wrong result", n)
	}
}

// With one worker, a task that waits for a future it queued must run it
// itself: blocking would deadlock.
func TestAsyncWaitInsideHelps(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	type result struct {
		sum int
		err error
	}
	out := make(chan result, 1)
	if err := p.Submit(context.Background(), func(w *Worker) {
		targets := []Target{w, p, p.Node(w.Node()), p.Node(w.Node()).Strict()}
		var fs []*Future[int]
		for i, on := range targets {
			fs = append(fs, Async(on, func(*Worker) (int, error) { return i + 1, nil }))
		}
		sum := 0
		var errs []error
		for _, f := range fs {
			v, err := f.Wait()
			sum += v
			errs = append(errs, err)
		}
		// Run on the pool from inside a task helps too.
		v, err := Run(p, func(*Worker) (int, error) { return 100, nil })
		sum += v
		errs = append(errs, err)
		out <- result{sum, errors.Join(errs...)}
	}); err != nil {
		t.Fatal(err)
	}
	r := recv(t, out, "a task waiting for its own futures on a 1-worker pool hung: Wait blocks instead of helping")
	if r.sum != 1+2+3+4+100 || r.err != nil {
		t.Errorf("inside a task: sum %d, err %v; want 110, nil", r.sum, r.err)
	}
}

// A task that queues futures on its pool must not block its worker
// waiting for room in a bounded node queue that only that worker can
// empty. With one worker and WithShardBound(1), the second Async from
// inside a task waits for room forever: the pool is deadlocked. (Async's
// doc: it "returns its Future at once"; Group.Go from a task, by
// contrast, queues on the worker and ignores the bound.)
func TestAsyncInsideTaskOnFullBoundedNode(t *testing.T) {
	p := newTestPool(t, WithWorkers(1), WithShardBound(1))
	res := make(chan error, 1)
	if err := p.Submit(context.Background(), func(w *Worker) {
		f1 := Async(p, func(*Worker) (int, error) { return 1, nil })
		f2 := Async(p, func(*Worker) (int, error) { return 2, nil }) // the node's queue holds f1
		_, err1 := f1.Wait()
		_, err2 := f2.Wait()
		res <- errors.Join(err1, err2)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if err != nil {
			t.Errorf("futures queued from a task on a bounded pool: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Error("Async from inside a task blocked its only worker waiting for room in the bounded node queue (deadlock)")
	}
	// Close unblocks a stuck Async (it gets ErrClosed), so nothing leaks.
	within(t, hangBound, "Close", func() { _ = p.Close() })
}

func TestFutureDoneChannel(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	release := make(chan struct{})
	f := Async(p, func(*Worker) (string, error) { <-release; return "ok", nil })
	if isDone(f.Done()) {
		t.Fatal("Done closed before the function returned")
	}
	close(release)
	select {
	case <-f.Done():
	case <-time.After(hangBound):
		t.Fatal("Done not closed")
	}
	if v, err := f.Wait(); v != "ok" || err != nil {
		t.Errorf("after Done: %q, %v", v, err)
	}
}

// Once Wait has returned the result, Done is closed: a caller that waited
// and then selects on Done must not find it open. (finish stores done
// before it closes the channel, so a waiter that sees done can return
// while Done is still open: this loop usually catches it in a few
// hundred futures.)
func TestFutureDoneClosedOnceWaitReturns(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	n := 0
	within(t, hangBound, "Wait on futures for 300ms", func() {
		for start := time.Now(); time.Since(start) < 300*time.Millisecond; n++ {
			f := Async(p, func(*Worker) (int, error) { return n, nil })
			v, _ := f.Wait()
			if !isDone(f.Done()) {
				t.Errorf("future %d: Wait returned %d but Done is not closed", n, v)
				return
			}
		}
	})
	t.Logf("%d futures", n)
}

//go:noinline
func boundaryPanicker(v any) int { panic(v) }

func TestFuturePanicIsPanicError(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	var err error
	within(t, hangBound, "a panicking future", func() {
		_, err = Async(p, func(*Worker) (int, error) { return boundaryPanicker("kaboom"), nil }).Wait()
	})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" {
		t.Fatalf("Wait = %v (%T), want *PanicError with value kaboom", err, err)
	}
	if !strings.Contains(string(pe.Stack), "boundaryPanicker") {
		t.Errorf("stack does not show the panicking function:\n%s", pe.Stack)
	}
	// A panic with an error value unwraps to it.
	within(t, hangBound, "a panicking Run", func() {
		_, err = Run(p, func(*Worker) (int, error) { return boundaryPanicker(errBody), nil })
	})
	if !errors.As(err, &pe) || !errors.Is(err, errBody) {
		t.Errorf("Run = %v, want a *PanicError wrapping errBody", err)
	}
	// Run on the calling worker returns the panic too.
	err = onWorker(t, p, func(w *Worker) error {
		_, err := Run(w, func(*Worker) (int, error) { return boundaryPanicker("here"), nil })
		return err
	})
	if !errors.As(err, &pe) || pe.Value != "here" {
		t.Errorf("Run(w) = %v, want a *PanicError", err)
	}
	// The worker lived on.
	within(t, hangBound, "Run after panics", func() {
		if v, err := Run(p, func(*Worker) (int, error) { return 1, nil }); v != 1 || err != nil {
			t.Errorf("Run after panics = %d, %v", v, err)
		}
	})
}

// Async on a node runs there: strict always, and every time.
func TestAsyncOnNode(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	nodes := p.Nodes()
	if len(nodes) != 2 {
		t.Fatalf("nodes %v", nodes)
	}
	var fs []*Future[int]
	var want []int
	for range 50 {
		for _, id := range nodes {
			fs = append(fs, Async(p.Node(id).Strict(), func(w *Worker) (int, error) { return w.Node(), nil }))
			want = append(want, id)
		}
	}
	soft := Async(p.Node(nodes[1]), func(w *Worker) (int, error) { return w.Node(), nil })
	within(t, hangBound, "futures on nodes", func() {
		for i, f := range fs {
			if got, err := f.Wait(); got != want[i] || err != nil {
				t.Errorf("Async(Node(%d).Strict()) ran on node %d (%v)", want[i], got, err)
			}
		}
		if got, err := soft.Wait(); err != nil || !slices.Contains(nodes, got) {
			t.Errorf("Async(Node(%d)) soft = %d, %v", nodes[1], got, err)
		}
	})
}

func TestAsyncRefusedAtOnce(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	var ran atomic.Bool
	fn := func(*Worker) (int, error) { ran.Store(true); return 1, nil }

	for _, on := range []Node{p.Node(42), p.Node(42).Strict()} {
		f := Async(on, fn)
		if !isDone(f.Done()) {
			t.Error("Async on an unknown node: the future is not done at once")
		}
		if _, err := f.Wait(); !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
			t.Errorf("Async on node 42: %v, want ErrUnknownNode naming 42", err)
		}
	}
	if _, err := Run(p.Node(42), fn); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("Run on node 42: %v", err)
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for name, on := range map[string]Target{"pool": p, "node": p.Node(p.Nodes()[0]), "strict node": p.Node(p.Nodes()[0]).Strict()} {
		f := Async(on, fn)
		if !isDone(f.Done()) {
			t.Errorf("Async on a closed %s: not done at once", name)
		}
		if _, err := f.Wait(); !errors.Is(err, ErrClosed) {
			t.Errorf("Async on a closed %s: %v, want ErrClosed", name, err)
		}
		if _, err := Run(on, fn); !errors.Is(err, ErrClosed) {
			t.Errorf("Run on a closed %s: %v, want ErrClosed", name, err)
		}
	}
	if err := p.Submit(context.Background(), func(*Worker) { ran.Store(true) }); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit on a closed pool: %v, want ErrClosed", err)
	}
	if ran.Load() {
		t.Error("a refused function ran")
	}
}

// ---------------------------------------------------------------------
// 2. Fork returns both values.

// mergeSort sorts s with Fork, returning a new slice.
func mergeSort(w *Worker, s []int) []int {
	if len(s) <= 64 {
		out := slices.Clone(s)
		slices.Sort(out)
		return out
	}
	mid := len(s) / 2
	a, b, err := Fork(w, mergeSort, s[:mid], mergeSort, s[mid:])
	if err != nil {
		panic(err)
	}
	out := make([]int, 0, len(s))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i] <= b[j] {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return append(append(out, a[i:]...), b[j:]...)
}

func fibForked(w *Worker, n int) int {
	if n < 12 {
		return fibSeq(n)
	}
	a, b, err := Fork(w, fibForked, n-1, fibForked, n-2)
	if err != nil {
		panic(err)
	}
	return a + b
}

func TestForkComputes(t *testing.T) {
	for _, spec := range []string{"", "2x2"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, specOpts(spec)...)
			defer p.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			in := make([]int, 20000)
			for i := range in {
				in[i] = rng.IntN(1000)
			}
			want := slices.Clone(in)
			slices.Sort(want)
			within(t, hangBound, "merge sort", func() {
				got, err := Run(p, func(w *Worker) ([]int, error) { return mergeSort(w, in), nil })
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("mergeSort: err %v, sorted correctly %v", err, slices.Equal(got, want))
				}
				f, err := Run(p, func(w *Worker) (int, error) { return fibForked(w, 22), nil })
				if f != fibSeq(22) || err != nil {
					t.Errorf("fibForked(22) = %d, %v", f, err)
				}
			})
		})
	}
}

func TestJoinAndForkPanics(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	type out struct {
		a   int
		b   string
		err error
	}
	res := onWorker(t, p, func(w *Worker) out {
		a, b, err := Fork(w,
			func(*Worker, int) int { return 5 }, 0,
			func(*Worker, int) string { boundaryPanicker("half"); return "" }, 0)
		return out{a, b, err}
	})
	var pe *PanicError
	if !errors.As(res.err, &pe) || pe.Value != "half" || res.a != 5 {
		t.Errorf("Fork with a panicking half = %d, %v; want 5 and a *PanicError", res.a, res.err)
	}
	// Join from outside, through Run.
	var left, right atomic.Bool
	join := func(a, b func(*Worker)) error {
		_, err := Run(p, func(w *Worker) (struct{}, error) { return struct{}{}, w.Join(a, b) })
		return err
	}
	within(t, hangBound, "Join through Run", func() {
		if err := join(func(*Worker) { left.Store(true) }, func(*Worker) { right.Store(true) }); err != nil {
			t.Errorf("Join = %v", err)
		}
		if !left.Load() || !right.Load() {
			t.Error("Join did not run both halves")
		}
		err := join(func(*Worker) {}, func(*Worker) { boundaryPanicker("right") })
		if !errors.As(err, &pe) || pe.Value != "right" {
			t.Errorf("Join with a panic = %v", err)
		}
		err = join(func(*Worker) { boundaryPanicker("left") }, func(*Worker) { boundaryPanicker("right") })
		var pes []*PanicError
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			if errors.As(e, &pe) {
				pes = append(pes, pe)
			}
		}
		if len(pes) != 2 {
			t.Errorf("Join with both halves panicking = %v, want both panics joined", err)
		}
	})
}

// ---------------------------------------------------------------------
// 3. ParallelForErr.

func TestParallelForErrStopsAtFirstError(t *testing.T) {
	const n, grain = 100_000, 10 // 10 000 bodies if nothing stopped it
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"real", nil},
		{"2x1", []Option{WithSpec("2x1")}},
		{"2x1-cross", []Option{WithSpec("2x1"), WithCrossNodeLoops()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, tc.opts...)
			defer p.Close()
			split := p.Split(n)
			var started, after atomic.Int64
			var failed atomic.Bool
			var err error
			within(t, hangBound, "a failing ParallelForErr", func() {
				err = p.ParallelFor(context.Background(), n, grain, func(w *Worker, lo, hi int) error {
					if failed.Load() {
						after.Add(1)
					}
					spinFor(5 * time.Microsecond) // a body that costs more than the error's way back
					if started.Add(1) == 20 {
						err := fmt.Errorf("piece [%d,%d): %w", lo, hi, errBody)
						failed.Store(true) // the last thing before the return
						return err
					}
					return nil
				})
			})
			t.Logf("%d bodies started, %d after the error (of %d)", started.Load(), after.Load(), n/grain)
			if !errors.Is(err, errBody) {
				t.Errorf("ParallelForErr = %v, want errBody", err)
			}
			if limit := loopStopSlack(p); after.Load() > limit {
				t.Errorf("%d bodies started after the error, want at most %d", after.Load(), limit)
			}
			if !slices.Equal(p.Split(n), split) {
				t.Errorf("Split changed: %v, then %v", split, p.Split(n))
			}
		})
	}
}

// A loop that succeeds covers every index once, on the node Split gives
// it (exactly: pieces stay home by default); a panic comes back as *PanicError.
func TestParallelForErrBlocksAndPanics(t *testing.T) {
	const n = 50_000
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	nodeOf := make([]int, n)
	for _, b := range p.Split(n) {
		for i := b.Lo; i < b.Hi; i++ {
			nodeOf[i] = b.Node
		}
	}
	seen := make([]atomic.Int32, n)
	var wrong atomic.Int64
	within(t, hangBound, "ParallelForErr", func() {
		err := p.ParallelFor(context.Background(), n, 100, func(w *Worker, lo, hi int) error {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
				if nodeOf[i] != w.Node() {
					wrong.Add(1)
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("ParallelForErr = %v", err)
		}
	})
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Fatalf("index %d ran %d times", i, c)
		}
	}
	if wrong.Load() != 0 {
		t.Errorf("%d indexes ran off the node Split gave them", wrong.Load())
	}
	within(t, hangBound, "a panicking ParallelForErr", func() {
		err := p.ParallelFor(context.Background(), n, 100, func(_ *Worker, lo, hi int) error {
			if lo <= n/2 && n/2 < hi {
				boundaryPanicker("loop")
			}
			return nil
		})
		var pe *PanicError
		if !errors.As(err, &pe) || pe.Value != "loop" {
			t.Errorf("ParallelForErr with a panic = %v", err)
		}
	})
}

func TestParallelForErrCtx(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	const n = 100_000
	// Cancelled before: no body runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var bodies atomic.Int64
	within(t, hangBound, "ParallelForErr(cancelled ctx)", func() {
		err := p.ParallelFor(ctx, n, 10, func(*Worker, int, int) error { bodies.Add(1); return nil })
		if !errors.Is(err, context.Canceled) || bodies.Load() != 0 {
			t.Errorf("pre-cancelled: %v, %d bodies; want context.Canceled, 0", err, bodies.Load())
		}
	})
	// Cancelled during.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var started, after atomic.Int64
	var cancelled atomic.Bool
	within(t, hangBound, "ParallelForErr cancelled midway", func() {
		err := p.ParallelFor(ctx, n, 10, func(*Worker, int, int) error {
			if cancelled.Load() {
				after.Add(1)
			}
			spinFor(5 * time.Microsecond)
			if started.Add(1) == 50 {
				cancel()
				cancelled.Store(true)
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ParallelForErr cancelled midway = %v", err)
		}
	})
	t.Logf("%d bodies, %d after cancel", started.Load(), after.Load())
	if limit := loopStopSlack(p); after.Load() > limit {
		t.Errorf("%d bodies started after cancel, want at most %d", after.Load(), limit)
	}
}

// Worker.ParallelForErr and Worker.ParallelForCtx from a task on a
// 1-worker pool: the task must run the loop itself.
func TestWorkerParallelForErrAndCtx(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	type out struct {
		sum                  int64
		okErr, failErr, cErr error
		afterCancel          int64
	}
	res := make(chan out, 1)
	if err := p.Submit(context.Background(), func(w *Worker) {
		var o out
		var sum atomic.Int64
		o.okErr = w.Pool().ParallelFor(context.Background(), 1000, 10, func(_ *Worker, lo, hi int) error {
			for i := lo; i < hi; i++ {
				sum.Add(int64(i))
			}
			return nil
		})
		o.sum = sum.Load()
		o.failErr = w.Pool().ParallelFor(context.Background(), 1000, 10, func(_ *Worker, lo, _ int) error {
			if lo == 500 {
				return errBody
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled atomic.Bool
		var after atomic.Int64
		o.cErr = w.Pool().ParallelFor(ctx, 1000, 10, func(_ *Worker, lo, _ int) error {
			if cancelled.Load() {
				after.Add(1)
			}
			if lo == 300 {
				cancel()
				cancelled.Store(true)
			}
			return nil
		})
		cancel()
		o.afterCancel = after.Load()
		res <- o
	}); err != nil {
		t.Fatal(err)
	}
	o := recv(t, res, "Worker.ParallelForErr/Ctx inside a task on a 1-worker pool hung")
	if o.okErr != nil || o.sum != 999*1000/2 {
		t.Errorf("Worker.ParallelForErr: %v, sum %d", o.okErr, o.sum)
	}
	if !errors.Is(o.failErr, errBody) {
		t.Errorf("failing Worker.ParallelForErr = %v", o.failErr)
	}
	if !errors.Is(o.cErr, context.Canceled) || o.afterCancel != 0 {
		t.Errorf("Worker.ParallelForCtx cancelled = %v, %d bodies after (one worker: want 0)", o.cErr, o.afterCancel)
	}
}

// ---------------------------------------------------------------------
// 4. Group order and cancellation.

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

// ---------------------------------------------------------------------
// 5. MapReduce and PerWorker.

// wideFloats returns n values of magnitudes from 1e-12 to 1e12, of both
// signs: a sum of them depends on the order of the additions.
func wideFloats(n int) []float64 {
	rng := rand.New(rand.NewPCG(7, 11))
	v := make([]float64, n)
	for i := range v {
		x := rng.Float64() * math.Pow(10, float64(rng.IntN(25)-12))
		if rng.IntN(2) == 0 {
			x = -x
		}
		v[i] = x
	}
	return v
}

func TestMapReduceFloatSumIsDeterministic(t *testing.T) {
	n, runs := 1_000_000, 20
	if testing.Short() {
		n = 200_000
	}
	const grain = 4096
	v := wideFloats(n)
	sumRange := func(lo, hi int) float64 {
		s := 0.0
		for _, x := range v[lo:hi] {
			s += x
		}
		return s
	}
	// The reference: a sequential left fold over the same chunks.
	want := sumRange(0, min(grain, n))
	for lo := grain; lo < n; lo += grain {
		want += sumRange(lo, min(lo+grain, n))
	}
	if plain := sumRange(0, n); plain == want {
		t.Logf("the chunked and the plain sum agree (%v): the data does not show order effects", want)
	} else {
		t.Logf("chunked %v, plain %v: the order of additions matters for this data", want, plain)
	}

	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	mapper := func(_ *Worker, lo, hi int) (float64, error) { return sumRange(lo, hi), nil }
	add := func(a, b float64) float64 { return a + b }
	var auto float64
	within(t, hangBound, "MapReduce runs", func() {
		for run := range runs {
			got, err := MapReduce(context.Background(), p, n, grain, mapper, add)
			if err != nil || math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("run %d: %v (%x), %v; want %v (%x), the left fold over the chunks",
					run, got, math.Float64bits(got), err, want, math.Float64bits(want))
				return
			}
			// grain 0 picks chunks from n and the pool: also the same every run.
			a, err := MapReduce(context.Background(), p, n, 0, mapper, add)
			if err != nil || (run > 0 && math.Float64bits(a) != math.Float64bits(auto)) {
				t.Errorf("run %d, grain 0: %v, %v; earlier runs gave %v", run, a, err, auto)
				return
			}
			auto = a
		}
	})
}

// MapReduce's workers take each node's chunks in order, so a failure
// early in the range stops the job early: no chunk far past the bad one
// is mapped. (Split in halves, the second worker started at the middle,
// chunk 5000, and mapped about a hundred chunks there before the first
// reached chunk 100. In order, getting that far takes the failing
// worker being held off its CPU for 100ms.)
func TestMapReduceStopsEarlyInOrder(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	var beyond atomic.Int64
	_, err := MapReduce(context.Background(), p, 10_000, 1, func(_ *Worker, lo, _ int) (int, error) {
		if lo == 100 {
			return 0, errBody
		}
		if lo >= 5000 {
			beyond.Add(1)
		}
		spinFor(20 * time.Microsecond)
		return 1, nil
	}, func(a, b int) int { return a + b })
	if !errors.Is(err, errBody) {
		t.Fatalf("MapReduce = %v, want the map's error", err)
	}
	t.Logf("%d chunks at 5000 or beyond were mapped", beyond.Load())
	if n := beyond.Load(); n > 0 {
		t.Errorf("%d chunks at 5000 or beyond were mapped although chunk 100 failed", n)
	}
}

func TestMapReduceErrorsAndEdges(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	ctx := context.Background()
	add := func(a, b int) int { return a + b }

	var calls atomic.Int64
	count := func(_ *Worker, lo, hi int) (int, error) { calls.Add(1); return hi - lo, nil }
	for _, n := range []int{0, -5} {
		if got, err := MapReduce(ctx, p, n, 10, count, add); got != 0 || err != nil || calls.Load() != 0 {
			t.Errorf("MapReduce n=%d = %d, %v, %d calls; want 0, nil, 0", n, got, err, calls.Load())
		}
	}
	within(t, hangBound, "MapReduce", func() {
		// n not a multiple of grain: the last chunk is short.
		if got, err := MapReduce(ctx, p, 1003, 10, count, add); got != 1003 || err != nil || calls.Load() != 101 {
			t.Errorf("MapReduce(1003, 10) = %d, %v, %d chunks; want 1003, nil, 101", got, err, calls.Load())
		}

		var started, after atomic.Int64
		var failed atomic.Bool
		_, err := MapReduce(ctx, p, 100_000, 10, func(_ *Worker, lo, hi int) (int, error) {
			if failed.Load() {
				after.Add(1)
			}
			spinFor(5 * time.Microsecond)
			if started.Add(1) == 20 {
				failed.Store(true)
				return 0, errBody
			}
			return hi - lo, nil
		}, add)
		t.Logf("failing MapReduce: %d maps, %d after the error (of 10000)", started.Load(), after.Load())
		if !errors.Is(err, errBody) {
			t.Errorf("failing MapReduce = %v", err)
		}
		if limit := loopStopSlack(p); after.Load() > limit {
			t.Errorf("%d maps started after the error, want at most %d", after.Load(), limit)
		}

		_, err = MapReduce(ctx, p, 1000, 10, func(_ *Worker, lo, _ int) (int, error) {
			if lo == 500 {
				boundaryPanicker("map")
			}
			return 1, nil
		}, add)
		var pe *PanicError
		if !errors.As(err, &pe) || pe.Value != "map" {
			t.Errorf("panicking MapReduce = %v", err)
		}

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := MapReduce(cctx, p, 1000, 10, count, add); !errors.Is(err, context.Canceled) {
			t.Errorf("MapReduce(cancelled) = %v", err)
		}
	})

	// From inside a task on a 1-worker pool (pass w.Pool()): it helps.
	p1 := newTestPool(t, WithWorkers(1))
	defer p1.Close()
	res := make(chan int, 1)
	if err := p1.Submit(context.Background(), func(w *Worker) {
		got, _ := MapReduce(ctx, w.Pool(), 1000, 7, count, add)
		res <- got
	}); err != nil {
		t.Fatal(err)
	}
	got := recv(t, res, "MapReduce inside a task on a 1-worker pool hung")
	if got != 1000 {
		t.Errorf("MapReduce inside a task = %d", got)
	}
}

func TestPerWorkerPaddedAndOrdered(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	var inits atomic.Int32
	s := NewPerWorker(p, func() int64 { inits.Add(1); return 0 })
	if int(inits.Load()) != p.Workers() {
		t.Errorf("init called %d times for %d workers", inits.Load(), p.Workers())
	}
	// Every value on lines of its own: consecutive values at least a line
	// apart.
	var ids []int
	var addrs []uintptr
	for id, v := range s.All() {
		ids = append(ids, id)
		addrs = append(addrs, uintptr(unsafe.Pointer(v)))
		if got := s.Get(p.workers[id]); got != v {
			t.Errorf("All yields %p for worker %d, Get gives %p", v, id, got)
		}
	}
	wantIDs := make([]int, p.Workers())
	for i := range wantIDs {
		wantIDs[i] = i
	}
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("All yields IDs %v, want %v", ids, wantIDs)
	}
	for i := 1; i < len(addrs); i++ {
		if d := addrs[i] - addrs[i-1]; d < 64 {
			t.Errorf("workers %d and %d: values %d bytes apart, want at least 64", i-1, i, d)
		} else if i == 1 {
			t.Logf("values %d bytes apart", d)
		}
	}
	n := 0
	for range s.All() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("All went on after yield returned false")
	}

	// Tasks add to their own worker's value without synchronisation: the
	// race detector sees no race, and the total is exact.
	const tasks, loop = 2000, 100_000
	var wg sync.WaitGroup
	wg.Add(tasks)
	for range tasks {
		if err := p.Submit(context.Background(), func(w *Worker) { *s.Get(w)++; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	within(t, hangBound, "tasks", wg.Wait)
	within(t, hangBound, "ParallelFor", func() {
		if err := p.ParallelFor(context.Background(), loop, 100, func(w *Worker, lo, hi int) error { *s.Get(w) += int64(hi - lo); return nil }); err != nil {
			t.Errorf("ParallelFor = %v", err)
		}
	})
	total := int64(0)
	for _, v := range s.All() {
		total += *v
	}
	if total != tasks+loop {
		t.Errorf("per-worker total %d, want %d", total, tasks+loop)
	}
}

// Every value has a line of the PerWorker's own memory on each side, as
// padded's comment says ("a cache line of padding on each side"): the
// last worker's value too, which otherwise may share a line with
// whatever object the allocator puts after the cells.
func TestPerWorkerLastValuePaddedAfter(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	s := NewPerWorker[int64](p, nil)
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s.cells)))
	hi := lo + uintptr(len(s.cells))*unsafe.Sizeof(s.cells[0])
	for id, v := range s.All() {
		at := uintptr(unsafe.Pointer(v))
		if before, after := at-lo, hi-(at+unsafe.Sizeof(*v)); before < 64 || after < 64 {
			t.Errorf("worker %d's value has %d bytes of the PerWorker's memory before it and %d after; want at least 64 on each side",
				id, before, after)
		}
	}
}

// ---------------------------------------------------------------------
// 6. Node handles.

func TestNodeSubmitForms(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	nodes := p.Nodes()
	var wrong, ran atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for i := range 400 {
		id := nodes[i%2]
		n := p.Node(id)
		if n.ID() != id || n.err != nil {
			t.Fatalf("Node(%d): ID %d, err %v", id, n.ID(), n.err)
		}
		strict := i%4 >= 2
		if strict {
			n = n.Strict()
		}
		fn := func(w *Worker) {
			defer wg.Done()
			ran.Add(1)
			if strict && w.Node() != id {
				wrong.Add(1)
			}
		}
		wg.Add(1)
		var err error
		switch i % 5 {
		case 0:
			err = n.Submit(context.Background(), fn)
		case 1:
			err = n.TrySubmit(fn)
		case 2:
			err = n.Submit(ctx, fn)
		case 3:
			if strict {
				err = p.Node(id).Strict().Submit(context.Background(), fn)
			} else {
				err = p.Node(id).Submit(context.Background(), fn)
			}
		default:
			err = n.Submit(context.Background(), fn)
		}
		if err != nil {
			wg.Done()
			t.Errorf("submission %d: %v", i, err)
		}
	}
	within(t, hangBound, "node submissions", wg.Wait)
	if ran.Load() != 400 || wrong.Load() != 0 {
		t.Errorf("%d of 400 ran; %d strict tasks ran off their node", ran.Load(), wrong.Load())
	}
}

func TestNodeUnknown(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	fn := func(*Worker) { t.Error("a task for an unknown node ran") }
	ctx := context.Background()
	for _, n := range []Node{p.Node(42), p.Node(42).Strict()} {
		if n.ID() != -1 {
			t.Errorf("Node(42): ID %d, want -1", n.ID())
		}
		for name, err := range map[string]error{
			"Submit":    n.Submit(context.Background(), fn),
			"TrySubmit": n.TrySubmit(fn),
			"SubmitCtx": n.Submit(ctx, fn),
		} {
			if !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
				t.Errorf("Node(42).%s = %v, want ErrUnknownNode naming node 42", name, err)
			}
		}
	}
	for name, err := range map[string]error{
		"SubmitTo":       p.Node(42).Submit(context.Background(), fn),
		"SubmitToStrict": p.Node(42).Strict().Submit(context.Background(), fn),
	} {
		if !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
			t.Errorf("%s(42) = %v, want ErrUnknownNode naming node 42", name, err)
		}
	}
}

// A node's bound is its own: with node 0's worker held and its queue
// full, TrySubmit returns ErrFull, SubmitCtx returns ctx's error, soft or
// strict; node 1 still takes work.
func TestNodeFull(t *testing.T) {
	const bound = 4
	p := newTestPool(t, WithSpec("2x1"), WithShardBound(bound))
	nodes := p.Nodes()
	n0 := p.Node(nodes[0])
	hold := make(chan struct{})
	started := make(chan struct{})
	if err := n0.Strict().Submit(context.Background(), func(*Worker) { close(started); <-hold }); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, hangBound, "the holding task")
	var ran atomic.Int64
	for i := range bound {
		if err := n0.Strict().TrySubmit(func(*Worker) { ran.Add(1) }); err != nil {
			t.Fatalf("filling node %d: TrySubmit %d = %v", nodes[0], i, err)
		}
	}
	for name, n := range map[string]Node{"soft": n0, "strict": n0.Strict()} {
		if err := n.TrySubmit(func(*Worker) {}); !errors.Is(err, ErrFull) {
			t.Errorf("%s TrySubmit on a full node = %v, want ErrFull", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		within(t, hangBound, "SubmitCtx on a full node", func() {
			if err := n.Submit(ctx, func(*Worker) {}); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s SubmitCtx on a full node = %v, want context.DeadlineExceeded", name, err)
			}
		})
		cancel()
		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		if err := n.Submit(cctx, func(*Worker) {}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s SubmitCtx(cancelled) on a full node = %v, want context.Canceled", name, err)
		}
	}
	// The other node is not full.
	done := make(chan struct{})
	if err := p.Node(nodes[1]).Strict().TrySubmit(func(*Worker) { close(done) }); err != nil {
		t.Errorf("TrySubmit on node %d while node %d is full = %v", nodes[1], nodes[0], err)
	} else {
		waitClosed(t, done, hangBound, "the other node's task")
	}
	close(hold)
	within(t, hangBound, "Submit waiting for room", func() {
		if err := n0.Submit(context.Background(), func(*Worker) { ran.Add(1) }); err != nil {
			t.Errorf("Submit after room = %v", err)
		}
	})
	within(t, hangBound, "Close", func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	if ran.Load() != bound+1 {
		t.Errorf("%d of %d queued tasks ran", ran.Load(), bound+1)
	}
}

// ---------------------------------------------------------------------
// 7. PanicError formatting.

func TestPanicErrorFormat(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	var err error
	within(t, hangBound, "Join with a panic", func() {
		_, err = Run(p, func(w *Worker) (struct{}, error) {
			return struct{}{}, w.Join(func(*Worker) { boundaryPanicker("format-me") }, func(*Worker) {})
		})
	})
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Join = %v, want a *PanicError", err)
	}
	msg := pe.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "format-me") {
		t.Errorf("Error() = %q, want one line with the panic value", msg)
	}
	if s := fmt.Sprintf("%v", pe); s != msg {
		t.Errorf("%%v = %q, want Error() %q", s, msg)
	}
	if s := fmt.Sprintf("%s", pe); s != msg {
		t.Errorf("%%s = %q, want Error() %q", s, msg)
	}
	full := fmt.Sprintf("%+v", pe)
	if !strings.HasPrefix(full, msg+"\n") || !strings.Contains(full, "boundaryPanicker") {
		t.Errorf("%%+v does not show the message and then the stack with the panicking function:\n%s", full)
	}
	// Inside a wrapping error %+v of the outer error is one line: fmt does
	// not pass the flag through %w. Log it for the reader.
	t.Logf("wrapped: %+v", fmt.Errorf("outer: %w", pe))
}

// ---------------------------------------------------------------------
// 8. Stats as JSON.

var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// jsonKeys calls bad for every object key under v that is not snake_case.
func jsonKeys(v any, path string, bad func(path string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !snakeKey.MatchString(k) {
				bad(path + "." + k)
			}
			jsonKeys(e, path+"."+k, bad)
		}
	case []any:
		for i, e := range x {
			jsonKeys(e, fmt.Sprintf("%s[%d]", path, i), bad)
		}
	}
}

func TestStatsJSON(t *testing.T) {
	const tasks, panics = 100, 3
	var handled atomic.Int32
	p := newTestPool(t, WithSpec("2x1"), WithPanicHandler(func(any, []byte) { handled.Add(1) }))
	var wg sync.WaitGroup
	wg.Add(tasks)
	for i := range tasks {
		if err := p.Submit(context.Background(), func(*Worker) {
			defer wg.Done()
			if i%40 == 0 { // 0, 40, 80
				panic("stats")
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	within(t, hangBound, "the workload", wg.Wait)

	raw, err := json.Marshal(p.Stats())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var bad []string
	jsonKeys(doc, "", func(k string) { bad = append(bad, k) })
	if len(bad) > 0 {
		slices.Sort(bad)
		bad = slices.Compact(bad)
		t.Errorf("keys not in snake_case: %v", bad)
	}
	has := func(obj any, where string, keys ...string) {
		m, _ := obj.(map[string]any)
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s has no %q: %s", where, k, raw)
			}
		}
	}
	has(doc, "the stats", "submitted", "queued", "busy_workers", "total", "nodes", "workers")
	has(doc["total"], "total", "completed", "panicked", "tasks_run")
	nodes, _ := doc["nodes"].([]any)
	if len(nodes) != 2 {
		t.Fatalf("nodes: %s", raw)
	}
	for i, n := range nodes {
		has(n, fmt.Sprintf("nodes[%d]", i), "node", "submitted", "queued", "busy_workers", "completed", "panicked")
	}

	// Running and Queued are read at the call. Idle, the workers park.
	if !eventually(hangBound, func() bool { st := p.Stats(); return st.BusyWorkers == 0 && st.Queued == 0 }) {
		st := p.Stats()
		t.Errorf("idle pool: running %d, queued %d; want 0, 0", st.BusyWorkers, st.Queued)
	}
	// Hold both workers, and queue strict work behind node 0's.
	hold := make(chan struct{})
	var held sync.WaitGroup
	held.Add(2)
	for _, id := range p.Nodes() {
		if err := p.Node(id).Strict().Submit(context.Background(), func(*Worker) { held.Done(); <-hold }); err != nil {
			t.Fatal(err)
		}
	}
	within(t, hangBound, "holding both workers", held.Wait)
	for range 5 {
		if err := p.Node(p.Nodes()[0]).Strict().Submit(context.Background(), func(*Worker) {}); err != nil {
			t.Fatal(err)
		}
	}
	st := p.Stats()
	if st.BusyWorkers != 2 || st.Queued != 5 || st.Nodes[0].Queued != 5 || st.Nodes[1].Queued != 0 {
		t.Errorf("with both workers held and 5 tasks queued on node %d: running %d, queued %d (per node %d, %d); want 2, 5 (5, 0)",
			p.Nodes()[0], st.BusyWorkers, st.Queued, st.Nodes[0].Queued, st.Nodes[1].Queued)
	}
	close(hold)

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st = p.Stats()
	const all = tasks + 2 + 5
	if st.Submitted < all {
		t.Errorf("submitted %d, want at least %d", st.Submitted, all)
	}
	if st.Total.TasksRun != all || st.Total.Completed != st.Total.TasksRun {
		t.Errorf("after Close: tasks_run %d, completed %d; want %d, %d", st.Total.TasksRun, st.Total.Completed, all, all)
	}
	if st.Total.Panicked != panics || handled.Load() != panics {
		t.Errorf("after Close: panicked %d, handler called %d times; want %d", st.Total.Panicked, handled.Load(), panics)
	}
	var sub, done, pan uint64
	for _, n := range st.Nodes {
		sub += n.Submitted
		done += n.Completed
		pan += n.Panicked
	}
	if sub != st.Submitted || done != st.Total.Completed || pan != st.Total.Panicked {
		t.Errorf("per node sums %d, %d, %d differ from the totals %d, %d, %d",
			sub, done, pan, st.Submitted, st.Total.Completed, st.Total.Panicked)
	}
	if st.Queued != 0 {
		t.Errorf("after Close: queued %d, want 0", st.Queued)
	}
}

// After Close no worker runs a task, so Running is 0, as it is in an idle
// pool whose workers have parked. (Running is the workers neither parked
// nor searching; a worker that ends leaves the parked set, so an ended
// worker reads as running.)
func TestStatsRunningIsZeroAfterClose(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	for range 10 {
		if err := p.Submit(context.Background(), func(*Worker) {}); err != nil {
			t.Fatal(err)
		}
	}
	if !eventually(hangBound, func() bool { return p.Stats().BusyWorkers == 0 }) {
		t.Errorf("idle pool: running %d, want 0", p.Stats().BusyWorkers)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.BusyWorkers != 0 || st.Nodes[0].BusyWorkers != 0 || st.Nodes[1].BusyWorkers != 0 {
		t.Errorf("after Close: running %d (per node %d, %d), want 0: no worker is running a task",
			st.BusyWorkers, st.Nodes[0].BusyWorkers, st.Nodes[1].BusyWorkers)
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

// recv returns the next value from ch, or fails the test when none comes
// within hangBound: what says what hung.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangBound):
		t.Fatal(what)
	}
	panic("unreachable")
}
