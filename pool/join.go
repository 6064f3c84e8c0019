package pool

import (
	"context"
	"runtime"
	"runtime/trace"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/goruntime"
	"github.com/numapool/numapool/pool/internal/observe"
)

// The caller joins. A call from ordinary code that is about to wait for
// its own work (Run on the pool or on the caller's node, ParallelFor)
// runs that work itself, as oneTBB's external threads do in an arena and
// as OpenMP's primary thread does in every parallel region, instead of
// handing it to a worker whose thread sleeps: waking a parked thread
// costs tens of microseconds, and a function call costs nanoseconds.
//
// The caller does not get a worker of its own. It takes the seat of a
// worker of its node that is parked with nothing on its stack: for the
// time of the call it is that worker (its ID, node, CPU, queue, LIFO and
// join slots, PerWorker value and counters), while the worker's thread
// goes on sleeping. The Go runtime does the same with a P: whichever
// thread holds it runs its goroutines. So a pool never runs more of its
// work at once than it has workers, a caller's spawns go to a queue that
// the node's workers already steal from, and every *Worker a task sees
// is one of the pool's Workers() (IDs stay in 0..Workers()-1).
//
// The rules:
//
//   - Only a caller that is not one of the pool's tasks joins, only for
//     work that may run on the node of the CPU it runs on (the pool's
//     work, a soft Node that is that node, a loop of a pool of one node),
//     and only if that node has a worker parked with no task on its
//     stack and the pool is running. Otherwise the work is handed off as
//     before: queued, a worker woken, the caller waiting.
//   - Only calls whose own work is what the caller runs first join: Run
//     (its function), ParallelFor and MapReduce (the node's block, a
//     helper). A Future's or a Group's work is queued among others' by
//     the time its Wait is called; a waiter that joined would take
//     whatever its node has queued, and its Wait would return only once
//     that, too, is done. Those waiters block as before.
//   - The caller runs the function, or its node's block of the loop, and
//     when it waits for work others took (a Join's half, the loop's
//     pieces, a nested loop) it runs the worker's loop as a waiting task
//     does (runUntil): its own queue, the node's shards, steals, and a
//     sleep through the idle protocol, registered as a parked waiter that
//     notify may wake for the node's work. It must: work of the call may
//     wait where only the node's workers look (a nested loop's block in
//     the node's pinned shard), and the seat may be the node's only
//     worker. So it may run other submitters' tasks meanwhile, as a
//     worker would.
//   - The caller sleeps on a channel and timer of its own (the seat's
//     wake-ups are routed there while it holds it, Worker.route), never on
//     the worker's, on which the worker's thread sleeps; the waker's Aim,
//     which moves the woken worker's thread, leaves a lent seat's alone.
//   - The caller's thread is not bound to the node's CPUs for the call's
//     own work: binding and restoring a mask is two system calls, a
//     microsecond or more, which is the cost the join saves. Work it takes
//     while it waits, from the node's shards or another worker, may be
//     strict or a loop's piece, which must run on the node's CPUs: before
//     the first of it the caller's thread is locked and bound to the
//     seat's CPUs, for the rest of the call (bindCaller), and gets its own
//     mask back when the call ends. So a loop joins only in a pool of one
//     node: with several, the pages a node's block first touches must lie
//     on that node, which takes the caller's thread bound for the loop and
//     locked, and a locked caller that waits for the other nodes' blocks
//     is woken as a thread, not as a goroutine; that measured slower than
//     handing the blocks off (parallel.go). A loop's caller is locked to
//     its thread for the loop, so that the seat's share runs on one
//     thread, as a worker's does. The worker's stop point (settle), which
//     checks and moves the worker's thread, is skipped while a caller
//     holds the seat. Worker.CPU is the seat's CPU.
//   - A Run's caller runs under its own pprof labels throughout, the
//     function and whatever it helps with while it waits: Go offers no way
//     to read a goroutine's labels, so none it changed could be put back.
//     A loop's caller runs its pieces under the labels a worker would give
//     them (the loop's set, numapool.node and numapool.worker) and leaves
//     under the labels of the loop's context (what pprof.Do gives). Tasks
//     made by a Run's function carry no label set, as when a worker ran
//     it.
//   - While a caller holds a seat the worker counts as awake: it keeps the
//     user's Pool reachable (hold), so that a dropped Pool is not closed
//     under the call, and Stats counts it busy.
//   - A function that calls runtime.Goexit (as t.Fatal does) while the
//     caller runs it ends the caller's goroutine, as calling it directly
//     would; the seat is given back on the way out (the Join offer it
//     held is queued). Work a worker runs keeps the rule of every waiter:
//     its waiter gets ErrGoexit.
//   - When the call ends, what it left queued stays in the seat's queue
//     and the worker's thread is woken to run it; with nothing left, the
//     seat is registered parked again, with the re-check every parker
//     makes (idle.go, rule 3), and the thread sleeps on.
//
// Why the idle protocol holds (idle.go). Taking the seat is a wake-up
// without a token: under the idle lock the worker leaves the sleepers'
// lists counted unparked and not searching, as wakeWaiter takes a waiter
// off for its latch. While lent it is an awake worker running a task,
// and its caller keeps the protocol as a worker does (it searches, parks
// and is woken through the same counters). Giving it back either parks
// it as any parker does (toParked, then beforeSleep's re-check, so a task
// stored meanwhile is seen by one side or the other), or leaves it
// unparked and not searching and sends its thread a token; the thread
// then wakes as a worker whose latch woke it. The lend may have marked the
// seat woken to search (a notify that woke its caller); that search ended
// with the caller's, so the mark is cleared before the thread reads it
// (TestCallersCountedUnderLoad counts the searchers once the pool is
// quiet).
//

// joinTarget is what a target lets a caller from outside join for (ok):
// the pool's work, and the domain it must run in (nil: any).
func (p *Pool) joinTarget() (*sched, *domain, bool) { return p.sched, nil, true }

// A soft node's work may run on its own node: a caller on that node
// joins. Strict work runs only on the node's bound threads.
func (n Node) joinTarget() (*sched, *domain, bool) {
	return n.p.sched, n.d, n.err == nil && !n.strict
}

func (w *Worker) joinTarget() (*sched, *domain, bool) { return nil, nil, false }

// joinDomain is the domain a caller from outside would join: the one
// of the CPU it runs on (want, if not nil, must be it), with a worker
// parked; nil if none.
func (p *sched) joinDomain(want *domain) *domain {
	if p.onlyDomain {
		// Every CPU the process had is the domain's: no need to ask where
		// the caller runs (pin.CurrentCPU: where no register holds the
		// CPU, a system call, a good part of a join's cost).
		if d := p.domains[0]; (want == nil || want == d) && d.sleeping.Load() > 0 {
			return d
		}
		return nil
	}
	cpu, _, err := pin.CurrentCPU()
	if err != nil {
		if len(p.domains) == 1 && want == nil {
			return p.domains[0] // no CPU to read (not Linux): one node, which the caller shares
		}
		return nil
	}
	if cpu < 0 || cpu >= len(p.cpuDomains) {
		return nil
	}
	for _, i := range p.cpuDomains[cpu] {
		d := p.domains[i]
		if (want == nil || d == want) && d.sleeping.Load() > 0 {
			return d
		}
	}
	return nil
}

// join gives the calling goroutine the seat of a worker of d parked with
// no task on its stack, and returns it; nil if there is none, or the
// pool is not running. The caller must call leave.
func (p *sched) join(d *domain, ctx context.Context) *Worker {
	if d == nil {
		return nil
	}
	if p.nCallers.Add(1) > maxCallers { // a place in callers, taken before the seat
		p.nCallers.Add(-1)
		return nil
	}
	il := &p.idle
	il.mu.Lock()
	if p.state.Load() != running {
		il.mu.Unlock()
		p.nCallers.Add(-1)
		return nil
	}
	var w *Worker
	s := il.sleepers[d.index]
	for i := len(s) - 1; i >= 0; i-- { // the one that parked last first: its caches are warm
		o := s[i]
		if il.waiting[o.id] || o.relay.busy.Load() != 0 || !o.seat.state.CompareAndSwap(seatAsleep, seatLent) {
			continue
		}
		il.sleepers[d.index] = append(s[:i], s[i+1:]...)
		d.sleeping.Add(-1)
		il.unmark(o)
		il.searchWake[o.id] = false
		il.woke() // awake and not searching, as a worker running a task
		w = o
		break
	}
	il.mu.Unlock()
	if w == nil {
		p.nCallers.Add(-1)
		return nil
	}
	w.out.on = true
	w.relay.cur = nil // the caller's record is made at its first Block (spare.go)
	if w.out.wake == nil {
		w.out.wake = make(chan struct{}, 1)
	}
	w.route.Store(&w.out.wake)
	w.out.g = w.owner.g.Swap(goruntime.G())
	w.out.labels = w.obs.labels
	w.out.ctx = ctx
	w.obs.labels = &callerLabels
	w.hold() // the user's Pool stays reachable while the seat is busy, as an awake worker keeps it
	p.addCaller(w)
	return w
}

// leave gives the seat back: what the call left queued goes to the
// worker's thread, which is woken for it; with nothing left the seat is
// parked again (see above).
func (w *Worker) leave() {
	p := w.pool
	if w.out.bound != nil {
		_ = w.out.bound.Restore() // on error the caller's goroutine stays locked: its thread never returns narrowed
		w.out.bound = nil
	}
	w.stopClock() // a caller that Goexited in a task left it running
	p.removeCaller(w)
	w.route.Store(nil)
	select {
	case <-w.out.wake: // a stale token: the next caller starts with none
	default:
	}
	if w.obs.labels != &callerLabels {
		w.runUnder(&callerLabels) // a task the caller ran set other labels
	}
	w.obs.labels = w.out.labels
	w.owner.g.Store(w.out.g)
	w.relay.cur = nil
	w.out.on, w.out.labels, w.out.g, w.out.ctx = false, nil, 0, nil
	if t := w.joinSlot.Swap(nil); t != nil {
		// Goexit ended the caller inside a Join: that Join will not take
		// its offer back, so the offer is queued (as replace does).
		w.push(t)
	}
	w.publish()
	if w.lifo.Load() != nil || !w.local.IsEmpty() || w.relay.busy.Load() != 0 {
		// Counted awake, not searching: the thread wakes to its queue, or
		// to the threads of the seat in Block (spare.go), whose seat it
		// hands on at the top of its loop or parks as a waiter.
		// A notify that woke the caller meanwhile marked the seat woken
		// to search, and the caller has ended that search: the thread
		// must not take the mark for a search of its own.
		p.idle.mu.Lock()
		p.idle.searchWake[w.id] = false
		p.idle.mu.Unlock()
		w.seat.state.Store(seatAsleep)
		w.wakeThread()
		return
	}
	w.handle.Store(nil) // parked, as an idle worker lets go of the user's Pool
	recheck, allParked := p.idle.toParked(w, false, false)
	p.beforeSleep(w.domain, recheck, allParked, nil)
	// A thread woken while the seat was lent waits for a token; so does
	// one whose pool stopped running meanwhile, whose wake-ups went to
	// the caller (Close and Shutdown wake every worker to look).
	if w.seat.state.Swap(seatAsleep) == seatLentWoken || p.state.Load() != running {
		w.wakeThread()
	}
	if w.retire.Load() && p.idle.retireParked(w) {
		w.wakeThread() // a Resize asked while the seat was lent: the thread ends (resize.go)
	}
}

// addCaller records w's caller for workerOf, in the place join counted
// in nCallers.
func (p *sched) addCaller(w *Worker) {
	for i := range p.callers {
		if p.callers[i].CompareAndSwap(nil, w) {
			w.out.slot = i
			for hi := p.callersHi.Load(); int32(i) >= hi && !p.callersHi.CompareAndSwap(hi, int32(i)+1); hi = p.callersHi.Load() {
			}
			return
		}
	}
	panic("pool: more callers joined than maxCallers") // join counted its place before it lent the seat
}

func (p *sched) removeCaller(w *Worker) {
	p.callers[w.out.slot].Store(nil)
	p.nCallers.Add(-1)
}

// callerOf returns the seat the calling goroutine holds as a caller, nil
// if none.
func (p *sched) callerOf() *Worker {
	if p.nCallers.Load() == 0 {
		return nil
	}
	g := goruntime.G()
	hi := int(p.callersHi.Load())
	for i := range p.callers[:hi] {
		if w := p.callers[i].Load(); w != nil && w.owner.g.Load() == g {
			return w
		}
	}
	return nil
}

// joinFor gives a caller from outside a seat for work sent to on, nil
// where the rules above hand the work off instead.
func joinFor(on Target) *Worker {
	p, want, ok := on.joinTarget()
	if !ok || p.state.Load() != running || p.workerOf() != nil {
		return nil
	}
	return p.join(p.joinDomain(want), nil) // nil: no context, the caller's labels stay (run)
}

// runAsCaller is Run's work on the caller's seat w: fn runs on the calling
// goroutine, a panic comes back as a *PanicError, and the seat is given
// back however fn ends.
func runAsCaller[T any](w *Worker, fn func(w *Worker) (T, error)) (v T, err error) {
	defer w.leave()
	if trace.IsEnabled() {
		ctx, end := observe.Task(context.Background(), "numapool.Run")
		defer end()
		defer w.traceRegion(ctx).End()
	}
	w.c.TasksRun++
	w.c.CallerRuns++
	if perr := catch(w, func(w *Worker) { v, err = fn(w) }); perr != nil {
		err = perr
	}
	w.c.Completed++
	return v, err
}

// wakeThread sends the worker's thread a token on its own channel, past
// any routing: the seat is being given back, and another caller may lend
// it at once.
func (w *Worker) wakeThread() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// bindCaller binds a caller's thread to the seat's CPUs, for the rest of
// the call, before it runs work it took from its node's shards or from
// another worker while it waits: that may be a strict task or a loop's
// piece, which must run on the node's CPUs. Its own work (the function,
// what it spawned) runs wherever the caller is. Where the seat's node
// holds every CPU of the process (onlyDomain) there is nothing to bind.
func (w *Worker) bindCaller() {
	if w.out.bound != nil || w.pool.onlyDomain || w.relay.onSpr {
		return
	}
	if cpus := w.th.Bound(); !cpus.IsEmpty() {
		if th, err := pin.Lock(cpus); err == nil {
			w.out.bound = th
		}
	}
}

// joinLoop gives a caller from outside a pool of one node a seat for a
// loop (ParallelFor, MapReduce), its goroutine locked to its thread so
// that the seat's share runs on one thread, as a worker's does; nil where
// the loop is handed off (parallel.go says why, for several nodes). The
// caller calls leaveLoop when the loop ends.
func (p *sched) joinLoop(ctx context.Context) *Worker {
	if len(p.domains) != 1 {
		return nil
	}
	w := p.join(p.joinDomain(nil), ctx)
	if w != nil {
		runtime.LockOSThread()
	}
	return w
}

// leaveLoop ends joinLoop's seat: the caller's goroutine is unlocked and
// the seat given back.
func (w *Worker) leaveLoop() {
	runtime.UnlockOSThread()
	w.leave()
}
