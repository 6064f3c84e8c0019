package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime/trace"
	"sync"
	"sync/atomic"

	"github.com/numapool/numapool/pool/internal/observe"
)

// Group runs related tasks and waits for them, like errgroup: Go starts a
// task, Wait waits for all of them and returns the first error; the first
// error (or panic, returned as a *PanicError) cancels the group's
// context.
//
// Go and Wait may be called from any goroutine, and they do what fits
// the caller: from one of the pool's tasks, Go pushes to the calling
// worker's own queue (where idle workers of its node steal from) and Wait
// runs other tasks until the group is done; from outside the pool, Go
// submits to the pool and Wait blocks.
//
// Order and cancellation: functions that outside code starts begin in the
// order of the calls (whichever worker runs them; those of calls that
// overlap in either order); functions started from inside a task go to
// the back of the calling worker's queue, which the worker runs oldest
// first and thieves take from the front. Once the group's context is
// cancelled (the first error, or ctx), functions that have not begun are
// skipped, so a failure early in the order saves the rest; Wait returns
// the first error, or the context's cause. A Group is made for one round:
// used again after Wait it runs new functions, but its context is already
// done and its first error stays, as errgroup's. If Shutdown gives up
// before a function began, Wait returns an error wrapping ErrAbandoned.
type Group struct {
	pool    *Pool
	ctx     context.Context
	cancel  context.CancelCauseFunc
	pending atomic.Int64
	wg      sync.WaitGroup
	errOnce sync.Once
	err     error
	// dropCause is the cause a Shutdown's drop of one of its tasks failed
	// the group with (stored before the cancel that publishes it): a
	// function skipped for that very cause is dropped too, and counted.
	dropCause atomic.Pointer[error]
	sem       chan struct{}
	waited    atomic.Bool  // a Wait has returned: functions started since run whatever the context says
	labels    *observe.Set // the pprof labels of ctx, for every task of the group
	// traceTask is the group's trace task while tracing (trace.go), ended
	// by the first Wait.
	traceTask atomic.Pointer[trace.Task]
	// The latches of workers waiting inside tasks: for the group's end
	// (pending at zero) and for room under the limit (sem not full).
	ended waiters
	room  waiters

	// Tasks started from outside the pool, oldest first. Each is queued
	// as a turn: whichever of them a worker runs, it runs the oldest
	// accepted function, so they start in the order of the calls, whatever
	// order the pool's batches and steals run the turns in. See start for
	// why only accepted ones.
	mu    sync.Mutex
	fifo  []*groupTask
	first int
}

// Group returns a group whose context is derived from ctx and cancelled
// by the first error.
func (p *Pool) Group(ctx context.Context) *Group {
	return newGroup(p, ctx)
}

func newGroup(p *Pool, ctx context.Context) *Group {
	gctx, cancel := context.WithCancelCause(orBackground(ctx))
	g := &Group{pool: p, ctx: gctx, cancel: cancel, labels: p.labelsOf(gctx)}
	if trace.IsEnabled() {
		var tt *trace.Task
		g.ctx, tt = trace.NewTask(gctx, "numapool.Group")
		g.traceTask.Store(tt)
	}
	return g
}

// Context returns the group's context, cancelled by the first error or
// when Wait returns.
func (g *Group) Context() context.Context { return g.ctx }

// SetLimit lets at most n of the group's tasks be queued or running at
// once; Go then waits for room (inside a task it runs other tasks while
// it waits). n < 1 removes the limit. Call it before Go: with tasks of
// the group active it panics, as errgroup does.
func (g *Group) SetLimit(n int) {
	if active := g.pending.Load(); active != 0 {
		panic(fmt.Sprintf("pool: Group.SetLimit while %d of the group's tasks are still active", active))
	}
	if n < 1 {
		g.sem = nil
		return
	}
	g.sem = make(chan struct{}, n)
}

// Go runs fn in the group.
func (g *Group) Go(fn func(w *Worker) error) {
	if fn == nil {
		panic("pool: Group.Go of a nil function")
	}
	w := g.pool.workerOf()
	if g.sem != nil {
		select {
		case g.sem <- struct{}{}:
		default:
			if w != nil {
				g.waitRoom(w)
			} else {
				g.sem <- struct{}{}
			}
		}
	}
	_ = g.start(w, fn) // a refusal fails the group: Wait reports it
}

// TryGo runs fn in the group unless the limit is reached; it reports
// whether it did.
func (g *Group) TryGo(fn func(w *Worker) error) bool {
	if fn == nil {
		panic("pool: Group.TryGo of a nil function")
	}
	if g.sem != nil {
		select {
		case g.sem <- struct{}{}:
		default:
			return false
		}
	}
	_ = g.start(g.pool.workerOf(), fn) // as in Go
	return true
}

// groupTask is one task of a Group, in one allocation with its task.
// turn: queued from outside, it runs the group's oldest accepted such
// function rather than its own. accepted: the pool took its turn (see
// start).
type groupTask struct {
	task
	g        *Group
	fn       func(*Worker) error
	turn     bool
	again    bool // started after a Wait returned: runs even though the group failed
	accepted atomic.Bool
}

func (gt *groupTask) run(w *Worker) {
	if gt.turn {
		gt = gt.g.takeTurn(gt)
	}
	err := ErrGoexit // stays if fn ends by runtime.Goexit
	defer func() {
		if err != nil {
			gt.g.fail(err)
		}
		gt.g.finish()
	}()
	if cause := context.Cause(gt.g.ctx); cause != nil && cause != errGroupDone && !gt.again {
		// The group failed or its ctx ended: skip what has not begun.
		// A group used again after Wait runs its new functions, as
		// errgroup does.
		err = cause
		if d := gt.g.dropCause.Load(); d != nil && *d == cause { // the pool's causes are pointers: comparable
			// A Shutdown gave up and dropped a sibling after this worker
			// looked at the pool's state (runUntil) and before it started
			// this task: skipped for that, it is dropped too, and counted
			// as its sibling was, or it would be neither run nor counted.
			w.runDropped()
		}
		return
	}
	if trace.IsEnabled() {
		defer w.traceRegion(gt.g.ctx).End()
	}
	if perr := catch(w, func(w *Worker) { err = gt.fn(w) }); perr != nil {
		err = perr
	}
}

func (gt *groupTask) drop(cause error) {
	if gt.turn {
		gt.g.takeTurn(gt) // a dropped turn: the oldest accepted function never begins
	}
	gt.g.failDropped(cause)
	gt.g.finish()
}

// refuse takes back a function whose turn the pool refused: that one,
// not the oldest, never begins. No turn can have taken it, since it was
// never accepted.
func (g *Group) refuse(gt *groupTask, cause error) {
	g.mu.Lock()
	for i := len(g.fifo) - 1; i >= g.first; i-- {
		if g.fifo[i] == gt {
			g.take(i)
			break
		}
	}
	g.mu.Unlock()
	g.fail(cause)
	g.finish()
}

// takeTurn is what turn own does when a worker runs or drops it: it takes
// the oldest accepted function started from outside. A turn in a queue
// is an accepted one, so it marks own first, and then finds one: each
// turn taken so far marked its own function before it took one, so the
// accepted functions are never fewer than the turns that came to take
// them.
func (g *Group) takeTurn(own *groupTask) *groupTask {
	g.mu.Lock()
	defer g.mu.Unlock()
	own.accepted.Store(true)
	for i := g.first; i < len(g.fifo); i++ {
		if gt := g.fifo[i]; gt.accepted.Load() {
			g.take(i)
			return gt
		}
	}
	// Cannot happen, by the count above; a panic rather than a wrong
	// function run. TestGroupGoRacingClose races turns against refusals.
	panic("pool: a Group's turn found no accepted function")
}

// take removes fifo[i]. g.mu must be held.
func (g *Group) take(i int) {
	if i == g.first {
		g.fifo[i] = nil
		g.first++
	} else {
		copy(g.fifo[i:], g.fifo[i+1:])
		g.fifo[len(g.fifo)-1] = nil
		g.fifo = g.fifo[:len(g.fifo)-1]
	}
	if g.first == len(g.fifo) {
		g.fifo, g.first = g.fifo[:0], 0
	}
}

// start queues fn: on w, the calling worker, or from outside the pool,
// and reports the pool's refusal (ErrClosed), which also fails the group.
//
// From outside, fn joins the fifo before its turn is pushed, since a
// worker may run the turn before the push returns; a turn takes the oldest
// function that is accepted: its push returned, or its own turn runs (the
// push queued it). A function whose push is still under way is passed
// over: were it taken, a refused push would leave a function that did run
// (and one that never runs, without a turn). So a refused call removes
// its own function, which no turn has taken. The order holds: a call that
// returned has marked its function, before any later call adds one; only
// calls that overlap may begin in either order.
func (g *Group) start(w *Worker, fn func(w *Worker) error) error {
	g.pending.Add(1)
	g.wg.Add(1)
	gt := &groupTask{task: task{home: noHome, labels: g.labels}, g: g, fn: fn, again: g.waited.Load()}
	gt.job = gt
	if w == nil {
		gt.turn = true
		g.mu.Lock()
		g.fifo = append(g.fifo, gt)
		g.mu.Unlock()
	}
	if err := g.pool.enqueue(context.Background(), w, nil, gt.item(), atBack, waitRoom); err != nil {
		g.refuse(gt, err) // from outside only: a task's enqueue is never refused
		return err
	}
	if w == nil {
		gt.accepted.Store(true)
	}
	return nil
}

// waitRoom takes a place under the group's limit for a Go from a task on
// w, running the scheduler loop while there is none. A finish that makes
// room sets the latches of the waiters then (room), under room's lock: a
// waiter adds its latch and then tries for a place, so either the finish
// sets its latch or its try comes after the finish, which made room.
// Another Go may take the room first: then the waiter waits again.
func (g *Group) waitRoom(w *Worker) {
	for {
		l := &latch{w: w}
		g.room.add(l)
		select {
		case g.sem <- struct{}{}:
			return
		default:
		}
		w.runUntil(l)
		select {
		case g.sem <- struct{}{}:
			return
		default:
		}
	}
}

func (g *Group) finish() {
	if g.sem != nil {
		<-g.sem
		g.room.setAllLocked() // the room is not an atomic: see waitRoom
	}
	last := g.pending.Add(-1) == 0
	g.wg.Done()
	if last {
		g.ended.setAll() // after wg.Done: a waiter woken now finds wg done
	}
}

func (g *Group) fail(err error) {
	g.errOnce.Do(func() {
		g.err = err
		g.cancel(err)
	})
}

// failDropped is fail for a task a Shutdown dropped: if that is the
// group's first failure, the functions skipped for it count as dropped
// (run).
func (g *Group) failDropped(cause error) {
	g.errOnce.Do(func() {
		// Before the cancel: a skip that sees the cause sees this. If the
		// group's ctx ended first (its parent's, or the user's cancel),
		// its tasks skip for that cause, which is not this one.
		g.dropCause.Store(&cause)
		g.err = cause
		g.cancel(cause)
	})
}

// Wait waits for every task started with Go and returns the first error.
// From one of the pool's tasks it runs other tasks while it waits.
func (g *Group) Wait() error {
	if w := g.pool.workerOf(); w != nil {
		// A latch set by a round that ended as new tasks began leaves
		// pending above zero: wait again, for them.
		for g.pending.Load() != 0 {
			l := &latch{w: w}
			g.ended.add(l)
			if g.pending.Load() != 0 { // after add: the last finish sees l, or is seen here
				w.runUntil(l)
			}
		}
	}
	g.wg.Wait()
	g.cancel(errGroupDone)
	g.waited.Store(true)
	if tt := g.traceTask.Swap(nil); tt != nil {
		tt.End()
	}
	return g.err
}

var errGroupDone = errors.New("pool: group done")
