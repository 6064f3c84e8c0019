package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
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
