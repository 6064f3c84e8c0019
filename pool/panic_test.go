package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/numapool/numapool/pool/internal/place"
)

// Every waiter of a task that ends by runtime.Goexit returns ErrGoexit:
// waited for from outside the pool, and from a task on the same worker,
// whose own waiter gets ErrGoexit too (Goexit unwinds the whole stack).
func TestGoexitCompletesWaiters(t *testing.T) {
	ctx := context.Background()
	// Each form runs fn (which calls Goexit) as a task and returns what its
	// waiter got.
	forms := map[string]func(p *Pool, fn func()) error{
		"Run": func(p *Pool, fn func()) error {
			_, err := Run(p, func(*Worker) (int, error) { fn(); return 1, nil })
			return err
		},
		"Future.Wait": func(p *Pool, fn func()) error {
			_, err := Async(p, func(*Worker) (int, error) { fn(); return 1, nil }).Wait()
			return err
		},
		"Join/a": func(p *Pool, fn func()) error {
			_, err := Run(p, func(w *Worker) (struct{}, error) {
				return struct{}{}, w.Join(func(*Worker) { fn() }, func(*Worker) {})
			})
			return err
		},
		"Join/b": func(p *Pool, fn func()) error {
			_, err := Run(p, func(w *Worker) (struct{}, error) {
				return struct{}{}, w.Join(func(*Worker) {}, func(*Worker) { fn() })
			})
			return err
		},
		"Fork/b": func(p *Pool, fn func()) error {
			_, err := Run(p, func(w *Worker) (int, error) {
				_, _, err := Fork(w, func(*Worker, int) int { return 1 }, 0, func(*Worker, int) int { fn(); return 2 }, 0)
				return 0, err
			})
			return err
		},
		"Group.Wait": func(p *Pool, fn func()) error {
			g := p.Group(ctx)
			g.Go(func(*Worker) error { fn(); return nil })
			return g.Wait()
		},
		"ParallelFor": func(p *Pool, fn func()) error {
			return p.ParallelFor(ctx, 100, 10, func(_ *Worker, lo, _ int) error {
				if lo == 50 {
					fn()
				}
				return nil
			})
		},
		"MapReduce": func(p *Pool, fn func()) error {
			_, err := MapReduce(ctx, p, 100, 10, func(_ *Worker, lo, hi int) (int, error) {
				if lo == 50 {
					fn()
				}
				return hi - lo, nil
			}, func(a, b int) int { return a + b })
			return err
		},
	}
	// The forms whose caller may join a worker's seat and run the function.
	joins := map[string]bool{"Run": true, "Join/a": true, "Join/b": true, "Fork/b": true, "ParallelFor": true, "MapReduce": true}
	for _, spec := range []string{"1x1", "2x1"} {
		for name, form := range forms {
			t.Run(spec+"/"+name, func(t *testing.T) {
				p := newTestPool(t, WithSpec(spec))
				defer p.Close()
				// From outside: the waiter gets ErrGoexit, unless the caller
				// joined and ran the function itself, whose Goexit then ends
				// the caller's goroutine (join.go); the pool goes on.
				var err error
				var exited bool
				within(t, hangBound, name+" of a task that calls Goexit", func() {
					err, exited = callOutside(func() error { return form(p, runtime.Goexit) })
				})
				switch {
				case exited && !joins[name]:
					t.Errorf("from outside: the caller's goroutine ended, but %s never runs work on its caller", name)
				case exited && p.Stats().Total.CallerRuns == 0:
					t.Errorf("from outside: the caller's goroutine ended, and no caller ran a task")
				case !exited && !errors.Is(err, ErrGoexit):
					t.Errorf("from outside: %v, want ErrGoexit", err)
				}
				if _, err := Run(p, func(*Worker) (int, error) { return 1, nil }); err != nil {
					t.Fatalf("a Run after: %v", err)
				}
				// From a task, which waits on its worker's stack: both it and
				// its waiter end. A strict node's task runs on a worker.
				var outer, reached error
				within(t, hangBound, name+" inside a task", func() {
					_, outer = Run(p.Node(p.Nodes()[0]).Strict(), func(*Worker) (int, error) {
						reached = form(p, runtime.Goexit)
						return 1, nil
					})
				})
				// With one worker the task that calls Goexit runs on the
				// waiting task's stack; with more it may run elsewhere, and
				// then only the inner waiter is told.
				if !errors.Is(outer, ErrGoexit) && (spec == "1x1" || !errors.Is(reached, ErrGoexit)) {
					t.Errorf("the waiting task's waiter got %v (inner returned %v), want ErrGoexit", outer, reached)
				}
				// The pool goes on: same workers, a task runs, Close returns.
				if v, err := Run(p, func(*Worker) (int, error) { return 7, nil }); v != 7 || err != nil {
					t.Errorf("after Goexit: Run = %d, %v", v, err)
				}
				within(t, hangBound, "Close after Goexit", func() { err = p.Close() })
				if err != nil {
					t.Errorf("Close after Goexit: %v", err)
				}
				if g := p.Stats().Total.Goexits; g == 0 {
					t.Errorf("Stats counts %d Goexits", g)
				}
			})
		}
	}
}

// A plain task that calls Goexit costs nothing but itself: Close returns
// nil, from an ordinary goroutine, and the later tasks all run.
func TestGoexitInPlainTask(t *testing.T) {
	for round := range 5 {
		p := newTestPool(t, WithWorkers(2))
		var ran atomic.Int64
		if err := p.Submit(context.Background(), func(*Worker) { runtime.Goexit() }); err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			if err := p.Submit(context.Background(), func(*Worker) { ran.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		within(t, hangBound, "Close", func() { err = p.Close() })
		if err != nil || ran.Load() != 1000 {
			t.Fatalf("round %d: Close = %v with %d of 1000 tasks run", round, err, ran.Load())
		}
		if g := p.Stats().Total.Goexits; g != 1 {
			t.Fatalf("round %d: %d Goexits counted, want 1", round, g)
		}
	}
}

// The b side a Join offered before its a called Goexit was accepted: it
// still runs, once, on the worker's new goroutine or a thief.
func TestGoexitHandsOnTheJoinSlot(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	var bRan atomic.Int64
	var err error
	var exited bool
	within(t, hangBound, "Run of a Join whose a calls Goexit", func() {
		err, exited = callOutside(func() error {
			_, err := Run(p, func(w *Worker) (int, error) {
				return 0, w.Join(func(*Worker) { runtime.Goexit() }, func(*Worker) { bRan.Add(1) })
			})
			return err
		})
	})
	// A caller that joined ran a itself, and its goroutine ended (join.go).
	if !exited && !errors.Is(err, ErrGoexit) {
		t.Errorf("Run = %v, want ErrGoexit", err)
	}
	within(t, hangBound, "Close", func() { err = p.Close() })
	if err != nil || bRan.Load() != 1 {
		t.Errorf("Close = %v, b ran %d times, want once", err, bRan.Load())
	}
}

// After a worker's goroutine ended by Goexit, no other goroutine is taken
// for that worker: every function given to Run from outside runs on a
// worker's own goroutine (and so its thread), whichever g the runtime
// hands the ended goroutine's to. Linux only: elsewhere a thread has no ID
// here.
func TestGoexitLeavesNoImpostor(t *testing.T) {
	if place.ThreadID() == 0 {
		t.Skip("no thread IDs on " + runtime.GOOS)
	}
	p := newTestPool(t, WithSpec("2x1"))
	calls := 20_000
	if testing.Short() {
		calls = 4000
	}
	for round := range 3 {
		exited := make(chan struct{})
		if err := p.Submit(context.Background(), func(*Worker) { defer close(exited); runtime.Goexit() }); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, exited, hangBound, "the task that calls Goexit")
		var wrong atomic.Int64
		done := make(chan struct{}, 64)
		within(t, 4*hangBound, "the outside calls", func() {
			outsideCalls(p, calls, done, &wrong)
		})
		if n := wrong.Load(); n != 0 {
			t.Fatalf("round %d: %d of %d functions ran with a Worker on a goroutine that is not that worker's", round, n, calls)
		}
	}
	within(t, hangBound, "Close", func() { _ = p.Close() })
}

// outsideCalls makes calls calls of Run from new goroutines, at most 64
// at a time, counting in wrong those whose function ran off its worker's
// goroutine.
func outsideCalls(p *Pool, calls int, done chan struct{}, wrong *atomic.Int64) {
	for i := range calls {
		go func() {
			defer func() { done <- struct{}{} }()
			_, _ = Run(p, func(w *Worker) (int, error) {
				// A worker's thread runs only its goroutine: a function on
				// another thread runs on a goroutine taken for the worker.
				// A caller that joined runs on its own thread (join.go).
				if place.ThreadID() != w.th.TID() && !w.out.on {
					wrong.Add(1)
				}
				return i, nil
			})
		}()
		if i >= 63 {
			<-done
		}
	}
	for range min(calls, 63) {
		<-done
	}
}

// A test that calls t.Fatal inside a task fails at once with its message,
// as it would with errgroup: the child test below, run in a subprocess.
func TestFatalInsideTaskFailsTheTest(t *testing.T) {
	if os.Getenv("NUMAPOOL_TEST_FATAL_CHILD") == "1" {
		p := newTestPool(t, WithWorkers(1))
		defer p.Close()
		_, _ = Run(p, func(*Worker) (int, error) {
			t.Fatal("checked-inside-the-task")
			return 0, nil
		})
		return
	}
	var out []byte
	var err error
	within(t, hangBound, "the child test", func() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFatalInsideTaskFailsTheTest$", "-test.timeout=60s")
		cmd.Env = append(os.Environ(), "NUMAPOOL_TEST_FATAL_CHILD=1")
		out, err = cmd.CombinedOutput()
	})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "checked-inside-the-task") ||
		!strings.Contains(string(out), "--- FAIL") || strings.Contains(string(out), "test timed out") {
		t.Errorf("child: %v\n%s", err, out)
	}
}

// Panics that escape the rules end the process the runtime's way, in a
// subprocess (panicChildren): with the handler's own panic when it
// panics, with the task's stack in debug.SetCrashOutput's file, by
// SIGABRT under GOTRACEBACK=crash; and panic(nil) under panicnil=1 is a
// panic like any other.
func TestPanicsEndTheProcess(t *testing.T) {
	run := func(t *testing.T, child string, env ...string) (string, error) {
		var out []byte
		var err error
		within(t, hangBound, "child "+child, func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(append(os.Environ(), "NUMAPOOL_TEST_PANIC_CHILD="+child), env...)
			out, err = cmd.CombinedOutput()
		})
		return string(out), err
	}
	exitCode := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	}
	t.Run("handler re-panics inside a wait", func(t *testing.T) {
		out, err := run(t, "handler")
		if exitCode(err) != 2 || !strings.Contains(out, "handler re-panics") || strings.Contains(out, "waiter returned") {
			t.Errorf("child: %v\n%s", err, out)
		}
	})
	t.Run("crash output has the task's stack", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "crash")
		out, err := run(t, "crashfile", "NUMAPOOL_TEST_CRASH_FILE="+file)
		crash, _ := os.ReadFile(file)
		if exitCode(err) != 2 || !strings.Contains(string(crash), "unhandled-boom") ||
			!strings.Contains(string(crash), "panickingTask") {
			t.Errorf("child: %v\n%s\ncrash file:\n%s", err, out, crash)
		}
	})
	t.Run("GOTRACEBACK=crash aborts", func(t *testing.T) {
		out, err := run(t, "1", "GOTRACEBACK=crash")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(ee.String(), "abort") || !strings.Contains(out, "unhandled-boom") {
			t.Errorf("child: %v\n%.2000s", err, out)
		}
	})
	t.Run("panic(nil) under panicnil=1", func(t *testing.T) {
		out, err := run(t, "panicnil", "GODEBUG=panicnil=1")
		if err != nil || !strings.Contains(out, "run: pool: task panicked: <nil>") ||
			!strings.Contains(out, "handler: <nil>") || !strings.Contains(out, "panicked: 2") {
			t.Errorf("child: %v\n%s", err, out)
		}
	})
}

// panickingTask panics with no handler to take it.
func panickingTask(*Worker) { panic("unhandled-boom") }

// panicChildren are the subprocesses of TestPanicsEndTheProcess and
// TestPanicWithoutHandlerCrashes, chosen by NUMAPOOL_TEST_PANIC_CHILD.
func panicChildren(which string) {
	switch which {
	case "crashfile":
		f, err := os.Create(os.Getenv("NUMAPOOL_TEST_CRASH_FILE"))
		if err != nil {
			os.Exit(3)
		}
		if err := debug.SetCrashOutput(f, debug.CrashOptions{}); err != nil {
			os.Exit(3)
		}
		fallthrough
	case "1":
		p, err := New(WithWorkers(1), WithoutEnv())
		if err != nil {
			os.Exit(3)
		}
		_ = p.Submit(context.Background(), panickingTask)
		select {} // the panic ends the process
	case "handler":
		p, err := New(WithWorkers(1), WithoutEnv(), WithPanicHandler(func(any, []byte) { panic("handler re-panics") }))
		if err != nil {
			os.Exit(3)
		}
		_, err = Run(p, func(w *Worker) (int, error) {
			w.Spawn(func(*Worker) { panic("boom") })
			// Wait on this worker: it runs the spawned task (in the LIFO
			// slot) first.
			g := w.Pool().Group(context.Background())
			g.Go(func(*Worker) error { return nil })
			return 0, g.Wait()
		})
		fmt.Println("waiter returned:", err)
		os.Exit(0)
	case "panicnil":
		var handled atomic.Value
		done := make(chan struct{})
		p, err := New(WithWorkers(1), WithoutEnv(), WithPanicHandler(func(v any, _ []byte) {
			handled.Store(fmt.Sprint(v))
			close(done)
		}))
		if err != nil {
			os.Exit(3)
		}
		_, err = Run(p, func(*Worker) (int, error) { panic(nil) })
		fmt.Println("run:", err)
		_ = p.Submit(context.Background(), func(*Worker) { panic(nil) })
		<-done
		_ = p.Close()
		fmt.Println("handler:", handled.Load())
		fmt.Println("panicked:", p.Stats().Total.Panicked)
		os.Exit(0)
	}
	os.Exit(4)
}

func TestPanicErrorFormat(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	var err error
	within(t, hangBound, "Join with a panic", func() {
		_, err = Run(p, func(w *Worker) (struct{}, error) {
			return struct{}{}, w.Join(func(*Worker) { panicsWith("format-me") }, func(*Worker) {})
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
	if !strings.HasPrefix(full, msg+"\n") || !strings.Contains(full, "panicsWith") {
		t.Errorf("%%+v does not show the message and then the stack with the panicking function:\n%s", full)
	}
	// Inside a wrapping error %+v of the outer error is one line: fmt does
	// not pass the flag through %w. Log it for the reader.
	t.Logf("wrapped: %+v", fmt.Errorf("outer: %w", pe))
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
	if !strings.HasPrefix(s, "boom|") || !strings.Contains(s, "panic_test.go") {
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

// callOutside runs call on a goroutine of its own and returns what it
// returned, or exited if it ended by runtime.Goexit instead: a caller
// that joined a worker's seat ends so when the function it runs calls
// Goexit (join.go).
func callOutside(call func() error) (err error, exited bool) {
	done := make(chan struct{})
	exited = true
	go func() {
		defer close(done)
		err = call()
		exited = false
	}()
	<-done
	return err, exited
}
