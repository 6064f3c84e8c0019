package pool

import (
	"context"
	"math/bits"
	"runtime"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/pool/internal/observe"
)

// ParallelFor calls body over [0, n) in blocks [lo, hi) and returns when
// every index is done. The range is first split over the nodes in
// contiguous blocks proportional to each node's capacity (Split), the
// same way on every call with the same n, and each node's block goes to
// that node (and stays there at the top level); inside a node a worker
// runs its block in grain-sized pieces and offers the upper half of what
// is left whenever its queue is empty, so idle workers of the node steal
// halves (lazy binary splitting). No piece leaves its node, so data
// first touched by a ParallelFor over n is, in every later ParallelFor
// over n, processed by the node that touched it: the first-touch
// pattern. Under WithCrossNodeLoops a node that has run dry helps one
// whose piece has waited crossNodeAfter: its worker takes one
// grain-sized bite from the end (a tail-end steal) and sends the rest
// home.
//
// grain <= 0 picks one from n and the number of workers. The first error
// of body, panic (as a *PanicError) or ctx's error stops handing out
// blocks and is returned, after every body already running has returned.
// "First" is first in time, not in index order: the range is worked on
// from several places at once, so when several indexes fail, say in the
// error which one it was. A nil ctx is context.Background; the body must
// not be nil. From one of the pool's tasks the calling worker runs other
// tasks while it waits.
func (p *Pool) ParallelFor(ctx context.Context, n, grain int, body func(w *Worker, lo, hi int) error) error {
	mustPool(p, "ParallelFor")
	err := p.parallelFor(ctx, n, grain, body)
	runtime.KeepAlive(p) // the caller's Pool stays open while it waits
	return err
}

// NodeBlock is the part of a ParallelFor range given to one node.
type NodeBlock struct {
	Node   int // OS node ID
	Lo, Hi int
}

// Split returns how ParallelFor over n divides the range between nodes:
// contiguous blocks, in node order, proportional to each node's capacity
// (the sum of its workers' topology.CPU.Capacity: its worker count where
// the CPUs are all alike; the block of the first i nodes ends at n *
// their capacity / the pool's, rounded down), covering [0, n) exactly
// for every n up to math.MaxInt; for n <= 0 every block is empty. It
// depends only on n and the pool's workers that are not retired
// (Resize): a loop splits by those at its start.
func (p *Pool) Split(n int) []NodeBlock {
	mustPool(p, "Split")
	return p.split(n)
}

func (p *sched) split(n int) []NodeBlock {
	n = max(n, 0) // a loop over n <= 0 runs nothing
	out := make([]NodeBlock, 0, len(p.domains))
	// One reading of the capacities, which a Resize changes: a block
	// past the total would overflow Div64.
	caps := make([]uint64, len(p.domains))
	var total uint64
	for i, d := range p.domains {
		caps[i] = d.capacity.Load()
		total += caps[i]
	}
	var done uint64
	lo := 0
	for i, d := range p.domains {
		done += caps[i]
		// n * done in 128 bits: it does not fit in 64 when n is near
		// math.MaxInt. The quotient fits: n < 1<<64 makes the high word
		// less than done, so less than total (Div64's condition), and
		// done <= total makes the result at most n.
		prodHi, prodLo := bits.Mul64(uint64(n), done)
		hi, _ := bits.Div64(prodHi, prodLo, total)
		out = append(out, NodeBlock{Node: d.node.ID, Lo: lo, Hi: int(hi)})
		lo = int(hi)
	}
	return out
}

// The loop-piece patience rule. ParallelFor gives each domain a
// block of the range in proportion to its capacity, queued in its pinned
// shard: that block's pages were first touched by the same split, so
// they lie on that node. Inside the node the block is split lazily
// (piece.run) and its pieces may be stolen like any task, also by a
// worker of another node whose own block is done. Such a worker:
//
//   - sends the piece home whole if it was offered less than
//     crossNodeAfter ago, and keeps off that node until the piece is that
//     old (keepOff): the node is busy with it, and a thief that stole
//     fresh pieces would pull remote memory through the interconnect for
//     work the node is about to do itself. Without the keep-off, the
//     thief would steal the piece back at once and loop (steal, send
//     home, steal);
//   - otherwise takes one grain-sized bite from the end and sends the
//     rest home: the node lags, and help that moves little data beats
//     waiting for it;
//   - without WithCrossNodeLoops (the default), always sends the piece
//     home: blocks never leave their node.
//
// crossNodeAfter is far above a piece's usual age on a node that keeps up
// (microseconds) and far below a lagging node's backlog (the loop's
// length). Tests: TestParallelForDryNodeLeavesFreshWorkAlone (a dry node
// sends fresh pieces home at most once per crossNodeAfter per worker),
// TestParallelForSplitIsStable, and TestFirstTouchLocality in numa_test
// (pages and the work on them stay on one node).
const crossNodeAfter = 2 * time.Millisecond

type forState struct {
	pool      *sched
	body      func(w *Worker, lo, hi int) error
	grain     int
	ctx       context.Context // the loop's, with its trace task when tracing
	labels    *observe.Set    // the pprof labels of ctx, for every piece
	remaining atomic.Int64
	stop      atomic.Bool
	errOnce   sync.Once
	err       error
	done      chan struct{}
	// finished is set with done, for a caller waiting inside a task
	// (finished.w, set before any work is queued; nil from outside).
	finished latch
}

func (s *forState) fail(err error) {
	s.errOnce.Do(func() { s.err = err })
	s.stop.Store(true)
}

func (s *forState) finish(k int) {
	if s.remaining.Add(-int64(k)) == 0 {
		close(s.done)
		s.finished.set()
	}
}

// piece is the part [lo, hi) of domain node's block of a loop, as a
// task.
type piece struct {
	task
	s       *forState
	lo, hi  int
	node    int       // the domain whose block it is part of
	offered time.Time // when it was offered to thieves
}

// piece returns the task for [lo, hi) of domain node's block; pinned keeps
// it on the node.
func (s *forState) piece(lo, hi, node int, offered time.Time, pinned bool) *task {
	pc := &piece{task: task{home: noHome, labels: s.labels}, s: s, lo: lo, hi: hi, node: node, offered: offered}
	if pinned {
		pc.home = strictHome(node)
	}
	pc.job = pc
	return &pc.task
}

func (pc *piece) drop(cause error) {
	pc.s.fail(cause)
	pc.s.finish(pc.hi - pc.lo)
}

// run runs the piece by lazy binary splitting: it runs body on
// grain-sized parts from the front, and whenever its worker's queue is
// empty (the half it offered last was taken, or none was offered yet) it
// offers the upper half of what is left to thieves. A loop nobody steals
// from thus runs as a few large sequential sweeps, and the imbalance at
// the end is at most one part.
//
// A worker of another node that stole the piece (its own node ran dry)
// sends it home if it was offered less than crossNodeAfter ago (its node
// is busy with it), and otherwise takes one grain-sized bite from the end
// and sends the rest home: helping across nodes moves little data, only
// when a node lags, and the blocks stay with the node that first touched
// them.
func (pc *piece) run(w *Worker) {
	s, lo, hi, home := pc.s, pc.lo, pc.hi, pc.node
	if w.domain.index != home && !s.stopped() {
		d := w.pool.domains[home]
		if !w.pool.cfg.crossLoops {
			// Every piece stays on its node: pinned, no one else takes it.
			w.sendHome(d, s.piece(lo, hi, home, pc.offered, true), true)
			w.seek.keepOff.hold(home, len(w.pool.domains), time.Now().Add(crossNodeAfter))
			return
		}
		if since := time.Since(pc.offered); since < crossNodeAfter {
			// Fresh work of a busy node: leave it to that node, and
			// leave the node alone until the piece may be helped with.
			w.sendHome(d, s.piece(lo, hi, home, pc.offered, false), true)
			w.seek.keepOff.hold(home, len(w.pool.domains), time.Now().Add(crossNodeAfter-since))
			return
		}
		if hi-lo > s.grain {
			// Take one bite; the rest goes home as new work of d's.
			w.spawnTo(d, s.piece(lo, hi-s.grain, home, pc.offered, false))
			lo = hi - s.grain
		}
	}
	if trace.IsEnabled() {
		defer w.traceRegion(s.ctx).End()
	}
	exited := true // until the loop below ends: a part ended by runtime.Goexit
	defer func() {
		if exited {
			s.fail(ErrGoexit)
		}
		if lo < hi {
			s.finish(hi - lo) // stopped, or ended by Goexit: the rest is given up
		}
	}()
	for lo < hi && !s.stopped() {
		if hi-lo > s.grain && w.local.IsEmpty() {
			mid := lo + (hi-lo)/2
			w.spawn(s.piece(mid, hi, home, time.Now(), false), atBack)
			hi = mid
			continue
		}
		end := lo + min(s.grain, hi-lo) // not min(lo+grain, hi): lo+grain can pass math.MaxInt
		var err error
		if perr := catch(w, func(w *Worker) { err = s.body(w, lo, end) }); perr != nil {
			err = perr
		}
		if err != nil {
			s.fail(err)
		}
		s.finish(end - lo)
		lo = end
	}
	exited = false
}

// stopped reports whether the loop hands out no more parts: it failed,
// its ctx is done, or a Shutdown gave up.
func (s *forState) stopped() bool {
	if s.stop.Load() {
		return true
	}
	if err := s.ctx.Err(); err != nil {
		s.fail(err)
		return true
	}
	if s.pool.aborted() {
		s.fail(s.pool.cause)
		return true
	}
	return false
}

func (p *sched) parallelFor(ctx context.Context, n, grain int, body func(*Worker, int, int) error) error {
	if body == nil {
		panic("pool: ParallelFor with a nil body")
	}
	ctx = orBackground(ctx)
	if n <= 0 {
		return nil
	}
	w := p.workerOf() // from inside a task the worker helps while it waits
	if p.state.Load() != running && w == nil {
		return ErrClosed
	}
	if grain <= 0 {
		grain = max(1, n/(64*len(p.workers)))
	}
	grain = min(grain, n) // a part is at most the whole range
	ctx, end := observe.Task(ctx, "numapool.ParallelFor")
	if end != nil {
		defer end()
	}
	s := &forState{pool: p, body: body, grain: grain, ctx: ctx, done: make(chan struct{}), labels: p.labelsOf(ctx)}
	// A caller from outside a pool of one node runs the loop on a seat
	// (join.go). With several nodes it hands the blocks off: its thread
	// would have to be locked and bound to the seat's node for the loop,
	// so that the pages the block first touches lie there, and a locked
	// caller that then waits for the other nodes' blocks is woken as a
	// thread, not as a goroutine: slower than the hand-off.
	var seat *Worker
	if w == nil {
		if seat = p.joinLoop(ctx); seat != nil {
			defer seat.leaveLoop()
			w = seat
		}
	}
	s.finished.w = w
	s.remaining.Store(int64(n))
	for i, b := range p.split(n) {
		if b.Hi == b.Lo {
			continue
		}
		d := p.domains[i]
		// Hard affinity at the top level: the node's block starts on the
		// node; the pieces it splits into may be stolen.
		t := s.piece(b.Lo, b.Hi, d.index, time.Now(), true)
		if seat == nil {
			s.start(w, d, t, b.Hi-b.Lo)
		}
		if w == nil || seat != nil {
			// The block splits at once: wake the node's other workers
			// from here.
			p.idle.wakeMore(d.index, min(int(d.size.Load()), (b.Hi-b.Lo)/grain)-1)
		}
		if seat != nil {
			seat.run(t.item())
		}
	}
	return s.wait(w)
}

// start queues t, the loop's work for domain d worth k of remaining, in
// d's pinned shard: from w, the calling worker, or from outside the pool.
// Refused (the pool closed), it counts as failed and finished.
func (s *forState) start(w *Worker, d *domain, t *task, k int) {
	if err := s.pool.enqueue(s.ctx, w, d, t.item(), inLIFO, noRoom); err != nil {
		s.fail(err)
		s.finish(k)
	}
}

// wait returns once the loop is done, with its first error; a calling
// worker w helps meanwhile.
func (s *forState) wait(w *Worker) error {
	if w != nil {
		w.runUntil(&s.finished)
	}
	<-s.done
	return s.err
}
