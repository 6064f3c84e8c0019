package pool

import (
	"context"
	"iter"
	"runtime"
	"runtime/debug"
	"runtime/trace"
	"time"

	"github.com/numapool/numapool/pool/internal/fold"
	"github.com/numapool/numapool/pool/internal/goruntime"
	"github.com/numapool/numapool/pool/internal/observe"
)

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
	mustPool(p, "NewPerWorker")
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
// chunk order. The chunks are split over the nodes in contiguous blocks,
// as ParallelFor splits indexes; each node's block is folded from its
// first chunk, combine(combine(p0, p1), p2) and so on, and the nodes'
// results are folded the same way in node order. The chunks and the
// blocks depend only on n, grain and the pool, never on which worker ran
// what, so a floating-point sum comes out the same on every run; a combine
// that is associative (a sum, string concatenation, a matrix product)
// gives the left fold of all the partials in chunk order.
//
// combine may change and return its first argument; it runs on the
// workers as partials arrive, one call at a time per node. The partials
// held at any time are those mapped and not yet folded: at most a window
// of chunks per node (mapWindow), so memory does not grow with the number
// of chunks, up to math.MaxInt of them. A worker does not start a chunk
// past the window while an earlier one of its node is still mapping; it
// goes back to the pool, and comes back once the fold has moved on.
//
// Each node's workers take its chunks in order, one at a time (OpenMP's
// schedule(dynamic) inside each node): a failure early in the range stops
// the job early. Under WithCrossNodeLoops a node whose block is done, if
// crossNodeAfter has passed since the call, helps the others with theirs.
// The first error of a map in time, or its panic or combine's (as a
// *PanicError), or ctx's error, stops handing out chunks and is returned
// with the zero T, after every map already running has returned. Called
// from inside one of the pool's tasks it runs chunks itself while it
// waits (pass w.Pool()). n <= 0 returns the zero T.
func MapReduce[T any](ctx context.Context, p *Pool, n, grain int,
	mapper func(w *Worker, lo, hi int) (T, error), combine func(a, b T) T) (T, error) {
	var zero T
	mustPool(p, "MapReduce")
	if mapper == nil || combine == nil {
		panic("pool: MapReduce with a nil function")
	}
	if n <= 0 {
		return zero, nil
	}
	if grain <= 0 {
		grain = max(1, n/(16*len(p.workers)))
	}
	grain = min(grain, n)     // a chunk is at most the whole range
	chunks := 1 + (n-1)/grain // not (n+grain-1)/grain, which can pass math.MaxInt
	l, err := mapChunks(ctx, p.sched, chunks, func(w *Worker, c int) (T, error) {
		// c < chunks, so lo = c*grain <= n-1. The end is lo plus what is
		// left up to grain, not min((c+1)*grain, n): (c+1)*grain can pass
		// math.MaxInt in the last chunk.
		lo := c * grain
		return mapper(w, lo, lo+min(grain, n-lo))
	}, combine)
	runtime.KeepAlive(p) // the caller's Pool stays open while it waits
	if err != nil {
		return zero, err
	}
	return l.result()
}

// mapWindow is how many chunks of one node's block may be mapped and not
// yet folded: 16 per worker of the pool, the chunks a grain <= 0 makes
// for the whole pool, so a MapReduce with the default grain never waits
// for its window, and a chunk that takes as long as sixteen others holds
// up no worker. Workers of other nodes may take a node's chunks (under
// WithCrossNodeLoops), so the window counts every worker.
func mapWindow(p *sched) int { return 16 * len(p.workers) }

// chunkLoop maps chunks [0, chunks) claimed in order and folds their
// partials: each node domain's block of chunks has a cursor, and helper
// tasks, one per worker of the domain, queued in its pinned shard, claim
// the next chunk until the block is done, then chunks of other domains'
// blocks that have waited crossNodeAfter. The loop is done when every
// helper has returned: forState.remaining counts helpers, not chunks.
//
// The window (fold.Window). A block keeps the partials of the chunks
// mapped and not yet folded in a ring of mapWindow slots (fewer for a short block), chunk c
// at c mod the ring's length: a claim is refused while the chunk claimed
// would be a ring's length past the first one not folded, whose slot it
// would take. A helper refused by its own block's window leaves (parks)
// and is counted in the block's parked; whoever next advances the fold of
// that block starts that many helpers again. The claim that parks and the
// fold's read of parked take the block's lock, so a helper parks only
// while the chunk the fold waits for is still mapping, and the helper
// mapping it, which holds the loop open, restarts it.
//
// The fold. Whoever stores the partial that the block's fold waits for
// becomes the block's folder (folding, under the lock) and combines every
// partial in order while the next one is there, outside the lock, so that
// the block's other workers store theirs meanwhile; only the folder
// touches acc. The caller folds the blocks' results once every helper has
// returned.
type chunkLoop[T any] struct {
	forState
	mapper  func(w *Worker, c int) (T, error)
	combine func(a, b T) T
	blocks  []padded[chunkBlock[T]] // per domain; a line each, as each domain's workers write its own
}

type chunkBlock[T any] struct {
	fold.Window[T]
	since time.Time // when the block was queued
}

// chunkHelper is a helper task of a chunkLoop, for the domain it runs in.
type chunkHelper[T any] struct {
	task
	l *chunkLoop[T]
}

func (h *chunkHelper[T]) run(w *Worker) {
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
		i, c, ok := l.claim(w)
		if !ok {
			break
		}
		var err error
		restart := 0
		if perr := catch(w, func(w *Worker) {
			var v T
			if v, err = l.mapper(w, c); err == nil {
				restart = l.put(i, c, v)
			}
		}); perr != nil {
			err = perr
		}
		if err != nil {
			l.fail(err)
		}
		l.restart(w, i, restart)
	}
	exited = false
}

func (h *chunkHelper[T]) drop(cause error) {
	h.l.fail(cause)
	h.l.finish(1)
}

// claim returns the next chunk for w and its block: from its own
// domain's block, else from a block of another domain that has waited
// crossNodeAfter. Refused by its own block's window, w's helper parks.
func (l *chunkLoop[T]) claim(w *Worker) (block, c int, ok bool) {
	own := w.domain.index
	if c, ok, _ := l.blocks[own].v.Take(false); ok {
		return own, c, true
	}
	if w.pool.cfg.crossLoops {
		for i := range l.blocks {
			b := &l.blocks[i].v
			if i != own && time.Since(b.since) >= crossNodeAfter {
				if c, ok, _ := b.Take(false); ok {
					w.c.ChunksCrossNode++
					return i, c, true
				}
			}
		}
	}
	// Again, parking at a full window: the fold may have moved on since.
	c, ok, _ = l.blocks[own].v.Take(true)
	return own, c, ok
}

// put stores chunk c's partial v in block i and folds what it can
// (fold.Window.Put); it returns how many parked helpers of the block to
// start again.
func (l *chunkLoop[T]) put(i, c int, v T) (restart int) {
	return l.blocks[i].v.Put(c, v, l.combine) // a panic in combine fails the loop: nobody folds the block again
}

// restart starts k helpers for block i's domain again, unless the loop
// has stopped. The caller is a live helper, so the loop cannot finish
// while it adds them.
func (l *chunkLoop[T]) restart(w *Worker, i, k int) {
	if k == 0 || l.stop.Load() {
		return
	}
	l.remaining.Add(int64(k))
	for range k {
		l.start(w, l.pool.domains[i], l.helper(i), 1)
	}
}

// helper returns a new helper task for domain i.
func (l *chunkLoop[T]) helper(i int) *task {
	h := &chunkHelper[T]{task: task{home: strictHome(i), labels: l.labels}, l: l}
	h.job = h
	return &h.task
}

// result folds the blocks' results in domain order, once every helper
// has returned; combine's panic comes back as a *PanicError.
func (l *chunkLoop[T]) result() (acc T, err error) {
	returned := false
	defer func() {
		if !returned {
			r := recover()
			if r == nil && goruntime.Goexiting() {
				return // runtime.Goexit in combine ends the caller, as it would without the pool
			}
			var zero T
			acc, err = zero, &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	first := true
	for i := range l.blocks {
		v, ok := l.blocks[i].v.Result()
		if !ok {
			continue // an empty block
		}
		if first {
			acc, first = v, false
		} else {
			acc = l.combine(acc, v)
		}
	}
	returned = true
	return acc, nil
}

// mapChunks maps and folds [0, chunks) as a chunkLoop and returns the
// loop, or its first error. From inside one of the pool's tasks the
// caller runs helpers while it waits.
func mapChunks[T any](ctx context.Context, p *sched, chunks int, mapper func(w *Worker, c int) (T, error), combine func(a, b T) T) (*chunkLoop[T], error) {
	ctx = orBackground(ctx)
	w := p.workerOf()
	if p.state.Load() != running && w == nil {
		return nil, ErrClosed
	}
	ctx, end := observe.Task(ctx, "numapool.MapReduce")
	if end != nil {
		defer end()
	}
	l := &chunkLoop[T]{forState: forState{pool: p, ctx: ctx, done: make(chan struct{}), labels: p.labelsOf(ctx)},
		mapper: mapper, combine: combine, blocks: make([]padded[chunkBlock[T]], len(p.domains))}
	// A caller from outside a pool of one node runs a helper on a seat,
	// as ParallelFor's does (join.go, parallel.go).
	var seat *Worker
	if w == nil && chunks > 0 {
		if seat = p.joinLoop(ctx); seat != nil {
			defer seat.leaveLoop()
		}
	}
	if seat != nil {
		l.finished.w = seat
	} else {
		l.finished.w = w
	}
	var helpers []*task
	perDomain := make([]int, len(p.domains)) // helpers per domain
	now := time.Now()
	window := mapWindow(p)
	for i, b := range p.split(chunks) {
		blk := &l.blocks[i].v
		blk.Init(b.Lo, b.Hi, window)
		blk.since = now
		perDomain[i] = min(int(p.domains[i].size.Load()), b.Hi-b.Lo)
		for range perDomain[i] {
			helpers = append(helpers, l.helper(i))
		}
	}
	l.remaining.Store(int64(len(helpers)))
	var mine *task // the seat's helper
	if seat != nil {
		mine, helpers = helpers[0], helpers[1:]
		perDomain[0]--
	}
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
	if seat != nil {
		seat.run(mine.item())
		w = seat
	}
	return l, l.wait(w)
}
