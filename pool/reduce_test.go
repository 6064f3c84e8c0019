package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// mapRanges is MapReduce with a mapper that hands its range to body and
// maps it to val(lo, hi).
func mapRanges[T any](ctx context.Context, p *Pool, n, grain int, body func(lo, hi int) error,
	val func(lo, hi int) T, combine func(a, b T) T) (T, error) {
	return MapReduce(ctx, p, n, grain, func(_ *Worker, lo, hi int) (T, error) {
		err := body(lo, hi)
		return val(lo, hi), err
	}, combine)
}

// Every range MapReduce hands its mapper lies in [0, n) and is not empty,
// for every n and grain up to math.MaxInt, from outside the pool and from
// inside a task, with and without strict loops; each call returns, and
// one run to the end covers [0, n) exactly once, the partial sizes adding
// up to n. A mapper over more than edgeSmall indexes stops the job after
// a few calls (an error, or cancelling ctx), so a job over math.MaxInt
// ends soon. Where the chunks are too many to keep an int each (n
// near math.MaxInt in chunks of a few), the partials are empty structs.
//
// Chunk c was once [c*grain, min((c+1)*grain, n)): for the last chunk
// (c+1)*grain can wrap, and MapReduce(ctx, p, math.MaxInt, 1<<62, …)
// handed its mapper [4611686018427387904, -9223372036854775808).
func TestMapReduceRangesNearMaxInt(t *testing.T) {
	type job func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) (int, error)
	run := func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) (int, error) {
		if grain > 0 && n/grain > 1<<20 {
			_, err := mapRanges(ctx, p, n, grain, body,
				func(int, int) struct{} { return struct{}{} }, func(a, _ struct{}) struct{} { return a })
			return n, err
		}
		return mapRanges(ctx, p, n, grain, body,
			func(lo, hi int) int { return hi - lo }, func(a, b int) int { return a + b })
	}
	jobs := []struct {
		name string
		run  job
		stop error // what the mapper's stop makes MapReduce return
	}{
		{"stop-by-error", func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) (int, error) {
			return run(p, ctx, n, grain, body)
		}, errEnough},
		{"stop-by-cancel", func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) (int, error) {
			return run(p, ctx, n, grain, func(lo, hi int) error { _ = body(lo, hi); return nil })
		}, context.Canceled},
		{"in-task", func(p *Pool, ctx context.Context, n, grain int, body func(lo, hi int) error) (sum int, err error) {
			if serr := inTask(p, func(w *Worker) { sum, err = run(w.Pool(), ctx, n, grain, body) }); serr != nil {
				return 0, serr
			}
			return sum, err
		}, errEnough},
	}
	for _, pc := range edgePools {
		t.Run(pc.name, func(t *testing.T) {
			p := newTestPool(t, pc.opts...)
			defer p.Close()
			for _, jb := range jobs {
				t.Run(jb.name, func(t *testing.T) {
					for _, n := range edgeSizes {
						for _, grain := range edgeGrains {
							name := fmt.Sprintf("MapReduce(n %d, grain %d) %s", n, grain, jb.name)
							t.Run(fmt.Sprintf("n=%d/grain=%d", n, grain), func(t *testing.T) {
								ctx, cancel := context.WithCancel(context.Background())
								defer cancel()
								log := &rangeLog{n: n}
								// A failing mapper only fails and a cancelling one
								// only cancels (see TestParallelForRangesNearMaxInt).
								body := func(lo, hi int) error {
									if log.add(lo, hi) >= edgeStopAfter && n > edgeSmall {
										if jb.stop == context.Canceled {
											cancel()
										}
										return errEnough
									}
									return nil
								}
								var sum int
								var err error
								within(t, hangBound, pc.name+" "+name, func() { sum, err = jb.run(p, ctx, n, grain, body) }, log)
								log.check(t, err == nil)
								if err != nil && !errors.Is(err, jb.stop) {
									t.Errorf("%s = %v, want nil or %v", name, err, jb.stop)
								}
								if n <= edgeSmall && err != nil {
									t.Errorf("%s = %v; its mapper never stops it", name, err)
								}
								if err == nil && sum != max(n, 0) {
									t.Errorf("%s: partial sizes add up to %d, want n", name, sum)
								}
							})
						}
					}
				})
			}
		})
	}
}

// PerWorker.Get of nil, or of another pool's worker, is misuse: it panics
// with a pool: message instead of an index error or another pool's cell.
func TestPerWorkerGetMisuse(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	other := newTestPool(t, WithWorkers(2))
	defer other.Close()
	s := NewPerWorker[int](p, nil)
	var foreign *Worker
	if _, err := Run(other, func(w *Worker) (int, error) { foreign = w; return 0, nil }); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*Worker{"nil": nil, "another pool's worker": foreign} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "pool: PerWorker.Get") {
					t.Errorf("Get(%s) panicked with %q, want a pool: message", name, msg)
				}
			}()
			s.Get(w)
		}()
	}
}

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
	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	// The reference, sequential: each node's block of chunks folded from
	// its first chunk, then the blocks' sums in node order.
	foldChunks := func(lo, hi int) float64 { // chunks [lo, hi)
		s := sumRange(lo*grain, min((lo+1)*grain, n))
		for c := lo + 1; c < hi; c++ {
			s += sumRange(c*grain, min((c+1)*grain, n))
		}
		return s
	}
	var want float64
	for i, b := range p.Split(1 + (n-1)/grain) {
		if i == 0 {
			want = foldChunks(b.Lo, b.Hi)
		} else {
			want += foldChunks(b.Lo, b.Hi)
		}
	}
	if plain := sumRange(0, n); plain == want {
		t.Logf("the chunked and the plain sum agree (%v): the data does not show order effects", want)
	} else {
		t.Logf("chunked %v, plain %v: the order of additions matters for this data", want, plain)
	}
	mapper := func(_ *Worker, lo, hi int) (float64, error) { return sumRange(lo, hi), nil }
	add := func(a, b float64) float64 { return a + b }
	var auto float64
	within(t, hangBound, "MapReduce runs", func() {
		for run := range runs {
			got, err := MapReduce(context.Background(), p, n, grain, mapper, add)
			if err != nil || math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("run %d: %v (%x), %v; want %v (%x), the fold over the chunks by node",
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
				panicsWith("map")
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

// Every index is mapped exactly once and the chunks combine in order,
// for tiny and large grains, n not a multiple of grain, on one worker and
// on several nodes, with and without WithCrossNodeLoops, from outside the
// pool and from inside a task (which helps), and with several calls at
// once.
func mapReduceChunksOnce(t *testing.T) {
	type size struct{ n, grain int }
	sizes := []size{{1, 1}, {2, 1}, {3, 2}, {5, 3}, {7, 100}, {64, 64}, {1003, 1}, {1003, 7},
		{1003, 1002}, {1003, 1003}, {1003, 1004}, {1003, 0}, {100_003, 997}}
	onEachLayout(t, reuseSpecs, func(t *testing.T, p *Pool, _ bool) {
		var pr problems
		ctx := context.Background()
		within(t, hangBound, "MapReduce calls", func() {
			for _, sz := range sizes {
				// From outside.
				c := newChunkCheck(sz.n, sz.grain, &pr)
				res, err := MapReduce(ctx, p, sz.n, sz.grain, c.mapper(nil), combineLists)
				c.check(res, err, "outside")
				// From inside a task.
				c = newChunkCheck(sz.n, sz.grain, &pr)
				r, err := Run(p, func(w *Worker) ([]int, error) {
					res, err := MapReduce(ctx, w.Pool(), sz.n, sz.grain, c.mapper(nil), combineLists)
					c.check(res, err, "inside")
					return res, nil
				})
				if err != nil || len(r) == 0 {
					pr.add("Run around MapReduce = %d chunks, %v", len(r), err)
				}
			}
			// Several at once, from outside and inside.
			var wg sync.WaitGroup
			for k := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sz := sizes[6+k%6]
					c := newChunkCheck(sz.n, sz.grain, &pr)
					if k%2 == 0 {
						res, err := MapReduce(ctx, p, sz.n, sz.grain, c.mapper(nil), combineLists)
						c.check(res, err, "concurrent outside")
						return
					}
					_, _ = Run(p, func(w *Worker) (int, error) {
						res, err := MapReduce(ctx, w.Pool(), sz.n, sz.grain, c.mapper(nil), combineLists)
						c.check(res, err, "concurrent inside")
						return 0, nil
					})
				}()
			}
			wg.Wait()
		})
		pr.report(t)
	})
}

// A node whose chunks are slow is helped by the other node's helpers once
// its block has waited crossNodeAfter under WithCrossNodeLoops, never without; each
// chunk is still mapped once. Node 0's 200 chunks take at least 4 ms
// even on two workers (twice crossNodeAfter: a node that finishes sooner
// has no reason to cross), node 1's at least 20 ms, so node 0's helpers
// reach node 1's block after crossNodeAfter with most of it left. With
// other packages' tests running beside it, node 0's threads were once
// kept off the CPUs until node 1 was done: a run that never crosses is
// repeated, up to three runs.
func mapReduceCrossNodeClaims(t *testing.T) {
	onEachLayout(t, []string{"2x1", "2x2"}, func(t *testing.T, p *Pool, strict bool) {
		const n = 400
		blocks := p.Split(n)
		slow := func(_ *Worker, lo, _ int) error {
			if lo >= blocks[1].Lo {
				spinFor(200 * time.Microsecond)
			} else {
				spinFor(40 * time.Microsecond)
			}
			return nil
		}
		for run := 1; ; run++ {
			var pr problems
			c := newChunkCheck(n, 1, &pr)
			within(t, hangBound, "MapReduce", func() {
				res, err := MapReduce(context.Background(), p, n, 1, c.mapper(slow), combineLists)
				c.check(res, err, "slow node")
			})
			pr.report(t)
			crossed := 0
			for k := blocks[1].Lo; k < blocks[1].Hi; k++ {
				if c.nodeOf[k].Load() == 1 { // domain 0, +1
					crossed++
				}
			}
			t.Logf("run %d: %d of node 1's %d chunks mapped by node 0", run, crossed, blocks[1].Hi-blocks[1].Lo)
			switch {
			case strict && crossed != 0:
				t.Fatalf("without WithCrossNodeLoops: %d of node 1's chunks mapped by node 0", crossed)
			case strict && run < 3:
				continue // strict: every run must stay put
			case !strict && crossed == 0 && run < 3:
				continue
			case !strict && crossed == 0:
				t.Errorf("node 0 never helped node 1's slow block after crossNodeAfter, in %d runs", run)
			}
			return
		}
	})
}

// A failing map (an error, a panic, a cancelled ctx) stops MapReduce,
// which returns that error with the zero T only once no map is running;
// no index is mapped twice; and the pool is whole afterwards: the next
// MapReduce maps everything. From outside and from inside a task, on
// every layout.
func mapReduceFailures(t *testing.T) {
	errMap := errors.New("map failed")
	for _, spec := range reuseSpecs {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, reuseOpts(spec)...)
			defer p.Close()
			var pr problems
			call := func(inside bool, ctx context.Context, n, grain int, m func(*Worker, int, int) ([]int, error)) ([]int, error) {
				if !inside {
					return MapReduce(ctx, p, n, grain, m, combineLists)
				}
				var res []int
				var err error
				if _, rerr := Run(p, func(w *Worker) (int, error) {
					res, err = MapReduce(ctx, w.Pool(), n, grain, m, combineLists)
					return 0, nil
				}); rerr != nil {
					pr.add("Run: %v", rerr)
				}
				return res, err
			}
			within(t, hangBound, "MapReduce calls", func() {
				for _, inside := range []bool{false, true} {
					for _, fail := range []string{"error", "panic", "cancel", "cancelled"} {
						for _, grain := range []int{1, 5} {
							const n = 2003
							how := fmt.Sprintf("inside %v, %s, grain %d", inside, fail, grain)
							c := newChunkCheck(n, grain, &pr)
							ctx, cancel := context.WithCancel(context.Background())
							if fail == "cancelled" {
								cancel()
							}
							bad := 3 * n / 5 / grain * grain
							res, err := call(inside, ctx, n, grain, c.mapper(func(w *Worker, lo, hi int) error {
								spinFor(2 * time.Microsecond)
								if lo != bad {
									return nil
								}
								switch fail {
								case "error":
									return errMap
								case "panic":
									panic(errMap)
								case "cancel":
									cancel()
								}
								return nil
							}))
							cancel()
							if r := c.running.Load(); r != 0 {
								pr.add("%s: returned with %d maps running", how, r)
							}
							if res != nil {
								pr.add("%s: result %d chunks, want the zero value", how, len(res))
							}
							var pe *PanicError
							switch {
							case fail == "error" && !errors.Is(err, errMap),
								fail == "panic" && (!errors.As(err, &pe) || !errors.Is(err, errMap)),
								(fail == "cancel" || fail == "cancelled") && !errors.Is(err, context.Canceled):
								pr.add("%s: err %v", how, err)
							}
							if fail == "cancelled" {
								for i := range c.mapped {
									if c.mapped[i].Load() != 0 {
										pr.add("%s: index %d mapped with ctx cancelled before the call", how, i)
										break
									}
								}
							}
							// The pool is whole: the next call maps everything.
							c = newChunkCheck(n, grain, &pr)
							res, err = call(inside, context.Background(), n, grain, c.mapper(nil))
							c.check(res, err, how+", next call")
						}
					}
				}
			})
			pr.report(t)
		})
	}
}

// MapReduce inside a map: each outer chunk runs a MapReduce of its own
// on the pool (pass w.Pool()), some of them a third level, from several
// callers at once. Every index of every level is mapped exactly once and
// each result is right.
func mapReduceNested(t *testing.T) {
	onEachLayout(t, reuseSpecs, func(t *testing.T, p *Pool, _ bool) {
		const outer, inner, third = 48, 37, 5
		var pr problems
		ctx := context.Background()
		sum := func(a, b int) int { return a + b }
		var wg sync.WaitGroup
		for caller := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var hits [outer * inner * third]atomic.Int32
				got, err := MapReduce(ctx, p, outer, 1+caller, func(w *Worker, lo, hi int) (int, error) {
					total := 0
					for j := lo; j < hi; j++ {
						v, err := MapReduce(ctx, w.Pool(), inner, 1+j%4, func(w *Worker, lo, hi int) (int, error) {
							s := 0
							for k := lo; k < hi; k++ {
								base := (j*inner + k) * third
								if k%3 != 0 {
									hits[base].Add(1)
									s++
									continue
								}
								v, err := MapReduce(ctx, w.Pool(), third, 2, func(_ *Worker, lo, hi int) (int, error) {
									for m := lo; m < hi; m++ {
										hits[base+m].Add(1)
									}
									return hi - lo, nil
								}, sum)
								if err != nil {
									return 0, err
								}
								s += v
							}
							return s, nil
						}, sum)
						if err != nil {
							return 0, err
						}
						total += v
					}
					return total, nil
				}, sum)
				want := 0
				for j := range outer {
					for k := range inner {
						base := (j*inner + k) * third
						span := 1
						if k%3 == 0 {
							span = third
						}
						want += span
						for m := range span {
							if h := hits[base+m].Load(); h != 1 {
								pr.add("caller %d: index %d/%d/%d mapped %d times", caller, j, k, m, h)
							}
						}
					}
				}
				if err != nil || got != want {
					pr.add("caller %d: nested MapReduce = %d, %v; want %d", caller, got, err, want)
				}
			}()
		}
		within(t, hangBound, "nested MapReduce", wg.Wait)
		pr.report(t)
	})
}

// Shutdown (from outside, with tiny deadlines) and Close (from inside a
// map) during MapReduce calls made from outside and from inside tasks:
// every call returns; one that returns nil mapped every index once with
// the right result; one that fails says why (ErrAbandoned or ErrClosed)
// and mapped no index twice; none returns with a map still running.
func mapReduceShutdown(t *testing.T) {
	iters := 30
	if testing.Short() {
		iters = 8
	}
	specs := []string{"1w", "2x1", "2x2", "4x1", ""}
	budget := time.Now().Add(4 * time.Second)
	for iter := 0; iter < iters && time.Now().Before(budget); iter++ {
		spec := specs[iter%len(specs)]
		var opts []Option
		if iter%3 != 1 {
			opts = append(opts, WithCrossNodeLoops())
		}
		p := newTestPool(t, reuseOpts(spec, opts...)...)
		var pr problems
		var ok, failed atomic.Int64
		verify := func(c *chunkCheck, res []int, err error, how string) {
			if err == nil {
				ok.Add(1)
				c.check(res, err, how)
				return
			}
			failed.Add(1)
			if r := c.running.Load(); r != 0 {
				pr.add("%s: returned %v with %d maps running", how, err, r)
			}
			if !errors.Is(err, ErrAbandoned) && !errors.Is(err, ErrClosed) {
				pr.add("%s: err %v, want nil, ErrAbandoned or ErrClosed", how, err)
			}
			for i := range c.mapped {
				if got := c.mapped[i].Load(); got > 1 {
					pr.add("%s: index %d mapped %d times", how, i, got)
				}
			}
		}
		const n, grain = 600, 3
		closeAt := int64(-1)
		if iter%2 == 1 {
			closeAt = int64(20 + iter*7) // a map closes intake from inside
		}
		var maps atomic.Int64
		each := func(w *Worker, lo, hi int) error {
			spinFor(3 * time.Microsecond)
			if maps.Add(1) == closeAt {
				if err := w.Pool().Close(); !errors.Is(err, ErrInsideTask) {
					pr.add("Close from a map = %v, want ErrInsideTask", err)
				}
			}
			return nil
		}
		stop := make(chan struct{})
		var callers sync.WaitGroup
		for k := range 3 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					c := newChunkCheck(n, grain, &pr)
					if k == 0 {
						res, err := MapReduce(context.Background(), p, n, grain, c.mapper(each), combineLists)
						verify(c, res, err, "outside")
						if errors.Is(err, ErrClosed) {
							return
						}
						continue
					}
					fin := make(chan struct{})
					err := p.Submit(context.Background(), func(w *Worker) {
						defer close(fin)
						res, err := MapReduce(context.Background(), w.Pool(), n, grain, c.mapper(each), combineLists)
						verify(c, res, err, "inside")
					})
					if err != nil {
						return
					}
					select {
					case <-fin:
					case <-p.done:
						// Every worker has ended: the task ran (fin is
						// closed) or the Shutdown dropped it before it
						// started.
						if !isDone(fin) {
							return
						}
					case <-time.After(hangBound):
						pr.add("iter %d: MapReduce inside a task did not return", iter)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(iter%4) * 500 * time.Microsecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iter%3)*200*time.Microsecond)
		within(t, hangBound, "Shutdown", func() { _, _ = p.Shutdown(ctx) })
		cancel()
		close(stop)
		within(t, hangBound, "MapReduce callers", callers.Wait)
		pr.report(t)
		if t.Failed() {
			t.Fatalf("iter %d (%s): %d calls returned nil, %d failed", iter, specName(spec), ok.Load(), failed.Load())
		}
	}
}

// A grain of math.MaxInt (or any grain within n of it) asks for one
// chunk, [0, n). Counted as (n + grain - 1) / grain the chunks overflowed
// there: with grain math.MaxInt the count came out 0, no helper was made,
// and MapReduce blocked for ever; with math.MaxInt - 5 it came out -1 and
// make panicked in the caller. MapReduce now clamps grain to n and counts
// 1 + (n-1)/grain.
func mapReduceHugeGrain(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	for _, grain := range []int{math.MaxInt / 2, math.MaxInt - 5, math.MaxInt} {
		var got int
		var err error
		var r any
		within(t, time.Second, fmt.Sprintf("MapReduce(n 10, grain %d)", grain), func() {
			r = recovered(func() {
				got, err = MapReduce(context.Background(), p, 10, grain, func(_ *Worker, lo, hi int) (int, error) {
					return hi - lo, nil
				}, func(a, b int) int { return a + b })
			})
		})
		if r != nil || got != 10 || err != nil {
			t.Errorf("MapReduce(n 10, grain %d) = %d, %v (panic: %v); want 10, nil", grain, got, err, r)
		}
	}
}

// TestMapReduceAdversarial runs the adversarial cases of MapReduce, one subtest
// each: races and load meant to break what the tests above assert.
func TestMapReduceAdversarial(t *testing.T) {
	t.Run("ChunksOnce", mapReduceChunksOnce)
	t.Run("CrossNodeClaims", mapReduceCrossNodeClaims)
	t.Run("Failures", mapReduceFailures)
	t.Run("Nested", mapReduceNested)
	t.Run("Shutdown", mapReduceShutdown)
	t.Run("HugeGrain", mapReduceHugeGrain)
}

// chunkCheck is one MapReduce call's record: how often each index was
// mapped, and how many maps are running.
type chunkCheck struct {
	n, grain int
	mapped   []atomic.Int32
	running  atomic.Int32
	nodeOf   []atomic.Int32 // the domain index that mapped each chunk, +1
	pr       *problems
}

func newChunkCheck(n, grain int, pr *problems) *chunkCheck {
	g := grain
	if g <= 0 {
		g = 1
	}
	return &chunkCheck{n: n, grain: grain, mapped: make([]atomic.Int32, n), nodeOf: make([]atomic.Int32, (n+g-1)/g), pr: pr}
}

// mapper maps [lo, hi) to the list of its one chunk index, after
// checking the chunk's bounds, and calls each (if not nil) first.
func (c *chunkCheck) mapper(each func(w *Worker, lo, hi int) error) func(w *Worker, lo, hi int) ([]int, error) {
	return func(w *Worker, lo, hi int) ([]int, error) {
		c.running.Add(1)
		defer c.running.Add(-1)
		if c.grain > 0 {
			if lo%c.grain != 0 || hi != min(lo+c.grain, c.n) {
				c.pr.add("n %d grain %d: chunk [%d, %d)", c.n, c.grain, lo, hi)
			}
			c.nodeOf[lo/c.grain].Store(int32(w.domain.index) + 1)
		}
		for i := lo; i < hi; i++ {
			if got := c.mapped[i].Add(1); got != 1 {
				c.pr.add("n %d grain %d: index %d mapped %d times", c.n, c.grain, i, got)
			}
		}
		if each != nil {
			if err := each(w, lo, hi); err != nil {
				return nil, err
			}
		}
		return []int{lo}, nil
	}
}

// combineLists appends b to a: the result lists the chunks in the order
// combine met them.
func combineLists(a, b []int) []int { return append(a, b...) }

// check verifies a MapReduce that returned res, err with no error
// expected: every index mapped once, chunks combined in order, no map
// still running.
func (c *chunkCheck) check(res []int, err error, how string) {
	if r := c.running.Load(); r != 0 {
		c.pr.add("%s: MapReduce(n %d, grain %d) returned with %d maps running", how, c.n, c.grain, r)
	}
	if err != nil {
		c.pr.add("%s: MapReduce(n %d, grain %d) = %v", how, c.n, c.grain, err)
		return
	}
	for i := range c.mapped {
		if got := c.mapped[i].Load(); got != 1 {
			c.pr.add("%s: MapReduce(n %d, grain %d): index %d mapped %d times", how, c.n, c.grain, i, got)
			return
		}
	}
	if c.grain <= 0 {
		return
	}
	chunks := (c.n + c.grain - 1) / c.grain
	if len(res) != chunks {
		c.pr.add("%s: MapReduce(n %d, grain %d) combined %d chunks, want %d", how, c.n, c.grain, len(res), chunks)
		return
	}
	for k, lo := range res {
		if lo != k*c.grain {
			c.pr.add("%s: MapReduce(n %d, grain %d): chunk %d of the result starts at %d", how, c.n, c.grain, k, lo)
			return
		}
	}
}

// onEachLayout runs body on a pool of each layout in specs (see
// reuseSpecs), with and without WithCrossNodeLoops, each as a subtest.
func onEachLayout(t *testing.T, specs []string, body func(t *testing.T, p *Pool, strict bool)) {
	for _, spec := range specs {
		for _, strict := range []bool{false, true} {
			name := specName(spec)
			var opts []Option
			if strict {
				name += "/strict"
			} else {
				opts = append(opts, WithCrossNodeLoops())
			}
			t.Run(name, func(t *testing.T) {
				p := newTestPool(t, reuseOpts(spec, opts...)...)
				defer p.Close()
				body(t, p, strict)
			})
		}
	}
}

// A compute-bound loop: the sum of square roots over 2^22 indexes.
func BenchmarkReduce(b *testing.B) {
	const n = 4 << 20
	sumRange := func(lo, hi int) float64 {
		s := 0.0
		for i := lo; i < hi; i++ {
			s += math.Sqrt(float64(i))
		}
		return s
	}
	b.Run("pool", func(b *testing.B) {
		p := benchPool(b)
		partial := make([]float64, len(p.workers)*8) // one slot per worker, padded
		for b.Loop() {
			clear(partial)
			_ = p.ParallelFor(context.Background(), n, 0, func(w *Worker, lo, hi int) error {
				partial[w.ID()*8] += sumRange(lo, hi)
				return nil
			})
		}
	})
	b.Run("goroutines", func(b *testing.B) {
		parts := len(benchPool(b).workers)
		partial := make([]float64, parts*8)
		for b.Loop() {
			var mu sync.Mutex
			chunks(n, parts, func(lo, hi int) {
				s := sumRange(lo, hi)
				mu.Lock()
				partial[0] += s
				mu.Unlock()
			})
		}
	})
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			_ = sumRange(0, n)
		}
	})
}

// MapReduce keeps only the partials mapped and not yet folded, a window
// of chunks in flight per node, so a chunk count no slice could hold
// runs like any other: over 1<<36 chunks of one index it runs until ctx
// is done, and returns ctx's error soon after, having allocated a few
// megabytes at most. Allocating a partial per chunk up front ended the
// process (runtime: out of memory) at 1<<36 chunks, and panicked with
// makeslice: len out of range at math.MaxInt.
func TestMapReduceHugeChunkCountsInBoundedMemory(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	for _, n := range []int{1 << 36, math.MaxInt} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var err error
			within(t, hangBound, fmt.Sprintf("MapReduce(n %d, grain 1) with a 50ms context", n), func() {
				_, err = MapReduce(ctx, p, n, 1, func(_ *Worker, lo, hi int) (int, error) { return hi - lo, nil },
					func(a, b int) int { return a + b })
			})
			runtime.ReadMemStats(&after)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("MapReduce = %v, want ctx's error", err)
			}
			const bound = 16 << 20
			if grew := after.TotalAlloc - before.TotalAlloc; grew > bound {
				t.Errorf("MapReduce allocated %d bytes, want at most %d: its memory grows with the chunks", grew, bound)
			}
		})
	}
}

// The partials are combined in chunk order inside each node's block, and
// the nodes' results in node order, whatever order the chunks finish in:
// string concatenation, which is associative but not commutative, gives
// the chunks in order, on one node and several, with chunks that finish
// out of order, and with a first chunk that holds up the fold until every
// other chunk of its window has been mapped (no chunk past the window
// starts meanwhile, and the workers that stopped for it go on after it).
func TestMapReduceCombinesInChunkOrder(t *testing.T) {
	for _, pc := range append(edgePools, struct {
		name string
		opts []Option
	}{"3-workers", []Option{WithWorkers(3)}}) {
		t.Run(pc.name, func(t *testing.T) {
			p := newTestPool(t, pc.opts...)
			defer p.Close()
			const n = 5000
			var want strings.Builder
			for c := range n {
				fmt.Fprintf(&want, "%d,", c)
			}
			concat := func(a, b string) string { return a + b }
			// Out of order: every seventh chunk takes longer.
			got, err := MapReduce(context.Background(), p, n, 1, func(_ *Worker, lo, _ int) (string, error) {
				if lo%7 == 0 {
					spinFor(5 * time.Microsecond)
				}
				return fmt.Sprintf("%d,", lo), nil
			}, concat)
			if err != nil || got != want.String() {
				t.Errorf("MapReduce with chunks out of order = %.60q…, %v; want the chunks in order", got, err)
			}

			// A first chunk that waits until the rest of its window has
			// started, on the first node's block: another worker of that
			// node must start them.
			if len(p.domains[0].workers) < 2 {
				return
			}
			window := mapWindow(p.sched)
			first := p.Split(n)[0]
			if first.Hi-first.Lo <= window {
				t.Fatalf("the first node's block has %d chunks, not more than the window (%d)", first.Hi-first.Lo, window)
			}
			var started atomic.Int64
			var firstDone atomic.Bool
			release := make(chan struct{})
			var past atomic.Int64 // chunks of the first block past the window started before chunk 0 returned
			got, err = MapReduce(context.Background(), p, n, 1, func(_ *Worker, lo, _ int) (string, error) {
				if lo < first.Hi {
					if lo >= window && !firstDone.Load() {
						past.Add(1)
					}
					if started.Add(1) == int64(window) {
						close(release)
					}
					if lo == 0 {
						// The window is full: give the other workers time
						// to start a chunk past it, if they may.
						<-release
						eventually(20*time.Millisecond, func() bool { return past.Load() > 0 })
						firstDone.Store(true)
					}
				}
				return fmt.Sprintf("%d,", lo), nil
			}, concat)
			if err != nil || got != want.String() {
				t.Errorf("MapReduce with a slow first chunk = %.60q…, %v; want the chunks in order", got, err)
			}
			if k := past.Load(); k > 0 {
				t.Errorf("%d chunks past the window of %d started while the first chunk was not folded", k, window)
			}
		})
	}
}

// combine's panic comes back as a *PanicError, as the mapper's does, not
// raw on the caller's goroutine.
func TestMapReduceCombinePanicIsAPanicError(t *testing.T) {
	for _, pc := range edgePools {
		t.Run(pc.name, func(t *testing.T) {
			p := newTestPool(t, pc.opts...)
			defer p.Close()
			for _, n := range []int{2, 1000} {
				var err error
				r := recovered(func() {
					_, err = MapReduce(context.Background(), p, n, 1, func(_ *Worker, lo, hi int) (int, error) { return hi - lo, nil },
						func(a, b int) int { panic("combine broke") })
				})
				var perr *PanicError
				if r != nil || !errors.As(err, &perr) || perr.Value != "combine broke" {
					t.Errorf("n %d: MapReduce with a panicking combine: panic %v, error %v; want a *PanicError of its value", n, r, err)
				}
			}
		})
	}
}
