package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/numapool/numapool/queue"
)

// The life cycle of a pool.
//
// A pool is in one of four states, held in Pool.state:
//
//	running ──Close/Shutdown──▶ closing ──last worker parks, nothing queued──▶ drained
//	                               │
//	                               └──Shutdown's ctx done first──▶ aborting
//
// running: intake is open. closing: intake is closed, the workers run
// everything queued and everything that work spawns. drained and aborting
// are final: in both the workers end, the last one to end drops whatever
// is still queued (nothing, after a drain), gives the CPUs back and
// closes Pool.done. Every exit (Close, Shutdown, any number of times, in
// any order, from any goroutine outside the pool) waits for done, and a
// Shutdown whose ctx ends first moves closing to aborting and then waits
// for done too: the tasks already running finish, nothing else starts.
//
// Who waits on what:
//   - Close and Shutdown wait on done (and Shutdown on its ctx);
//   - a Submit that waits for room in a bounded shard waits on intake,
//     closed when intake closes;
//   - a parked worker waits on its wake channel; every state change
//     wakes all of them (idle.wakeAll);
//   - ParallelFor, Group.Wait and Join wait on their own tasks, which
//     either run or are dropped, and a dropped task completes its waiter
//     with an error wrapping ErrAbandoned and the Shutdown's cause.
//
// Why no accepted task is lost. A task is accepted from outside the pool
// when Push into a node's shard succeeds; Push takes the shard's lock and
// fails once the shard is closed. beginClose closes every shard (taking
// each lock) before it stores closing, so every accepted push is ordered
// before that store. The drain is declared by a worker that has read
// closing and then, holding idle.mu, sees every worker registered as
// parked and every queue empty (drainIfQuiet). Go's atomics are
// sequentially consistent, so that worker sees every accepted push, and
// with all workers parked no task is running that could push more: a
// worker parks only with an empty run queue and LIFO slot, and no worker
// leaves the parked set without idle.mu (notify, unparkSelf). The pushes
// that do not check the shard's closed flag (Requeue: loop pieces, tasks
// sent home, Node targets from a task; a full run queue's overflow) and
// every push to a worker's own queue (Spawn, Group.Go, a loop's halves)
// are made by a task running on a live worker, so they happen before
// that worker parks and are seen by the last worker to park. Submit's
// state check before the push is only a fast path.
//
// Why every waiter returns. A task either runs or is dropped, and both
// complete its waiter (job.run, job.drop). In aborting a worker stops
// between tasks and drops its own queue (dropLocal) before it ends (a
// task it had already taken when the abort came still runs); a worker
// waiting inside a task (helpUntil) runs nothing more and drops what is
// queued anywhere, its own queue, what it can steal or take from the
// other workers' queues and slots, and the shards (dropQueued), so what
// it waits for is running somewhere or dropped, even when its owner is
// itself waiting inside a task; a loop stops handing out pieces; the last
// worker to end drops what tasks running meanwhile queued.

// Errors of the life cycle.
var (
	// ErrAbandoned: a task was dropped by a Shutdown whose deadline
	// passed before it started. ParallelFor, Group.Wait and Join return an
	// error wrapping it and the Shutdown's cause (ctx.Err()).
	ErrAbandoned = errors.New("pool: task dropped by Shutdown")
)

const (
	running  int32 = iota // intake open
	closing               // intake closed; running what is queued
	drained               // final: everything ran; workers end
	aborting              // final: Shutdown gave up; queued work is dropped
)

// Close stops intake (Submit returns ErrClosed), runs every task already
// queued and every task those spawn, then stops the workers; their
// locked threads exit with them. It returns when they have, with nil, or
// with an error wrapping ErrAbandoned when an earlier Shutdown gave up. Close may
// be called any number of times, also after or during Shutdown. Called
// from one of the pool's tasks it closes intake and returns ErrInsideTask
// at once.
func (p *Pool) Close() error {
	_, err := p.Shutdown(context.Background())
	return err
}

// Shutdown is Close that gives up at ctx's deadline: queued tasks not yet
// started are then dropped and counted, tasks already running finish, and
// Shutdown returns how many tasks were dropped with ctx.Err(). Work it
// drops completes its waiters: ParallelFor, Group.Wait and Join return an
// error wrapping ErrAbandoned and ctx.Err(). Called from one of the pool's
// tasks, Close and Shutdown close intake and return ErrInsideTask at once
// instead of waiting for themselves.
func (p *Pool) Shutdown(ctx context.Context) (abandoned int, err error) {
	ctx = orBackground(ctx)
	p.beginClose()
	if p.onWorker() {
		return 0, ErrInsideTask
	}
	if d, ok := ctx.Deadline(); ok {
		p.setDeadline(d)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.abort(fmt.Errorf("%w: %w", ErrAbandoned, ctx.Err()))
		<-p.done
	}
	n := int(p.abandoned.Load())
	switch {
	case p.state.Load() == aborting && ctx.Err() != nil:
		err = ctx.Err() // this Shutdown's deadline (or an earlier one) ended it
	case n > 0:
		err = fmt.Errorf("%w: %d tasks: %w", ErrAbandoned, n, p.cause)
	}
	return n, err
}

// beginClose closes intake, once: every shard refuses pushes from now on,
// then the state says so, then every worker looks again.
func (p *sched) beginClose() {
	p.closeOnce.Do(func() {
		for _, g := range p.groups {
			g.inject.Close()
			g.pinned.Close()
		}
		p.state.CompareAndSwap(running, closing) // after the shards: see above
		close(p.intake)
		p.idle.wakeAll()
	})
}

// abort moves a closing pool to aborting, once; cause is what dropped
// work reports. A drained pool stays drained.
func (p *sched) abort(cause error) {
	p.abortOnce.Do(func() {
		p.cause = cause // published by the state store below
		if p.state.CompareAndSwap(closing, aborting) {
			p.idle.wakeAll()
		}
	})
}

// setDeadline records a Shutdown's deadline, the earliest of them, so
// that workers give up at it themselves: the goroutine waiting in
// Shutdown may wait for a processor while the workers hold them all.
func (p *sched) setDeadline(d time.Time) {
	for {
		old := p.deadline.Load()
		if old != 0 && old <= d.UnixNano() {
			return
		}
		if p.deadline.CompareAndSwap(old, d.UnixNano()) {
			return
		}
	}
}

// aborted reports whether the pool is aborting, and moves it there when
// a Shutdown's deadline has passed while closing. Workers call it between
// tasks; in a running pool it costs one load.
func (p *sched) aborted() bool {
	switch p.state.Load() {
	case aborting:
		return true
	case closing:
		if d := p.deadline.Load(); d != 0 && time.Now().UnixNano() >= d {
			p.abort(fmt.Errorf("%w: %w", ErrAbandoned, context.DeadlineExceeded))
			return p.state.Load() == aborting
		}
	}
	return false
}

// stop ends the workers at once (New failing under WithStrict).
func (p *sched) stop() {
	p.beginClose()
	p.abort(fmt.Errorf("%w: %w", ErrAbandoned, ErrClosed))
	<-p.done
}

// ending reports whether the pool is in a final state: workers end.
func (p *sched) ending() bool { return p.state.Load() >= drained }

// drainIfQuiet is what a worker does when it parks last while closing:
// if every worker is parked and no queue holds a task, nothing can make
// one, so the pool has drained. Otherwise it wakes a worker for the work.
func (p *sched) drainIfQuiet(from *group) {
	p.idle.mu.Lock()
	quiet := p.idle.unparked.Load() == 0 && !p.queuedAnywhere()
	p.idle.mu.Unlock()
	if !quiet {
		p.wakeForPending(from, nil)
		return
	}
	if p.state.CompareAndSwap(closing, drained) {
		p.idle.wakeAll()
	}
}

// queuedAnywhere reports whether any queue, LIFO slot or join slot holds
// a task.
func (p *sched) queuedAnywhere() bool {
	for _, g := range p.groups {
		if !g.pinned.IsEmpty() {
			return true
		}
	}
	return p.stealableWork(nil)
}

// workerEnded is called by each worker as it ends; the last one counts
// what is left (nothing, after a drain), gives the CPUs back and closes
// done, and only then completes the waiters of what is left: Shutdown
// keeps its deadline however long the backlog (a million queued tasks
// take tens of milliseconds to walk).
func (p *sched) workerEnded() {
	if p.live.Add(-1) != 0 {
		return
	}
	left := 0
	for _, w := range p.workers {
		left += w.local.Len() // their owners have ended
		if w.lifo.Load() != nil {
			left++
		}
	}
	for _, g := range p.groups {
		left += g.queued()
	}
	p.abandoned.Add(int64(left))
	p.claim.release()
	close(p.done)
	for _, w := range p.workers {
		w.dropLocal(false)
	}
	p.dropShards(false)
}

// dropItem drops the task it, and counts it if count: a plain task queued
// as its function has no waiter, and dropping it only counts it.
func (p *sched) dropItem(it item, count bool) {
	switch {
	case it.t != nil:
		p.drop(it.t, count)
	case count:
		p.abandoned.Add(1)
	}
}

// drop completes t's waiter without running it, and counts it if count.
func (p *sched) drop(t *task, count bool) {
	t.release()
	cause := p.cause
	if cause == nil {
		cause = ErrAbandoned
	}
	t.job.drop(cause)
	if count {
		p.abandoned.Add(1)
	}
}

// dropShards drops every task in every node's shards, a segment at a
// time.
func (p *sched) dropShards(count bool) {
	batch := make([]item, 0, 256)
	for _, g := range p.groups {
		for _, q := range []*queue.InjectShard[item]{g.inject, g.pinned} {
			for {
				batch = q.PopN(batch[:0], cap(batch))
				if len(batch) == 0 {
					break
				}
				for _, it := range batch {
					p.dropItem(it, count)
				}
			}
		}
	}
}

// dropQueued is what a worker waiting inside a task does once a
// Shutdown gave up: it drops its own queue, what it can take from every
// other worker (their queues by stealing, their LIFO and join slots,
// which any goroutine may empty) and the shards. The owners of those
// workers may be inside tasks that wait for this worker's own work, so
// waiting for them to drop their queues could wait for ever.
func (w *Worker) dropQueued() {
	p := w.pool
	w.dropLocal(true)
	for _, v := range p.workers {
		if v == w {
			continue
		}
		for {
			it, moved := v.stealer.StealInto(w.local)
			if moved == 0 {
				break
			}
			p.dropItem(it, true)
			w.dropLocal(true)
		}
		if t := v.lifo.Swap(nil); t != nil {
			p.drop(t, true)
		}
		if jt := v.joinSlot.Load(); jt != nil && v.joinSlot.CompareAndSwap(jt, nil) {
			p.drop(jt, true) // the joiner finds b done, with the cause
		}
	}
	p.dropShards(true)
}

// dropLocal drops the tasks in w's LIFO slot and run queue, counting
// them if count. Only w's goroutine may call it, or anyone once w has
// ended.
func (w *Worker) dropLocal(count bool) {
	if t := w.lifo.Swap(nil); t != nil {
		w.pool.drop(t, count)
	}
	for it, ok := w.local.Pop(); ok; it, ok = w.local.Pop() {
		w.pool.dropItem(it, count)
	}
}
