package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
								body := func(lo, hi int) error {
									if log.add(lo, hi) >= edgeStopAfter && n > edgeSmall {
										cancel()
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
