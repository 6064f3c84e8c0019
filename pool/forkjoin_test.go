package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pool/internal/goruntime"
	"golang.org/x/sync/errgroup"
)

func fibSeq(n int) int {
	if n < 2 {
		return n
	}
	return fibSeq(n-1) + fibSeq(n-2)
}

func fibJoin(w *Worker, n, cutoff int) int {
	if n <= cutoff {
		return fibSeq(n)
	}
	var a, b int
	if err := w.Join(func(w *Worker) { a = fibJoin(w, n-1, cutoff) }, func(w *Worker) { b = fibJoin(w, n-2, cutoff) }); err != nil {
		panic(err)
	}
	return a + b
}

// run runs fn on a worker of p and returns its result.
func onWorker[T any](t *testing.T, p *Pool, fn func(w *Worker) T) T {
	t.Helper()
	ch := make(chan T, 1)
	if err := p.Submit(context.Background(), func(w *Worker) { ch <- fn(w) }); err != nil {
		t.Fatal(err)
	}
	return <-ch
}

// Join and Fork compute fib on one node and on a synthetic 2x2 machine,
// where their b halves are stolen within and across nodes.
func TestJoinFib(t *testing.T) {
	reps := 100
	if testing.Short() {
		reps = 10
	}
	want := fibSeq(25)
	fibs := []struct {
		name string
		fib  func(w *Worker) int
	}{
		{"Join", func(w *Worker) int { return fibJoin(w, 25, 5) }},
		{"Fork", func(w *Worker) int { return fibFork(w, fibArg{25, 5}) }},
	}
	for _, spec := range []string{"", "2x2"} {
		var opts []Option
		if spec != "" {
			opts = append(opts, WithSpec(spec))
		}
		p := newTestPool(t, opts...)
		for _, f := range fibs {
			for rep := range reps {
				if got := onWorker(t, p, f.fib); got != want {
					t.Fatalf("spec %q, %s, rep %d: fib(25) = %d, want %d", spec, f.name, rep, got, want)
				}
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats().Total; st.StealsInNode+st.StealsCrossNode == 0 && p.Workers() > 1 {
			t.Logf("spec %q: no steals at all", spec)
		}
	}
}

// Nested Join 10^4 deep completes.
// Join offers b in the worker's join slot, where an idle worker takes it:
// a, which waits for b to have run, returns only because b ran elsewhere.
func TestJoinHalfIsStolen(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	for range 50 {
		var aWorker, bWorker int
		err := onWorker(t, p, func(w *Worker) error {
			bDone := make(chan struct{})
			return w.Join(func(w *Worker) {
				aWorker = w.ID()
				select {
				case <-bDone:
				case <-time.After(10 * time.Second):
					panic("Join's b never ran while a waited: nobody took it from the join slot")
				}
			}, func(w *Worker) {
				bWorker = w.ID()
				close(bDone)
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if aWorker == bWorker {
			t.Fatalf("a and b ran on worker %d", aWorker)
		}
	}
}

func TestJoinDeep(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	var depth func(w *Worker, d int) int
	depth = func(w *Worker, d int) int {
		if d == 0 {
			return 0
		}
		var r int
		if err := w.Join(func(w *Worker) { r = depth(w, d-1) }, func(*Worker) {}); err != nil {
			panic(err)
		}
		return r + 1
	}
	if got := onWorker(t, p, func(w *Worker) int { return depth(w, 10000) }); got != 10000 {
		t.Fatalf("depth %d", got)
	}
}

func TestJoinReturnsPanics(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	err := onWorker(t, p, func(w *Worker) error {
		return w.Join(func(*Worker) { panic("left") }, func(*Worker) { panic(errors.New("right")) })
	})
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "left") || !strings.Contains(err.Error(), "right") {
		t.Fatalf("Join error = %v", err)
	}
	if !strings.Contains(string(pe.Stack), "forkjoin_test.go") {
		t.Errorf("panic stack does not show the task:\n%s", pe.Stack)
	}
}

func TestJoinMisusePanics(t *testing.T) {
	if !goruntime.Cheap && !raceEnabled {
		t.Skip("on this platform the owner check is compiled in with -race only")
	}
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	w := onWorker(t, p, func(w *Worker) *Worker { return w })
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Join") {
			t.Errorf("recover() = %v", r)
		}
	}()
	_ = w.Join(func(*Worker) {}, func(*Worker) {})
}

// Join itself allocates nothing once the worker has a Join record to
// reuse: with function values made once (here, no captures), a Join
// whose b is not stolen costs no allocation (rayon's join allocates
// nothing either). Closures that capture the caller's variables are the
// caller's allocations.
func TestJoinAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newTestPool(t, WithWorkers(1), WithMachineWatch(0)) // nobody to steal b; and see newTestPool
	defer p.Close()
	var n atomic.Int64
	a := func(*Worker) { n.Add(1) }
	b := func(*Worker) { n.Add(1) }
	allocs := onWorker(t, p, func(w *Worker) float64 {
		_ = w.Join(a, b) // warm: the first Join makes the record
		return testing.AllocsPerRun(1000, func() {
			if err := w.Join(a, b); err != nil {
				t.Error(err)
			}
		})
	})
	if allocs != 0 {
		t.Errorf("Join allocated %.1f times per call", allocs)
	}
	if n.Load() != 2*1002 {
		t.Errorf("a and b ran %d times, want %d", n.Load(), 2*1002)
	}
}

// A joiner whose b a thief runs for a long time sleeps through the idle
// protocol until the thief is done: the process uses the thief's CPU and
// next to nothing more, and the joiner's thread next to nothing at all. A
// joiner that polled for b would use CPU all the while it waits.
func TestJoinWaiterCostsNoCPU(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("a thread's CPU time is read with getrusage(RUSAGE_THREAD)")
	}
	const work = time.Second // the thief's busy loop
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	var before, thief, joiner time.Duration
	var from time.Time
	err := onWorker(t, p, func(w *Worker) error {
		started := make(chan struct{})
		var waitFrom time.Duration
		err := w.Join(func(*Worker) {
			<-started // b is running on the other worker: the joiner will wait
			before, from = processCPU(), time.Now()
			waitFrom, _ = threadCPU() // a worker is locked to its thread
		}, func(*Worker) {
			start, _ := threadCPU()
			close(started)
			for begin := time.Now(); time.Since(begin) < work; {
			}
			end, _ := threadCPU()
			thief = end - start
		})
		waitTo, _ := threadCPU()
		joiner = waitTo - waitFrom
		return err
	})
	used, wall := processCPU()-before, time.Since(from)
	if err != nil {
		t.Fatal(err)
	}
	// The thief's thread ran b over all of the wait (and a little before);
	// the rest is the joiner's and the runtime's (sysmon looks at a
	// running goroutine every few microseconds to 10 ms).
	extra := used - thief
	t.Logf("a %v wait for a stolen b: the process used %v of CPU, the thief %v, the joiner %v, the rest %v",
		wall, used, thief, joiner, extra-joiner)
	if joiner > 2*time.Millisecond {
		t.Errorf("a %v wait for a stolen b used %v of the joiner's CPU, want < 2ms: the joiner polls", wall, joiner)
	}
	if extra > 25*time.Millisecond {
		t.Errorf("a %v wait for a stolen b used %v of CPU beyond the thief's %v, want < 25ms", wall, extra, thief)
	}
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
			func(*Worker, int) string { panicsWith("half"); return "" }, 0)
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
		err := join(func(*Worker) {}, func(*Worker) { panicsWith("right") })
		if !errors.As(err, &pe) || pe.Value != "right" {
			t.Errorf("Join with a panic = %v", err)
		}
		err = join(func(*Worker) { panicsWith("left") }, func(*Worker) { panicsWith("right") })
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

// Nested Joins reuse their records while thieves run the b sides: a side
// waits (Group.Wait, a loop) so that its worker runs other tasks, whose
// Joins take records of their own while the outer b runs elsewhere; some
// sides panic. Every a and b runs exactly once, and each Join returns
// exactly the panics of its own two sides: a thief with a stale record,
// or a record reused before its b finished, would run a b twice, skip
// one, or hand a Join another's outcome.
func joinNestedPanics(t *testing.T) {
	for _, spec := range []string{"1w", "", "2x2", "4x1"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, reuseOpts(spec)...)
			defer p.Close()
			const n = 1 << 13
			var runs [n]atomic.Int32
			var next atomic.Int64
			var pr problems
			var join func(w *Worker, depth int)
			side := func(id int, depth int, panics bool) func(*Worker) {
				return func(w *Worker) {
					if got := runs[id].Add(1); got != 1 {
						pr.add("side %d ran %d times", id, got)
					}
					if depth > 0 {
						switch id % 3 {
						case 0:
							join(w, depth-1)
						case 1: // wait inside a: the worker helps with other Joins
							g := w.Pool().Group(context.Background())
							for range 2 {
								g.Go(func(w *Worker) error { join(w, depth-1); return nil })
							}
							if err := g.Wait(); err != nil {
								pr.add("group: %v", err)
							}
						case 2:
							if err := w.Pool().ParallelFor(context.Background(), 2, 1, func(w *Worker, _, _ int) error { join(w, depth-1); return nil }); err != nil {
								pr.add("loop: %v", err)
							}
						}
					} else {
						spinFor(time.Duration(id%4) * time.Microsecond)
					}
					if panics {
						panic(id)
					}
				}
			}
			join = func(w *Worker, depth int) {
				a, b := int(next.Add(2)-2), 0
				b = a + 1
				if b >= n {
					return
				}
				pa, pb := a%7 == 3, b%5 == 2
				err := w.Join(side(a, depth, pa), side(b, depth, pb))
				got := panicValues(err)
				var want []any
				if pa {
					want = append(want, a)
				}
				if pb {
					want = append(want, b)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					pr.add("Join(%d, %d) = %v: panics %v, want %v", a, b, err, got, want)
				}
			}
			rounds := 0
			within(t, hangBound, "Joins", func() {
				for next.Load() < n-64 {
					rounds++
					if err := p.ParallelFor(context.Background(), 4, 1, func(w *Worker, _, _ int) error { join(w, 5); return nil }); err != nil {
						pr.add("outer loop: %v", err)
					}
				}
			})
			pr.report(t)
			used := int(min(next.Load(), n))
			for id := range used &^ 1 {
				if got := runs[id].Load(); got != 1 {
					t.Fatalf("side %d ran %d times (of %d sides in %d rounds)", id, got, used, rounds)
				}
			}
			st := p.Stats()
			t.Logf("%d sides in %d rounds; steals in node %d, cross node %d, panicked %d",
				used, rounds, st.Total.StealsInNode, st.Total.StealsCrossNode, st.Total.Panicked)
		})
	}
}

// A plain task's panic, with no panic handler, must end the process, as
// an unrecovered panic in a goroutine does. The test runs that in a child
// process and expects it to die of the panic.
//
// It once did not: a worker waiting inside a task (runUntil) runs other
// tasks nested on its stack, so a panic raised again from Worker.call
// unwound through runUntil and every frame under it up to the nearest
// catch, which turned it into a *PanicError of an unrelated task; the
// process lived on. Here that frame is Worker.Join waiting for its b,
// which a thief is still running: Join's deferred joinDone put its
// joinTask back on the worker's list while the thief held it, the
// worker's next Join offered the same record, the thief's late
// done.Store(true) landed on it, and that Join returned before its own b
// had run. taskPanicked now reports the panic and exits instead of
// panicking through the caller's frames, and Join gives its record back
// only once b is done.
func joinUnwoundByPlainPanic(t *testing.T) {
	if os.Getenv(nestedPanicEnv) == "1" {
		nestedPlainPanicChild()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestJoinAdversarial$/^UnwoundByPlainPanic$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nestedPanicEnv+"=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("child process hung:\n%s", out)
	}
	if err != nil && strings.Contains(string(out), "panic: "+nestedPanicValue) {
		return // the process died of the plain task's panic, as documented
	}
	var saw []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "child: ") || strings.Contains(line, "DATA RACE") {
			saw = append(saw, line)
		}
	}
	t.Errorf("a plain task that panicked with no handler, run by a worker helping inside a Join, did not end the process (child: %v):\n%s",
		err, strings.Join(saw, "\n"))
}

// TestJoinAdversarial runs the adversarial cases of Join, one subtest
// each: races and load meant to break what the tests above assert.
func TestJoinAdversarial(t *testing.T) {
	t.Run("NestedPanics", joinNestedPanics)
	t.Run("UnwoundByPlainPanic", joinUnwoundByPlainPanic)
}

// panicValues lists the values of the *PanicErrors in err, which may be
// a join of errors.
func panicValues(err error) []any {
	if err == nil {
		return nil
	}
	if pe, ok := err.(*PanicError); ok {
		return []any{pe.Value}
	}
	var out []any
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, panicValues(e)...)
		}
	}
	return out
}

// nestedPanicEnv selects the child process of
// joinUnwoundByPlainPanic.
const nestedPanicEnv = "NUMAPOOL_TEST_NESTED_PLAIN_PANIC"

// nestedPanicValue is what the plain task panics with.
const nestedPanicValue = "numapool-nested-plain-task-panic"

// nestedPlainPanicChild is the child process's scenario, on a pool of two
// workers W1 and W2 with no panic handler. It prints what it saw; every
// wait is bounded.
func nestedPlainPanicChild() {
	p, err := newPool([]Option{WithWorkers(2), WithoutEnv()}, func(string) (string, bool) { return "", false })
	if err != nil {
		fmt.Println("child: New:", err)
		return
	}
	defer p.Close()
	say := func(format string, args ...any) { fmt.Printf("child: "+format+"\n", args...) }
	waitFor := func(what string, cond func() bool) bool {
		for deadline := time.Now().Add(2 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				say("gave up waiting for %s", what)
				return false
			}
			time.Sleep(10 * time.Microsecond)
		}
		return true
	}
	var bStarted, bDone, b2Started, b2Done atomic.Bool
	releaseB, releaseB2 := make(chan struct{}), make(chan struct{})
	block := func(ch chan struct{}) {
		select {
		case <-ch:
		case <-time.After(2 * time.Second):
		}
	}
	finished := make(chan struct{})
	err = p.Submit(context.Background(), func(w *Worker) {
		defer close(finished)
		// Join 1, on W1: W2 steals b and blocks in it; a spawns the
		// panicking plain task into W1's LIFO slot, which W1 runs while
		// it helps, waiting for b.
		_, err1 := Run(w, func(w *Worker) (int, error) {
			return 0, w.Join(func(w *Worker) {
				if waitFor("b to be stolen", bStarted.Load) {
					w.Spawn(func(*Worker) { panic(nestedPanicValue) })
				}
			}, func(*Worker) {
				bStarted.Store(true)
				block(releaseB)
				bDone.Store(true)
			})
		})
		say("the process lives on; Join 1 returned %v while its b was still running: %v", err1, !bDone.Load())
		// Join 2 on W1 reuses the record: W2 finishes the old b (marking
		// the record done), then steals b2 and blocks in it.
		err2 := w.Join(func(w *Worker) {
			close(releaseB)
			waitFor("the old b to end", bDone.Load)
			waitFor("b2 to be stolen", b2Started.Load)
		}, func(*Worker) {
			b2Started.Store(true)
			block(releaseB2)
			b2Done.Store(true)
		})
		say("Join 2 returned %v before its b had run to the end: %v", err2, !b2Done.Load())
		close(releaseB2)
	})
	if err != nil {
		say("Submit: %v", err)
		return
	}
	select {
	case <-finished:
	case <-time.After(4 * time.Second):
		say("the root task did not finish")
	}
}

func forkIdentity(_ *Worker, x int) int { return x }

type fibArg struct{ n, cutoff int }

// A Fork that nobody steals from allocates nothing: a fib by Fork on a
// one-worker pool, after a first call has made the records.
func TestForkAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newTestPool(t, WithWorkers(1), WithMachineWatch(0)) // nobody to steal fb; and see newTestPool
	defer p.Close()
	want := fibSeq(20)
	allocs := onWorker(t, p, func(w *Worker) float64 {
		_ = fibFork(w, fibArg{20, 2}) // warm: the first Forks make the records
		return testing.AllocsPerRun(20, func() {
			if got := fibFork(w, fibArg{20, 2}); got != want {
				t.Errorf("fib(20) = %d, want %d", got, want)
			}
		})
	})
	if allocs != 0 {
		t.Errorf("a fib(20) by Fork allocated %.1f times", allocs)
	}
}

// fb runs on another worker while fa waits for it, and its value comes
// back from there.
func TestForkHalfIsStolen(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	for range 50 {
		bDone := make(chan struct{})
		type ran struct{ worker, value int }
		got := onWorker(t, p, func(w *Worker) [3]int {
			ra, rb, err := Fork(w, func(w *Worker, x int) ran {
				select {
				case <-bDone:
				case <-time.After(10 * time.Second):
					panic("Fork's fb never ran while fa waited: nobody took it from the join slot")
				}
				return ran{w.ID(), x}
			}, 1, func(w *Worker, x int) ran {
				close(bDone)
				return ran{w.ID(), x}
			}, 2)
			if err != nil {
				t.Error(err)
			}
			if ra.value != 1 || rb.value != 2 {
				t.Errorf("Fork = %v, %v; want values 1 and 2", ra, rb)
			}
			return [3]int{ra.worker, rb.worker}
		})
		if got[0] == got[1] {
			t.Fatalf("fa and fb ran on worker %d", got[0])
		}
	}
}

// Forks of different types nest: each gets a record of its own types,
// whatever the worker's list holds, and every value comes back to its
// caller, also when thieves run the fb halves.
func TestForkNestsDifferentTypes(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	var leaves atomic.Int64
	var words func(w *Worker, d int) string
	count := func(w *Worker, d int) int {
		if d == 0 {
			leaves.Add(1)
			return 1
		}
		s, n, err := Fork(w, words, d-1, func(w *Worker, d int) int { return len(words(w, d)) }, d-1)
		if err != nil {
			panic(err)
		}
		return len(s) + n
	}
	words = func(w *Worker, d int) string {
		if d == 0 {
			leaves.Add(1)
			return "x"
		}
		n, s, err := Fork(w, count, d-1, words, d-1)
		if err != nil {
			panic(err)
		}
		return strings.Repeat("x", n) + s
	}
	for rep := range 20 {
		leaves.Store(0)
		got := onWorker(t, p, func(w *Worker) int { return len(words(w, 12)) })
		if got != 1<<12 || leaves.Load() != 1<<12 {
			t.Fatalf("rep %d: %d from %d leaves, want %d from %d", rep, got, leaves.Load(), 1<<12, 1<<12)
		}
	}
}

// Panics in fa and fb come back as one *PanicError each, joined, with
// the value of the half that did not panic.
func TestForkReturnsPanics(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	type out struct {
		ra, rb int
		err    error
	}
	boom := func(*Worker, int) int { panic("left") }
	for _, tc := range []struct {
		name           string
		fa, fb         func(*Worker, int) int
		wantA, wantB   int
		panics, absent string
	}{
		{"both", boom, func(*Worker, int) int { panic(errors.New("right")) }, 0, 0, "left", ""},
		{"fb only", forkIdentity, func(*Worker, int) int { panic("right") }, 3, 0, "right", "left"},
	} {
		r := onWorker(t, p, func(w *Worker) out {
			ra, rb, err := Fork(w, tc.fa, 3, tc.fb, 4)
			return out{ra, rb, err}
		})
		var pe *PanicError
		if !errors.As(r.err, &pe) || !strings.Contains(r.err.Error(), tc.panics) ||
			(tc.absent != "" && strings.Contains(r.err.Error(), tc.absent)) {
			t.Errorf("%s: Fork error = %v", tc.name, r.err)
		}
		if r.ra != tc.wantA || r.rb != tc.wantB {
			t.Errorf("%s: Fork = %d, %d; want %d, %d", tc.name, r.ra, r.rb, tc.wantA, tc.wantB)
		}
	}
	msg := onWorker(t, p, func(w *Worker) any {
		return recovered(func() { _, _, _ = Fork[int, int, int, int](w, nil, 1, forkIdentity, 2) })
	})
	if !strings.HasPrefix(fmt.Sprint(msg), "pool: Fork of a nil function") {
		t.Errorf("Fork of nil panicked with %v", msg)
	}
}

func fibGo(n, cutoff int) int {
	if n <= cutoff {
		return fibSeq(n)
	}
	var a, b int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a = fibGo(n-1, cutoff) }()
	b = fibGo(n-2, cutoff)
	wg.Wait()
	return a + b
}

func fibErrgroup(n, cutoff int) int {
	if n <= cutoff {
		return fibSeq(n)
	}
	var a, b int
	var g errgroup.Group
	g.Go(func() error { a = fibErrgroup(n-1, cutoff); return nil })
	b = fibErrgroup(n-2, cutoff)
	_ = g.Wait()
	return a + b
}

func benchFib(b *testing.B, cutoff int) {
	const n = 30
	want := fibSeq(n)
	b.Run("pool", func(b *testing.B) {
		p := benchPool(b)
		b.ReportAllocs()
		for b.Loop() {
			ch := make(chan int, 1)
			_ = p.Submit(context.Background(), func(w *Worker) { ch <- fibJoin(w, n, cutoff) })
			if got := <-ch; got != want {
				b.Fatal(got)
			}
		}
	})
	b.Run("fork", func(b *testing.B) {
		p := benchPool(b)
		b.ReportAllocs()
		for b.Loop() {
			ch := make(chan int, 1)
			_ = p.Submit(context.Background(), func(w *Worker) { ch <- fibFork(w, fibArg{n, cutoff}) })
			if got := <-ch; got != want {
				b.Fatal(got)
			}
		}
	})
	b.Run("goroutines", func(b *testing.B) {
		for b.Loop() {
			if got := fibGo(n, cutoff); got != want {
				b.Fatal(got)
			}
		}
	})
	b.Run("errgroup", func(b *testing.B) {
		for b.Loop() {
			if got := fibErrgroup(n, cutoff); got != want {
				b.Fatal(got)
			}
		}
	})
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			if got := fibSeq(n); got != want {
				b.Fatal(got)
			}
		}
	})
}

func BenchmarkFib30Cutoff10(b *testing.B) { benchFib(b, 10) }

func BenchmarkFib30Cutoff20(b *testing.B) { benchFib(b, 20) }

// mergeSortCutoff is the length below which a merge sort half is sorted
// sequentially.
const mergeSortCutoff = 2048

// sortJoin sorts a with buf (of a's length) as scratch, the halves in
// parallel with Join above mergeSortCutoff.
func sortJoin(w *Worker, a, buf []int) {
	if len(a) <= mergeSortCutoff {
		slices.Sort(a)
		return
	}
	mid := len(a) / 2
	_ = w.Join(func(w *Worker) { sortJoin(w, a[:mid], buf[:mid]) },
		func(w *Worker) { sortJoin(w, a[mid:], buf[mid:]) })
	copy(buf, a)
	i, j, k := 0, mid, 0
	for i < mid && j < len(a) {
		if buf[j] < buf[i] {
			a[k] = buf[j]
			j++
		} else {
			a[k] = buf[i]
			i++
		}
		k++
	}
	k += copy(a[k:], buf[i:mid])
	copy(a[k:], buf[j:])
}

// A parallel merge sort of 2^20 ints: Joins of unequal-time halves, whose
// joiners wait for thieves.
func BenchmarkMergeSort(b *testing.B) {
	const n = 1 << 20
	src := make([]int, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = r.IntN(n)
	}
	p := benchPool(b)
	a, buf := make([]int, n), make([]int, n)
	for b.Loop() {
		copy(a, src)
		done := make(chan struct{})
		_ = p.Submit(context.Background(), func(w *Worker) { sortJoin(w, a, buf); close(done) })
		<-done
	}
	if !slices.IsSorted(a) {
		b.Fatal("not sorted")
	}
}

func fibFork(w *Worker, a fibArg) int {
	if a.n <= a.cutoff {
		return fibSeq(a.n)
	}
	x, y, err := Fork(w, fibFork, fibArg{a.n - 1, a.cutoff}, fibFork, fibArg{a.n - 2, a.cutoff})
	if err != nil {
		panic(err)
	}
	return x + y
}
