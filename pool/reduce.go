package pool

import (
	"context"
	"iter"
	"runtime"
)

// cacheLine is the padding between values that different workers write:
// 128 bytes covers the adjacent-line prefetcher of x86 and the 128-byte
// lines of some arm64 parts.
const cacheLine = 128

// padded is a T with a cache line of padding on each side, so that two
// padded values in a slice never share a line.
type padded[T any] struct {
	_ [cacheLine]byte
	v T
	_ [cacheLine]byte // the last value of a slice has a line of its own too
}

// PerWorker holds one T per worker of a pool, each on cache lines of its
// own, so that workers updating their own value do not slow each other
// down (a slice of plain values indexed by Worker.ID puts several on one
// line). Use it for state a task keeps per worker: partial sums, a
// scratch buffer, a map to merge at the end. A worker's value must only
// be used by tasks running on that worker, or after the work is done.
type PerWorker[T any] struct {
	cells []padded[T]
}

// NewPerWorker returns a PerWorker of p with every value set by init, or
// left zero when init is nil.
func NewPerWorker[T any](p *Pool, init func() T) *PerWorker[T] {
	s := &PerWorker[T]{cells: make([]padded[T], len(p.workers))}
	if init != nil {
		for i := range s.cells {
			s.cells[i].v = init()
		}
	}
	return s
}

// Get returns w's value.
func (s *PerWorker[T]) Get(w *Worker) *T { return &s.cells[w.id].v }

// All yields each worker's ID and value, in ID order.
func (s *PerWorker[T]) All() iter.Seq2[int, *T] {
	return func(yield func(int, *T) bool) {
		for i := range s.cells {
			if !yield(i, &s.cells[i].v) {
				return
			}
		}
	}
}

// MapReduce splits [0, n) into chunks of grain indexes (the last one
// shorter; grain <= 0 picks one from n and the pool's size), maps each
// chunk to a partial result in parallel, and combines the partials in
// chunk order: combine(combine(p0, p1), p2) and so on. The chunks depend
// only on n, grain and the pool, never on which worker ran what, so a
// floating-point sum comes out the same on every run.
//
// combine may change and return its first argument. The chunks are
// spread as ParallelFor spreads indexes (node blocks first). The first
// error of a map in time (not in chunk order, see ParallelForErr), or its
// panic, or ctx's error, stops handing out chunks and is returned with the
// zero T, after every map already running has returned. Called from
// inside one of the pool's tasks it runs chunks itself while it waits
// (pass w.Pool()). n <= 0 returns the zero T.
func MapReduce[T any](ctx context.Context, p *Pool, n, grain int,
	mapper func(w *Worker, lo, hi int) (T, error), combine func(a, b T) T) (T, error) {
	var zero T
	if mapper == nil || combine == nil {
		panic("pool: MapReduce with a nil function")
	}
	if n <= 0 {
		return zero, nil
	}
	if grain <= 0 {
		grain = max(1, n/(16*len(p.workers)))
	}
	chunks := (n + grain - 1) / grain
	partial := make([]T, chunks) // each written once: no need to pad
	body := func(w *Worker, clo, chi int) error {
		for c := clo; c < chi; c++ {
			v, err := mapper(w, c*grain, min((c+1)*grain, n))
			if err != nil {
				return err
			}
			partial[c] = v
		}
		return nil
	}
	err := p.parallelFor(ctx, nil, chunks, 1, body)
	runtime.KeepAlive(p) // the caller's Pool stays open while it waits
	if err != nil {
		return zero, err
	}
	acc := partial[0]
	for _, v := range partial[1:] {
		acc = combine(acc, v)
	}
	return acc, nil
}
