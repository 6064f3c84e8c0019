package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The sizes and grains a loop's index arithmetic must survive: the edges
// (0, 1, a grain above n, a grain <= 0 that the loop picks itself) and
// sizes and grains within a grain of math.MaxInt, where lo+grain,
// n*workers and (c+1)*grain do not fit in an int.
var (
	edgeSizes  = []int{0, 1, 2, 3, 1000, quarterInt, math.MaxInt - 1, math.MaxInt}
	edgeGrains = []int{math.MinInt, -1, 0, 1, 7, quarterInt, math.MaxInt - 1, math.MaxInt}
)

// quarterInt is a quarter of the int range, 1<<62 on 64-bit: twice it
// passes math.MaxInt.
const quarterInt = 1 << (bits.UintSize - 2)

// edgePools are the layouts the loops split over: one worker; two nodes
// of one and of two workers; two nodes whose blocks never leave them.
var edgePools = []struct {
	name string
	opts []Option
}{
	{"1-worker", []Option{WithWorkers(1)}},
	{"2x1", []Option{WithSpec("2x1")}},
	{"2x2", []Option{WithSpec("2x2")}},
	{"2x1-cross", []Option{WithSpec("2x1"), WithCrossNodeLoops()}},
}

// edgeSmall is the largest size a range test runs to the end; a loop over
// more indexes is stopped by its body after edgeStopAfter calls: more
// than the parts a grain <= 0 makes on a pool of up to four workers, so
// that the last of them, where lo+grain passes n, runs too.
const (
	edgeSmall     = 1000
	edgeStopAfter = 300
)

// errEnough is what a range-recording body returns to stop its loop.
var errEnough = errors.New("enough ranges seen")

// rangeLog records the ranges a loop hands its body, and checks each
// against 0 <= lo < hi <= n.
type rangeLog struct {
	n     int
	calls atomic.Int64
	mu    sync.Mutex
	bad   [][2]int // the first ranges outside [0, n), reversed or empty
	seen  [][2]int // the first maxSeen ranges
}

const maxSeen = 1 << 16

// add records [lo, hi) and returns how many ranges have been handed out.
func (r *rangeLog) add(lo, hi int) int64 {
	ok := 0 <= lo && lo < hi && hi <= r.n
	r.mu.Lock()
	if !ok && len(r.bad) < 5 {
		r.bad = append(r.bad, [2]int{lo, hi})
	}
	if len(r.seen) < maxSeen {
		r.seen = append(r.seen, [2]int{lo, hi})
	}
	r.mu.Unlock()
	return r.calls.Add(1)
}

// String names the bad ranges seen so far, for a failure message.
func (r *rangeLog) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d calls, bad ranges %v", r.calls.Load(), r.bad)
}

// check fails t for every range outside [0, n) and, when the loop ran to
// the end (complete), unless the ranges cover [0, n) exactly once.
func (r *rangeLog) check(t *testing.T, complete bool) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("n %d: body called with ranges outside 0 <= lo < hi <= n: %v (of %d calls)", r.n, r.bad, r.calls.Load())
		return
	}
	if !complete {
		return
	}
	if int64(len(r.seen)) != r.calls.Load() {
		t.Fatalf("n %d: %d calls, more than the %d the test keeps", r.n, r.calls.Load(), maxSeen)
	}
	seen := slices.Clone(r.seen)
	slices.SortFunc(seen, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	next := 0
	for _, s := range seen {
		if s[0] != next {
			t.Errorf("n %d: ranges %v leave out or repeat indexes at %d", r.n, seen, next)
			return
		}
		next = s[1]
	}
	if next != r.n {
		t.Errorf("n %d: ranges end at %d, want n", r.n, next)
	}
}

// inTask runs fn as a task of p and returns once it has run, or with
// Submit's error.
func inTask(p *Pool, fn func(w *Worker)) error {
	done := make(chan struct{})
	if err := p.Submit(context.Background(), func(w *Worker) {
		defer close(done)
		fn(w)
	}); err != nil {
		return err
	}
	<-done
	return nil
}

// Split divides every n, up to math.MaxInt, into contiguous blocks, one
// per node in node order, covering [0, n) exactly, block i ending at
// floor(n * workers up to node i / workers): the formula the split has
// always had, computed here without overflow. It once multiplied n by the
// workers in an int64, so Split(math.MaxInt) on two nodes gave the second
// node [4611686018427387903, -1).
func TestSplitNearMaxInt(t *testing.T) {
	pools := append(slices.Clone(edgePools), struct {
		name string
		opts []Option
	}{"3x1-4-workers", []Option{WithSpec("3x1"), WithWorkers(4)}})
	sizes := append(slices.Clone(edgeSizes), -1, math.MinInt, 5, 999, 1001, math.MaxInt/3, math.MaxInt-2)
	for _, pc := range pools {
		t.Run(pc.name, func(t *testing.T) {
			p := newTestPool(t, pc.opts...)
			defer p.Close()
			total := big.NewInt(int64(len(p.workers)))
			for _, n := range sizes {
				t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
					blocks := p.Split(n)
					if len(blocks) != len(p.domains) {
						t.Fatalf("Split(%d) = %v: %d blocks for %d nodes", n, blocks, len(blocks), len(p.domains))
					}
					size := max(n, 0) // ParallelFor over n <= 0 runs nothing
					lo, done := 0, 0
					for i, b := range blocks {
						d := p.domains[i]
						done += len(d.workers)
						want := new(big.Int).Mul(big.NewInt(int64(size)), big.NewInt(int64(done)))
						want.Quo(want, total)
						if b.Node != d.node.ID || b.Lo != lo || b.Hi < b.Lo || b.Hi > size || int64(b.Hi) != want.Int64() {
							t.Fatalf("Split(%d) = %v: block %d is %+v, want {Node %d, Lo %d, Hi %d}",
								n, blocks, i, b, d.node.ID, lo, want)
						}
						lo = b.Hi
					}
					if lo != size {
						t.Fatalf("Split(%d) = %v ends at %d, want %d", n, blocks, lo, size)
					}
				})
			}
		})
	}
}

// Every range a ParallelFor hands its body lies in [0, n) and is not
// empty, for every n and grain up to math.MaxInt, from outside the pool
// and from inside a task, with and without strict loops; each call
// returns, and one run to the end covers [0, n) exactly once. A body
// over more than edgeSmall indexes stops its loop after a few calls
// (an error, or cancelling ctx), so a loop over math.MaxInt ends soon.
//
// The part a worker ran was once [lo, min(lo+grain, hi)): near
// math.MaxInt lo+grain wrapped, and the body was called with reversed,
// negative ranges for ever. On two nodes the split gave the second node a
// reversed block that never counted as done, and the call never returned.
func TestParallelForRangesNearMaxInt(t *testing.T) {
	type loop func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) error
	loops := []struct {
		name string
		run  loop
		stop error // what the body's stop makes the loop return
	}{
		{"ParallelFor, failing", func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) error {
			return p.ParallelFor(ctx, n, grain, func(_ *Worker, lo, hi int) error { return body(lo, hi) })
		}, errEnough},
		{"ParallelFor, cancelled", func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) error {
			return p.ParallelFor(ctx, n, grain, func(_ *Worker, lo, hi int) error { _ = body(lo, hi); return nil })
		}, context.Canceled},
		{"ParallelFor inside a task, failing", func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) (err error) {
			if serr := inTask(p, func(w *Worker) {
				err = w.Pool().ParallelFor(ctx, n, grain, func(_ *Worker, lo, hi int) error { return body(lo, hi) })
			}); serr != nil {
				return serr
			}
			return err
		}, errEnough},
		{"ParallelFor inside a task, cancelled", func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) (err error) {
			if serr := inTask(p, func(w *Worker) {
				err = w.Pool().ParallelFor(ctx, n, grain, func(_ *Worker, lo, hi int) error { _ = body(lo, hi); return nil })
			}); serr != nil {
				return serr
			}
			return err
		}, context.Canceled},
	}
	for _, pc := range edgePools {
		t.Run(pc.name, func(t *testing.T) {
			p := newTestPool(t, pc.opts...)
			defer p.Close()
			for _, lp := range loops {
				t.Run(lp.name, func(t *testing.T) {
					for _, n := range edgeSizes {
						for _, grain := range edgeGrains {
							name := fmt.Sprintf("%s(n %d, grain %d)", lp.name, n, grain)
							t.Run(fmt.Sprintf("n=%d/grain=%d", n, grain), func(t *testing.T) {
								ctx, cancel := context.WithCancel(context.Background())
								defer cancel()
								log := &rangeLog{n: n}
								// A failing body only fails and a cancelling one only
								// cancels: a body that did both would race its own
								// error against another worker seeing ctx done.
								body := func(lo, hi int) error {
									if log.add(lo, hi) >= edgeStopAfter && n > edgeSmall {
										if lp.stop == context.Canceled {
											cancel()
										}
										return errEnough
									}
									return nil
								}
								var err error
								within(t, hangBound, pc.name+" "+name, func() { err = lp.run(p, ctx, n, grain, body) }, log)
								log.check(t, err == nil)
								if err != nil && !errors.Is(err, lp.stop) {
									t.Errorf("%s = %v, want nil or %v", name, err, lp.stop)
								}
								if n <= edgeSmall && err != nil {
									t.Errorf("%s = %v; its body never stops it", name, err)
								}
							})
						}
					}
				})
			}
		})
	}
}

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
				panicsWith("loop")
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
	for _, d := range p.domains {
		want = append(want, 1000*len(d.workers)/4)
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

// Triad a = b + s*c over arrays far larger than the L3 (3 x 64 MiB),
// first touched by the same split; b.SetBytes counts the 24 bytes moved
// per index, so the result reads as bandwidth.
func BenchmarkTriad(b *testing.B) {
	const n = 8 << 20
	const s = 3.0
	b.Run("pool", func(b *testing.B) {
		p := benchPool(b)
		x, y, z := make([]float64, n), make([]float64, n), make([]float64, n)
		_ = p.ParallelFor(context.Background(), n, 0, func(_ *Worker, lo, hi int) error {
			for i := lo; i < hi; i++ {
				x[i], y[i], z[i] = 0, 1, 2
			}
			return nil
		})
		b.SetBytes(24 * n)
		for b.Loop() {
			_ = p.ParallelFor(context.Background(), n, 0, func(_ *Worker, lo, hi int) error {
				for i := lo; i < hi; i++ {
					x[i] = y[i] + s*z[i]
				}
				return nil
			})
		}
	})
	b.Run("goroutines", func(b *testing.B) {
		parts := len(benchPool(b).workers)
		x, y, z := make([]float64, n), make([]float64, n), make([]float64, n)
		chunks(n, parts, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				x[i], y[i], z[i] = 0, 1, 2
			}
		})
		b.SetBytes(24 * n)
		for b.Loop() {
			chunks(n, parts, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					x[i] = y[i] + s*z[i]
				}
			})
		}
	})
	b.Run("sequential", func(b *testing.B) {
		x, y, z := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range x {
			x[i], y[i], z[i] = 0, 1, 2
		}
		b.SetBytes(24 * n)
		for b.Loop() {
			for i := range x {
				x[i] = y[i] + s*z[i]
			}
		}
	})
}
