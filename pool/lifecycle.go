package pool

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
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
// closes Pool.done. In aborting a worker ends at its next look between
// tasks; a worker in a task that does not return (blocked on a channel
// nobody closes) ends only when that task does. Close, and Shutdown while
// its ctx is not done, wait for done: every worker has ended, every task
// that was running has returned. A Shutdown whose ctx ends first moves
// closing to aborting and does not wait for done: it gives up within
// shutdownSlack, reporting the tasks still running and the tasks dropped.
// Any number of exits, in any order, from any goroutine outside the pool,
// each return on those terms.
//
// Who waits on what:
//   - Close and Shutdown wait on done, and Shutdown on its ctx; once that
//     is done, Shutdown waits at most shutdownSlack more (giveUp): up to
//     shutdownSettle for done, as the workers not in a task end, then for
//     the sweep to drop what is queued, then it returns;
//   - a Submit that waits for room in a bounded shard waits on intake,
//     closed when intake closes;
//   - a parked worker waits on its wake channel; every state change
//     wakes all of them (idle.wakeAll);
//   - ParallelFor, Group.Wait, Join and a Future wait on their own tasks,
//     which either run or are dropped, and a dropped task completes its
//     waiter with an error wrapping ErrAbandoned and the Shutdown's cause;
//   - the last worker to end waits for a sweep in progress (sweep.lastOut).
//
// Why no accepted task is lost. A task is accepted from outside the pool
// when Push into a node's shard succeeds; Push claims its slot with one
// compare-and-swap on a word that holds the shard's closed bit, and fails
// once the bit is set. Close sets the bit and then waits until every push
// that claimed a slot before it has stored and counted its task.
// beginClose closes every shard before it stores closing, so every
// accepted push is ordered before that store. The drain is declared by a worker that has read
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
// Why every dropped task is counted once. Each drop follows a take that
// one taker alone can win: a shard's pop under its lock, a steal's CAS on
// the victim's head, the owner's pop, a swap of a LIFO slot, a CAS of a
// join slot. The one count that reads lengths instead is the last
// worker's (workerEnded), made when every worker has ended, so that
// nobody else takes, unless a sweep runs: the sweep and the last worker
// settle under sweep.mu which of them goes first, and a last worker that
// comes second waits for the sweep to finish and then counts each task
// as it drops it.
//
// Why every waiter returns. A task either runs or is dropped, and both
// complete its waiter (job.run, job.drop). In aborting a worker stops
// between tasks and drops its own queue (dropLocal) before it ends (a
// task it had already begun when the abort came still runs; one it had
// only taken is dropped with the rest, see runUntil); a worker
// waiting inside a task (runUntil) runs nothing more and drops what is
// queued anywhere, its own queue, what it can steal or take from the
// other workers' queues and slots, and the shards (dropQueued), so what
// it waits for is running somewhere or dropped, even when its owner is
// itself waiting inside a task, and then sleeps until the run or the drop
// sets its latch (latch.go), dropping again whenever a wake-up for new
// work comes; it never ends with the pool, since its task goes on, and a
// pool with a parked waiter is not drained (drainIfQuiet); a loop stops
// handing out pieces; the last
// worker to end drops what tasks running meanwhile queued. A worker in a
// task that does not return drops nothing, so a Shutdown that gives up
// drops for it: the sweep, a goroutine of its own, takes from every
// worker's queue and slots and from the shards exactly as dropQueued
// does, so the waiters of work queued behind a stuck task return when
// Shutdown does, not when that task ends.
//
// A task still running when Shutdown returns may queue more work. From
// outside the pool none is accepted (ErrClosed). What it queues on its
// own worker (Spawn, Async, Group.Go, Join's b) is dropped as soon as it
// waits for that work (runUntil, in aborting) and otherwise when it
// returns, as its worker drops its queues and ends; what it sends to a
// node's shard (a Node target) is dropped then too, by the last worker.
// None of it runs (bar the usual task some other worker took before it
// saw the abort), each drop is counted in Stats.Abandoned, and each
// waiter gets ErrAbandoned: a later Close, which waits for the last
// worker, returns the final count.
//
// The CPUs. A pool's claim on its workers' CPUs (internal/place/claims.go) is given back
// by the last worker to end, not when a Shutdown gives up: a worker still
// in a task still runs on its CPU, and a pool made meanwhile should place
// its workers beside it rather than on it.

// Errors of the life cycle.
var (
	// ErrAbandoned: a Shutdown gave up on work. ParallelFor, Group.Wait,
	// Join and a Future return an error wrapping it and the Shutdown's
	// cause (ctx.Err()) for a task dropped before it started; Shutdown
	// returns one when it gave up with tasks still running, and Close
	// when tasks were dropped.
	ErrAbandoned = errors.New("pool: task dropped by Shutdown")
)

// shutdownSlack is how long after its ctx is done a Shutdown may take to
// return (giveUp); shutdownSettle is the part of it given to the workers
// that are not in a task to end, dropping their own queues, before the
// sweep drops what is queued. Waiting for them first keeps the count
// exact in the usual case, where nothing is stuck and the last worker
// counts the backlog by its length; the sweep drops a task at a time.
const (
	shutdownSlack  = 25 * time.Millisecond
	shutdownSettle = 10 * time.Millisecond
)

const (
	running  int32 = iota // intake open
	closing               // intake closed; running what is queued
	drained               // final: everything ran; workers end
	aborting              // final: Shutdown gave up; queued work is dropped
)

// Close stops intake (Submit returns ErrClosed), runs every task already
// queued and every task those spawn, then stops the workers; their
// locked threads exit with them. It returns when every worker has ended,
// with nil, or with an error wrapping ErrAbandoned and the number of
// tasks dropped when a Shutdown gave up. After a Shutdown that gave up
// with tasks still running, Close waits for those tasks to return (and
// drops what they queued meanwhile): it waits as long as they take. The
// workers' CPUs count as taken for placing other pools until then. Close
// may be called any number of times, also after or during Shutdown.
// Called from one of the pool's tasks it closes intake and returns
// ErrInsideTask at once.
func (p *Pool) Close() error {
	mustPool(p, "Close")
	_, err := p.shutdown(context.Background(), "Close")
	return err
}

// Shutdown is Close that gives up when ctx is done (its deadline passes,
// or it is cancelled): queued tasks not yet started are then dropped and
// counted, no task starts any more, and Shutdown returns within 25 ms of
// ctx being done (shutdownSlack; plus however long the goroutine calling
// it waits for a processor). When every worker has ended by then it
// returns how many tasks were dropped and ctx.Err(). Otherwise tasks are
// still running: it returns how many tasks were dropped so far and an
// error that wraps ErrAbandoned and ctx.Err() and says "N tasks still
// running, M dropped"; Stats().BusyWorkers then counts the workers still
// in those tasks. Shutdown does not wait for them: their workers end when they
// return, and a later Close waits for that. Work dropped completes its waiters:
// ParallelFor, Group.Wait, Join and a Future return an error wrapping
// ErrAbandoned and ctx.Err(). What a task still running queues after
// Shutdown returned is dropped and counted too, and never runs (see the
// notes at the top of lifecycle.go): Stats().Abandoned and a later Close
// give the final count. Called from one of the pool's tasks, Close and
// Shutdown close intake and return ErrInsideTask at once instead of
// waiting for themselves.
//
// The workers give up at ctx's deadline themselves (setDeadline), and may
// see it pass before ctx's timer has fired, so that every worker has ended
// while ctx is not done yet. Shutdown then waits for ctx, done a moment
// later, so that it returns ctx's error only with ctx done, and with ctx
// done whenever its deadline made it give up. Test:
// TestShutdownErrorWhenWorkersSeeTheDeadlineFirst.
func (p *Pool) Shutdown(ctx context.Context) (abandoned int, err error) {
	mustPool(p, "Shutdown")
	return p.shutdown(ctx, "Shutdown")
}

// shutdown is Shutdown, for the exit named call.
func (p *Pool) shutdown(ctx context.Context, call string) (abandoned int, err error) {
	ctx = orBackground(ctx)
	p.beginClose()
	if p.inTaskNow() {
		return 0, &insideTaskError{call: call}
	}
	if d, ok := ctx.Deadline(); ok {
		p.setDeadline(d)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.abort(fmt.Errorf("%w: %w", ErrAbandoned, ctx.Err()))
		p.giveUp()
	}
	select {
	case <-p.done:
	default:
		if p.state.Load() == aborting {
			// Given up with workers left: what they drop from now on adds
			// to Stats().Abandoned, not to n. The count of those still in
			// a task is read first; the count dropped only grows.
			running := p.running()
			n := int(p.abandoned.Load())
			return n, fmt.Errorf("%w: %s still running, %d dropped: %w", ErrAbandoned, plural(running, "task"), n, ctx.Err())
		}
		// drained: everything ran and the workers are ending.
	}
	if p.state.Load() == aborting && ctx.Err() == nil {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			<-ctx.Done() // its deadline has passed: done now, or once its timer fires
		}
	}
	n := int(p.abandoned.Load())
	switch {
	case p.state.Load() == aborting && ctx.Err() != nil:
		err = ctx.Err() // this Shutdown's deadline (or an earlier one) ended it
	case n > 0:
		// An earlier Shutdown gave up: its cause is its ctx's, not this one's.
		err = fmt.Errorf("%w: %s", ErrAbandoned, plural(n, "task"))
	}
	return n, err
}

// insideTaskError is Close's and Shutdown's error when called from one of
// the pool's tasks: ErrInsideTask, naming the call.
type insideTaskError struct{ call string }

func (e *insideTaskError) Error() string {
	return "pool: " + e.call + " from inside one of the pool's tasks cannot wait for the pool (it would wait for itself): intake is closed; call Close from outside to wait"
}

func (e *insideTaskError) Unwrap() error { return ErrInsideTask }

// giveUp is what a Shutdown does once its ctx is done: it waits, for at
// most shutdownSlack in all, first up to shutdownSettle for every worker
// to end, then, if the pool is aborting, for the sweep to drop what is
// queued while tasks still run. It returns as soon as done is closed.
func (p *sched) giveUp() {
	slack := time.NewTimer(shutdownSlack)
	defer slack.Stop()
	if !p.sweep.started() {
		settle := time.NewTimer(shutdownSettle)
		defer settle.Stop()
		select {
		case <-p.done:
			return
		case <-settle.C:
		}
	}
	var swept <-chan struct{}
	if p.state.Load() == aborting { // a drained pool has nothing queued: its workers are ending
		swept = p.sweep.start(p) // nil when the last worker has begun: done comes next
	}
	select {
	case <-p.done:
	case <-swept:
	case <-slack.C:
	}
}

// running counts the workers in a task once the pool is aborting.
func (p *sched) running() int {
	n := 0
	for _, w := range p.workers {
		if w.relay.busy.Load() > 0 {
			// Tasks in Block on the seat, or back from it, or waiting
			// inside with the seat handed on (spare.go), and the one its
			// holder runs unless it is parked.
			blocked, waiting, _ := w.relay.counts()
			n += blocked + waiting
			if !w.owner.ended.Load() && !p.idle.asleep(w) {
				n++
			}
		} else if p.inTask(w) {
			n++
		}
	}
	return n
}

// inTask reports whether w, of an aborting pool, may be in a task: it has
// not ended, is not on its way out (leaving), and is not parked idle. A
// worker that the abort woke but that has not run yet (on a machine too
// busy to run it) is still parked, so it is not counted; a parked waiter
// has a task on its stack, so it is.
func (p *sched) inTask(w *Worker) bool {
	return !w.owner.ended.Load() && !w.leaving.Load() && !p.idle.idleParked(w)
}

// sweep is a Shutdown's drop of what is queued while workers are still
// in tasks: a goroutine that takes from every worker's queue and slots
// and from every shard, as dropQueued does, counting each task. It runs
// at most once, and only before the last worker has begun to count what
// is left by its length (workerEnded): mu orders the two.
type sweep struct {
	mu    sync.Mutex
	state int8          // sweepNone, sweepRunning (or done), sweepLastOut
	done  chan struct{} // closed when the sweep has dropped what it found
}

const (
	sweepNone    int8 = iota
	sweepRunning      // started; done says when it has finished
	sweepLastOut      // the last worker came first: no sweep
)

// started reports whether a sweep has begun.
func (s *sweep) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == sweepRunning
}

// start begins the sweep unless it has begun or the last worker came
// first, and returns the channel closed when it has finished: nil if the
// last worker came first.
func (s *sweep) start(p *sched) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == sweepNone {
		s.state = sweepRunning
		s.done = make(chan struct{})
		go func(done chan struct{}) {
			scratch, _ := queue.New[item]() // the sweep's own run queue, to steal into
			p.dropReachable(scratch, nil)
			close(done)
		}(s.done)
	}
	return s.done
}

// lastOut is called by the last worker to end, before it counts what is
// left: it returns nil if no sweep has begun (and none will), or the
// channel closed when the sweep has finished.
func (s *sweep) lastOut() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == sweepNone {
		s.state = sweepLastOut
	}
	return s.done
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// beginClose closes intake, once: every shard refuses pushes from now on,
// then the state says so, then every worker looks again.
func (p *sched) beginClose() {
	p.closeOnce.Do(func() {
		for _, d := range p.domains {
			d.inject.Close()
			d.pinned.Close()
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
// tasks; in a running pool it costs one load and is inlined.
func (p *sched) aborted() bool {
	s := p.state.Load()
	return s != running && p.abortedSlow(s)
}

// abortedSlow is aborted for a pool whose intake has closed (state s).
func (p *sched) abortedSlow(s int32) bool {
	switch s {
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

// stop ends the workers at once (New failing under WithRequiredPlacement).
func (p *sched) stop() {
	p.beginClose()
	p.abort(fmt.Errorf("%w: %w", ErrAbandoned, ErrClosed))
	<-p.done
}

// ending reports whether the pool is in a final state: workers end.
func (p *sched) ending() bool { return p.state.Load() >= drained }

// drainIfQuiet is what a worker does when it parks last while closing:
// if every worker is parked, none of them inside a task that waits (a
// parked waiter's task goes on once its latch is set), and no queue holds
// a task, nothing can make one, so the pool has drained. Otherwise it
// wakes a worker for the work; a waiter's task, once it returns, leaves
// its worker to park last and look again.
func (p *sched) drainIfQuiet(from *domain) {
	p.idle.mu.Lock()
	quiet := p.idle.unparked.Load() == 0 && p.idle.nWaiting == 0 && !p.queuedAnywhere()
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
	for _, d := range p.domains {
		if !d.pinned.IsEmpty() {
			return true
		}
	}
	return p.stealableWork(nil)
}

// workerEnded is called by each worker as it ends; the last one counts
// what is left (nothing, after a drain), gives the CPUs back and closes
// done, and only then completes the waiters of what is left: Shutdown
// keeps its deadline however long the backlog (walking a million queued
// tasks can take longer than shutdownSlack). After a sweep it waits for the
// sweep, then drops what tasks queued since, counting as it goes, and
// closes done last.
func (p *sched) workerEnded() {
	if p.live.Add(-1) != 0 {
		return
	}
	p.placer.Unwatch()
	if swept := p.sweep.lastOut(); swept != nil {
		<-swept // nobody else takes from the queues now
		p.claim.Release()
		for _, w := range p.workers {
			w.dropLocal(true)
		}
		p.dropShards(true)
		close(p.done)
		return
	}
	left := 0
	for _, w := range p.workers {
		left += w.local.Len() // their owners have ended
		if w.lifo.Load() != nil {
			left++
		}
	}
	for _, d := range p.domains {
		left += d.inShards()
	}
	p.abandoned.Add(int64(left))
	p.claim.Release()
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
// time, counting them a segment at a time if count.
func (p *sched) dropShards(count bool) {
	batch := make([]item, 0, 256)
	for _, d := range p.domains {
		for _, q := range []*queue.InjectShard[item]{d.inject, d.pinned} {
			for {
				batch = q.PopN(batch[:0], cap(batch))
				if len(batch) == 0 {
					break
				}
				if count {
					p.abandoned.Add(int64(len(batch)))
				}
				for _, it := range batch {
					p.dropItem(it, false)
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
	w.dropLocal(true)
	w.pool.dropReachable(w.local, w)
}

// dropReachable drops, counting each, what the caller can take from
// every worker but skip (their queues by stealing into into, a run queue
// the caller owns and which is empty, their LIFO and join slots) and
// from the shards: dropQueued for a worker waiting inside a task, the
// sweep for a Shutdown that gave up.
func (p *sched) dropReachable(into *queue.Local[item], skip *Worker) {
	for _, v := range p.workers {
		if v == skip {
			continue
		}
		for {
			it, moved := v.stealer.StealInto(into)
			if moved == 0 {
				break
			}
			p.dropItem(it, true)
			for it, ok := into.Pop(); ok; it, ok = into.Pop() {
				p.dropItem(it, true)
			}
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
