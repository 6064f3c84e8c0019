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
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/numapool/numapool/pin"
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

func TestGroupOutside(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	g := p.Group(context.Background())
	var n atomic.Int32
	for i := range 100 {
		g.Go(func(*Worker) error {
			n.Add(1)
			if i == 37 {
				return fmt.Errorf("task %d failed", i)
			}
			time.Sleep(100 * time.Microsecond) // some work: #37 fails while another runs
			return nil
		})
	}
	if err := g.Wait(); err == nil || !strings.Contains(err.Error(), "task 37") {
		t.Errorf("Wait = %v", err)
	}
	// Functions begin in the order of the calls, and those not begun when
	// #37 failed are skipped: at most one more per other worker.
	if got := int(n.Load()); got < 38 || got > 38+p.Workers()-1 {
		t.Errorf("%d of 100 tasks ran, want 38..%d (in order, the rest skipped after #37 failed)", got, 38+p.Workers()-1)
	}
	if g.Context().Err() == nil {
		t.Error("the group's context is not cancelled")
	}
}

func TestGroupFirstErrorCancels(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	g := p.Group(context.Background())
	g.Go(func(*Worker) error { return errors.New("first") })
	g.Go(func(*Worker) error {
		select {
		case <-g.Context().Done():
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("not cancelled")
		}
	})
	if err := g.Wait(); err == nil || err.Error() != "first" {
		t.Errorf("Wait = %v", err)
	}
}

func TestGroupInsideHelpsAndReturnsPanics(t *testing.T) {
	p := newTestPool(t, WithWorkers(1)) // one worker: Wait must run the tasks itself
	defer p.Close()
	err := onWorker(t, p, func(w *Worker) error {
		g := w.Pool().Group(context.Background())
		g.SetLimit(3)
		var sum atomic.Int64
		for i := range 50 {
			g.Go(func(w *Worker) error {
				inner := w.Pool().Group(context.Background())
				inner.Go(func(*Worker) error { sum.Add(int64(i)); return nil })
				return inner.Wait()
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if sum.Load() != 49*50/2 {
			return fmt.Errorf("sum %d", sum.Load())
		}
		g2 := w.Pool().Group(context.Background())
		g2.Go(func(*Worker) error { panic("inside") })
		return g2.Wait()
	})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "inside" {
		t.Fatalf("err = %v", err)
	}
}

func TestParallelForEveryIndexOnce(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	ns := []int{0, 1, 2, 3, 7, 100, 1000, 12345}
	if !testing.Short() {
		ns = append(ns, 1_000_000)
	}
	for _, n := range ns {
		for _, grain := range []int{0, 1, 3, 64, n + 1} {
			seen := make([]atomic.Int32, n)
			err := p.ParallelFor(context.Background(), n, grain, func(_ *Worker, lo, hi int) error {
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("n=%d grain=%d: index %d visited %d times", n, grain, i, c)
				}
			}
		}
	}
	// From inside a task too.
	const n = 5000
	seen := make([]atomic.Int32, n)
	err := onWorker(t, p, func(w *Worker) error {
		return w.Pool().ParallelFor(context.Background(), n, 10, func(_ *Worker, lo, hi int) error {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("inside: index %d visited %d times", i, seen[i].Load())
		}
	}
}

// The node split is the same on every call and proportional to the
// nodes' workers; each node's block runs on that node unless it ran dry.
func TestParallelForSplitIsStable(t *testing.T) {
	p := newTestPool(t, WithSpec("3x1"), WithWorkers(4)) // 3 nodes, one with 2 workers
	defer p.Close()
	first := p.Split(1000)
	for range 10 {
		if got := p.Split(1000); !slices.Equal(got, first) {
			t.Fatalf("split changed: %v then %v", first, got)
		}
	}
	sizes := make([]int, len(first))
	for i, b := range first {
		sizes[i] = b.Hi - b.Lo
	}
	var want []int
	for _, g := range p.groups {
		want = append(want, 1000*len(g.workers)/4)
	}
	if !slices.Equal(sizes, want) || first[0].Lo != 0 || first[2].Hi != 1000 || slices.Max(want) != 500 {
		t.Fatalf("split %v: sizes %v, want %v", first, sizes, want)
	}
	// Where did each index run? With a balanced body, almost always on
	// the node that owns its block.
	runs := 0
	var foreign atomic.Int32
	for range 5 {
		err := p.ParallelFor(context.Background(), 1000, 10, func(w *Worker, lo, hi int) error {
			for _, b := range first {
				if lo >= b.Lo && lo < b.Hi && w.Node() != b.Node {
					foreign.Add(int32(hi - lo))
				}
			}
			time.Sleep(20 * time.Microsecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		runs++
	}
	if f := foreign.Load(); f > 5*1000/4 {
		t.Errorf("%d of %d indexes ran off their node", f, runs*1000)
	}
	t.Logf("%d of %d indexes ran off their node (tail-end steals)", foreign.Load(), runs*1000)
}

func TestParallelForStops(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	var ran atomic.Int64
	err := p.ParallelFor(context.Background(), 100000, 1, func(_ *Worker, lo, hi int) error {
		ran.Add(int64(hi - lo))
		if lo == 500 {
			panic("at 500")
		}
		return nil
	})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "at 500" {
		t.Fatalf("err = %v", err)
	}
	if ran.Load() == 100000 {
		t.Error("a panic did not stop handing out blocks")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.ParallelFor(ctx, 1000, 1, func(*Worker, int, int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestAllocOnNode(t *testing.T) {
	p := newTestPool(t)
	defer p.Close()
	for _, node := range p.Nodes() {
		if node < 0 {
			continue
		}
		s, release, err := AllocOnNode[float64](p.Node(node), 1<<18)
		if errors.Is(err, pin.ErrUnsupported) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := pin.PageNodes(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*8))
		if err != nil {
			t.Fatal(err)
		}
		for i, got := range nodes {
			if got != node {
				t.Fatalf("page %d on node %d, want %d", i, got, node)
			}
		}
		s[len(s)-1] = 1
		if err := release(); err != nil {
			t.Fatal(err)
		}
	}
}

// First touch by ParallelFor puts each node's block on its node. Needs a
// kernel with several nodes (the VM run); on one node it checks nothing
// more than TestParallelForSplitIsStable.
func TestFirstTouchPlacement(t *testing.T) {
	p := newTestPool(t)
	defer p.Close()
	if len(p.Nodes()) < 2 {
		t.Skipf("one NUMA node here (%v): placement needs several", p.Nodes())
	}
	const n = 1 << 22
	data := make([]float64, n) // not yet touched: the kernel places pages at first write
	if err := p.ParallelFor(context.Background(), n, 0, func(_ *Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			data[i] = 1
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize() / 8
	for _, b := range p.Split(n) {
		wrong, total := 0, 0
		for i := b.Lo + page; i < b.Hi-page; i += page {
			got, err := pin.NodeOf(unsafe.Pointer(&data[i]))
			if err != nil {
				t.Fatal(err)
			}
			total++
			if got != b.Node {
				wrong++
			}
		}
		if wrong*10 > total {
			t.Errorf("node %d's block: %d of %d pages elsewhere", b.Node, wrong, total)
		}
	}
}

func TestJoinMisusePanics(t *testing.T) {
	if !cheapGID && !raceEnabled {
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

// Wait on a Pool.Group from inside a task runs the group's tasks instead
// of blocking the worker: with one worker, blocking would never return.
func TestPoolGroupWaitInsideTaskHelps(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	var ran atomic.Int32
	err := onWorker(t, p, func(w *Worker) error {
		g := p.Group(context.Background())
		for range 10 {
			g.Go(func(*Worker) error { ran.Add(1); return nil })
		}
		return g.Wait()
	})
	if err != nil || ran.Load() != 10 {
		t.Fatalf("Wait = %v with %d of 10 tasks run", err, ran.Load())
	}
}

// Where the platform cannot map memory for placement, AllocFirstTouch
// still gives a zeroed slice of n elements (from make) and a release that
// succeeds; any other failure is returned.
func TestAllocFirstTouchWithoutPlacement(t *testing.T) {
	unsupported := func(int) ([]byte, func() error, error) { return nil, nil, pin.ErrUnsupported }
	s, release, err := firstTouch[float64](1000, unsupported)
	if err != nil || len(s) != 1000 || release == nil || release() != nil {
		t.Fatalf("firstTouch without placement: %d elements, %v", len(s), err)
	}
	for i, v := range s {
		if v != 0 {
			t.Fatalf("s[%d] = %v, want 0", i, v)
		}
	}
	failing := errors.New("mmap: cannot allocate memory")
	broken := func(int) ([]byte, func() error, error) { return nil, nil, failing }
	if _, _, err := firstTouch[float64](1000, broken); !errors.Is(err, failing) {
		t.Fatalf("firstTouch with a failing map returned %v, want %v", err, failing)
	}
}

func TestAllocFirstTouch(t *testing.T) {
	s, release, err := AllocFirstTouch[int32](1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	if err := p.ParallelFor(context.Background(), len(s), 0, func(_ *Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			s[i] = int32(i)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range s {
		if s[i] != int32(i) {
			t.Fatalf("s[%d] = %d", i, s[i])
		}
	}
	nodes, err := pin.PageNodes(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*4))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(nodes, -1) {
		t.Error("a page written by ParallelFor is not present")
	}
}

// A node that finishes its block early and finds the other node's loop
// pieces fresh sends them home, and then leaves that node alone until the
// pieces may be helped with: it does not steal and send back in a loop.
func TestParallelForDryNodeLeavesFreshWorkAlone(t *testing.T) {
	for _, strictLoops := range []bool{false, true} {
		opts := []Option{WithSpec("2x1")}
		if !strictLoops {
			opts = append(opts, WithCrossNodeLoops())
		}
		p := newTestPool(t, opts...)
		split := p.Split(4000)
		slow := split[0] // node 0's block takes about 20 ms, node 1's no time
		start := time.Now()
		err := p.ParallelFor(context.Background(), 4000, 4, func(w *Worker, lo, hi int) error {
			if lo >= slow.Lo && lo < slow.Hi {
				for t := time.Now(); time.Since(t) < time.Duration(hi-lo)*5*time.Microsecond; {
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		_ = p.Close()
		st := p.Stats().Total
		// One send-home per crossNodeAfter per worker of the dry node,
		// twice over for slack.
		bound := 2 * (uint64(elapsed/crossNodeAfter) + 1)
		t.Logf("strict loops %v: %v, %d pieces sent home (bound %d), %d cross-node steals", strictLoops, elapsed.Round(time.Millisecond), st.SentHome, bound, st.StealsCrossNode)
		if st.SentHome > bound {
			t.Errorf("strict loops %v: the dry node sent %d pieces home in %v (at most %d expected)", strictLoops, st.SentHome, elapsed, bound)
		}
	}
}

// A group used again after Wait runs its new functions: only a failure or
// the parent's cancellation skips functions that have not begun.
func TestGroupReusedAfterWait(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	g := p.Group(context.Background())
	g.Go(func(*Worker) error { return nil })
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Bool
	g.Go(func(*Worker) error { ran.Store(true); return nil })
	if err := g.Wait(); err != nil || !ran.Load() {
		t.Errorf("second Wait = %v, ran %v", err, ran.Load())
	}
}

// A loop of two pieces runs them on two workers: the last two pieces of
// a range are split like any others (they ran one after the other on one
// worker, so a loop over two partitions got no parallelism).
func TestParallelForTwoPiecesRunInParallel(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	for _, run := range []func(body func(w *Worker, lo, hi int)) error{
		func(body func(w *Worker, lo, hi int)) error {
			return p.ParallelFor(context.Background(), 2, 1, func(w *Worker, lo, hi int) error { body(w, lo, hi); return nil })
		},
		func(body func(w *Worker, lo, hi int)) error {
			_, err := MapReduce(context.Background(), p, 2, 1, func(w *Worker, lo, hi int) (int, error) {
				body(w, lo, hi)
				return 0, nil
			}, func(a, b int) int { return a + b })
			return err
		},
	} {
		second := make(chan struct{})
		var together atomic.Bool
		err := run(func(w *Worker, lo, hi int) {
			if lo == 1 {
				close(second)
				return
			}
			select { // the first piece waits for the second to start elsewhere
			case <-second:
				together.Store(true)
			case <-time.After(2 * time.Second):
			}
		})
		if err != nil || !together.Load() {
			t.Errorf("err %v; the two pieces ran in parallel: %v", err, together.Load())
		}
	}
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
	p := newTestPool(t, WithWorkers(1)) // nobody to steal b
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
