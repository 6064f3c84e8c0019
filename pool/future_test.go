package pool

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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

func TestFuturePanicIsPanicError(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	var err error
	within(t, hangBound, "a panicking future", func() {
		_, err = Async(p, func(*Worker) (int, error) { return panicsWith("kaboom"), nil }).Wait()
	})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" {
		t.Fatalf("Wait = %v (%T), want *PanicError with value kaboom", err, err)
	}
	if !strings.Contains(string(pe.Stack), "panicsWith") {
		t.Errorf("stack does not show the panicking function:\n%s", pe.Stack)
	}
	// A panic with an error value unwraps to it.
	within(t, hangBound, "a panicking Run", func() {
		_, err = Run(p, func(*Worker) (int, error) { return panicsWith(errBody), nil })
	})
	if !errors.As(err, &pe) || !errors.Is(err, errBody) {
		t.Errorf("Run = %v, want a *PanicError wrapping errBody", err)
	}
	// Run on the calling worker returns the panic too.
	err = onWorker(t, p, func(w *Worker) error {
		_, err := Run(w, func(*Worker) (int, error) { return panicsWith("here"), nil })
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
