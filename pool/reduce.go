package pool

import (
	"context"
	"iter"
	"runtime"
	"runtime/trace"
	"sync/atomic"
	"time"
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
	pool  *sched
	cells []padded[T]
}

// NewPerWorker returns a PerWorker of p with every value set by init, or
// left zero when init is nil.
func NewPerWorker[T any](p *Pool, init func() T) *PerWorker[T] {
	s := &PerWorker[T]{pool: p.sched, cells: make([]padded[T], len(p.workers))}
	if init != nil {
		for i := range s.cells {
			s.cells[i].v = init()
		}
	}
	return s
}

// Get returns w's value. w must be a worker of the PerWorker's pool: nil,
// or a worker of another pool, panics.
func (s *PerWorker[T]) Get(w *Worker) *T {
	if w == nil || w.pool != s.pool {
		panic("pool: PerWorker.Get needs a worker of the pool the PerWorker was made for (got nil or another pool's)")
	}
	return &s.cells[w.id].v
}

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
// combine may change and return its first argument. The chunks are split
// over the nodes in contiguous blocks, as ParallelFor splits indexes, and
// each node's workers take its chunks in order, one at a time (OpenMP's
// schedule(dynamic) inside each node): a failure early in the range stops
// the job early. Under WithCrossNodeLoops a node whose block is done, if
// crossNodeAfter has passed since the call, helps the others with theirs. The first error of a map in time, or its panic, or
// ctx's error, stops handing out chunks and is returned with the zero T,
// after every map already running has returned. Called from inside one of
// the pool's tasks it runs chunks itself while it waits (pass w.Pool()).
// n <= 0 returns the zero T.
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
	grain = min(grain, n)        // a chunk is at most the whole range
	chunks := 1 + (n-1)/grain    // not (n+grain-1)/grain, which can pass math.MaxInt
	partial := make([]T, chunks) // each written once: no need to pad
	err := p.claimChunks(ctx, chunks, func(w *Worker, c int) error {
		// c < chunks, so lo = c*grain <= n-1. The end is lo plus what is
		// left up to grain, not min((c+1)*grain, n): (c+1)*grain can pass
		// math.MaxInt in the last chunk.
		lo := c * grain
		v, err := mapper(w, lo, lo+min(grain, n-lo))
		partial[c] = v
		return err
	})
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

// chunkLoop runs body over chunks [0, chunks) claimed in order: each node
// domain's block of chunks has a cursor, and helper tasks, one per worker
// of the domain, queued in its pinned shard, claim the next chunk until
// the block is done, then chunks of other domains' blocks that have waited
// crossNodeAfter. The loop is done when every helper has returned:
// forState.remaining counts helpers, not chunks.
type chunkLoop struct {
	forState
	each   func(w *Worker, c int) error
	blocks []padded[chunkBlock] // per domain; a line each, as each domain's workers write its own
}

type chunkBlock struct {
	// next is the next chunk to claim. Unsigned, because a claim adds 1
	// before it compares: once the block is done every claimer running
	// at that moment pushes next past end by one, and with end near
	// math.MaxInt a signed next would wrap to a negative chunk that
	// passes the comparison. Claims run on workers, at most one at a
	// time on each, so next ends at most end + workers, far from 1<<64.
	next  atomic.Uint64
	end   uint64
	since time.Time // when the block was queued
}

// chunkHelper is a helper task of a chunkLoop, for the domain it runs in.
type chunkHelper struct {
	task
	l *chunkLoop
}

func (h *chunkHelper) run(w *Worker) {
	l := h.l
	if trace.IsEnabled() {
		defer w.traceRegion(l.ctx).End()
	}
	exited := true // until the loop below ends: a chunk ended by runtime.Goexit
	defer func() {
		if exited {
			l.fail(ErrGoexit)
		}
		l.finish(1)
	}()
	for !l.stopped() {
		c, ok := l.claim(w)
		if !ok {
			break
		}
		var err error
		if perr := catch(w, func(w *Worker) { err = l.each(w, c) }); perr != nil {
			err = perr
		}
		if err != nil {
			l.fail(err)
		}
	}
	exited = false
}

func (h *chunkHelper) drop(cause error) {
	h.l.fail(cause)
	h.l.finish(1)
}

// claim returns the next chunk for w: from its own domain's block, else
// from a block of another domain that has waited crossNodeAfter.
func (l *chunkLoop) claim(w *Worker) (int, bool) {
	if c, ok := l.blocks[w.domain.index].v.take(); ok {
		return c, true
	}
	if !w.pool.cfg.crossLoops {
		return 0, false
	}
	for i := range l.blocks {
		b := &l.blocks[i].v
		if i != w.domain.index && time.Since(b.since) >= crossNodeAfter {
			if c, ok := b.take(); ok {
				w.c.ChunksCrossNode++
				return c, true
			}
		}
	}
	return 0, false
}

// take claims the block's next chunk, if any is left.
func (b *chunkBlock) take() (int, bool) {
	if b.next.Load() >= b.end {
		return 0, false
	}
	if c := b.next.Add(1) - 1; c < b.end {
		return int(c), true
	}
	return 0, false
}

// claimChunks runs each over [0, chunks) as a chunkLoop and returns the
// first error. From inside one of the pool's tasks the caller runs
// helpers while it waits.
func (p *sched) claimChunks(ctx context.Context, chunks int, each func(w *Worker, c int) error) error {
	ctx = orBackground(ctx)
	w := p.workerOf()
	if p.state.Load() != running && w == nil {
		return ErrClosed
	}
	ctx, end := traceTask(ctx, "numapool.MapReduce")
	if end != nil {
		defer end()
	}
	l := &chunkLoop{forState: forState{pool: p, ctx: ctx, done: make(chan struct{}), labels: p.labelsOf(ctx)}, each: each,
		blocks: make([]padded[chunkBlock], len(p.domains))}
	l.finished.w = w
	var helpers []*task
	perDomain := make([]int, len(p.domains)) // helpers per domain
	now := time.Now()
	for i, b := range p.split(chunks) {
		blk := &l.blocks[i].v
		blk.next.Store(uint64(b.Lo))
		blk.end, blk.since = uint64(b.Hi), now
		perDomain[i] = min(len(p.domains[i].workers), b.Hi-b.Lo)
		for range perDomain[i] {
			h := &chunkHelper{task: task{home: strictHome(i), labels: l.labels}, l: l}
			h.job = h
			helpers = append(helpers, &h.task)
		}
	}
	l.remaining.Store(int64(len(helpers)))
	for _, t := range helpers {
		l.start(w, p.domains[t.home.domain()], t, 1)
	}
	if w == nil {
		// Each domain's first helper wakes a worker, which wakes no
		// other while it searches: wake the rest from here.
		for i, n := range perDomain {
			p.idle.wakeMore(i, n-1)
		}
	}
	return l.wait(w)
}
