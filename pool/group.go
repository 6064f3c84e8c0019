package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Group runs related tasks and waits for them, like errgroup: Go starts a
// task, Wait waits for all of them and returns the first error; the first
// error (or panic, returned as a *PanicError) cancels the group's
// context. A Group from Pool.Group is used from outside the pool: Go
// submits to the pool and Wait blocks. A Group from Worker.Group is used
// inside a task: Go pushes to the worker's own queue (stealable by idle
// workers of its node) and Wait runs other tasks until the group is done;
// its Go and Wait must be called from that task. Do not Wait on a
// Pool.Group from inside a task: it would block the worker (use
// Worker.Group).
type Group struct {
	pool    *Pool
	w       *Worker // nil for a Pool.Group
	ctx     context.Context
	cancel  context.CancelCauseFunc
	pending atomic.Int64
	wg      sync.WaitGroup
	errOnce sync.Once
	err     error
	sem     chan struct{}
}

// Group returns a group for use from outside the pool; its context is
// derived from ctx and cancelled by the first error. Its Wait panics when
// called from one of the pool's tasks, which must use Worker.Group: a
// worker blocked in Wait runs nothing, and a pool whose workers all wait
// would stop.
func (p *Pool) Group(ctx context.Context) *Group {
	return newGroup(p, nil, ctx)
}

// Group returns a group for use inside the task running on w.
func (w *Worker) Group(ctx context.Context) *Group {
	w.owner.check("Group")
	return newGroup(w.pool, w, ctx)
}

func newGroup(p *Pool, w *Worker, ctx context.Context) *Group {
	if ctx == nil {
		ctx = context.Background()
	}
	gctx, cancel := context.WithCancelCause(ctx)
	return &Group{pool: p, w: w, ctx: gctx, cancel: cancel}
}

// Context returns the group's context, cancelled by the first error or
// when Wait returns.
func (g *Group) Context() context.Context { return g.ctx }

// SetLimit lets at most n of the group's tasks be queued or running at
// once; Go then waits for room (inside a task it runs other tasks while
// it waits). n < 1 removes the limit. Call it before Go.
func (g *Group) SetLimit(n int) {
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
	if g.sem != nil {
		select {
		case g.sem <- struct{}{}:
		default:
			if g.w != nil {
				g.w.owner.check("Group.Go")
				g.w.helpUntil(func() bool {
					select {
					case g.sem <- struct{}{}:
						return true
					default:
						return false
					}
				})
			} else {
				g.sem <- struct{}{}
			}
		}
	}
	g.start(fn)
}

// TryGo runs fn in the group unless the limit is reached; it reports
// whether it did.
func (g *Group) TryGo(fn func(w *Worker) error) bool {
	if g.sem != nil {
		select {
		case g.sem <- struct{}{}:
		default:
			return false
		}
	}
	g.start(fn)
	return true
}

func (g *Group) start(fn func(w *Worker) error) {
	g.pending.Add(1)
	g.wg.Add(1)
	run := func(w *Worker) {
		var err error
		if perr := catch(w, func(w *Worker) { err = fn(w) }); perr != nil {
			err = perr
		}
		if err != nil {
			g.fail(err)
		}
		g.finish()
	}
	if g.w != nil {
		g.w.owner.check("Group.Go")
		g.w.c.Spawned++
		g.w.push(&task{fn: run, home: -1})
		g.pool.idle.notify(g.w.group.index)
		return
	}
	if err := g.pool.Submit(run); err != nil {
		g.fail(err)
		g.finish()
	}
}

func (g *Group) finish() {
	if g.sem != nil {
		<-g.sem
	}
	g.pending.Add(-1)
	g.wg.Done()
}

func (g *Group) fail(err error) {
	g.errOnce.Do(func() {
		g.err = err
		g.cancel(err)
	})
}

// Wait waits for every task started with Go and returns the first error.
func (g *Group) Wait() error {
	if g.w != nil {
		g.w.owner.check("Group.Wait")
		g.w.helpUntil(func() bool { return g.pending.Load() == 0 })
	} else if g.pool.onWorker() {
		panic("pool: Wait on a Pool.Group from inside a task would block the worker; use Worker.Group")
	}
	g.wg.Wait()
	g.cancel(errGroupDone)
	return g.err
}

var errGroupDone = errors.New("pool: group done")
