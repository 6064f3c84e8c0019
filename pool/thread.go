package pool

import (
	"fmt"
	"runtime"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// The worker's thread. A worker's goroutine is locked to an OS thread
// bound to its CPUs (unless pin.Goroutines), and two things a task does
// could take that thread away:
//
//   - runtime.UnlockOSThread without a matching LockOSThread would unlock
//     the worker's goroutine, which would then run on whatever thread the
//     runtime gives it while its bound thread ran other goroutines. The
//     worker locks its thread lockSlack times over, so a task's unpaired
//     unlocks leave it locked; and at its stop points (a wake-up, every
//     spreadEvery tasks) it checks that it still runs on its thread, and
//     if a task unlocked it past the slack, it locks and binds the thread
//     it is on, puts the deserted thread's mask back and counts it
//     (Counters.Relocks).
//   - runtime.Goexit ends the worker's goroutine, and with it, since it
//     is locked, its thread. The waiters of the tasks on its stack are told
//     (panic.go); the worker then goes on in a new goroutine, which locks
//     and binds a new thread (replace) and keeps the worker's ID, queue,
//     LIFO slot and counters, and takes the join slot's offer into its
//     queue: the Join that offered it has ended and will not take it back.
//     Counted in Counters.Goexits.

// lockSlack is how many times a worker locks its thread beyond the one
// lock it needs: a task's unpaired UnlockOSThread calls come off this
// slack first. Each lock costs a few nanoseconds, once per thread.
const lockSlack = 4096

// bind places and locks the worker's goroutine on its thread and reports
// a placement that did not hold (the worker then runs locked but
// unbound). It sets tid, thread and the node CPUs; bound only if it
// changed.
func (w *Worker) bind() error {
	if !w.pool.cfg.binding.LocksThread() { // a plain goroutine: nothing to place
		return nil
	}
	planned, err := pin.Place(w.pool.topo, w.pool.cfg.binding, w.cpu)
	cpus := w.placed() // where a re-plan put the worker (monitor.go)
	if cpus.IsEmpty() {
		cpus = w.pool.within(planned)
	}
	var th *pin.Thread
	if err == nil {
		th, err = pin.Lock(cpus)
	}
	if err != nil {
		err = fmt.Errorf("worker %d (node %d, CPU %d) runs unbound: %w", w.id, w.Node(), w.cpu, err)
		th, _ = pin.Lock(topology.CPUSet{}) // locked, not bound
		planned, cpus = topology.CPUSet{}, topology.CPUSet{}
	}
	for range lockSlack {
		runtime.LockOSThread()
	}
	w.thread = th
	if !planned.Equal(w.bound) {
		w.bound = planned
	}
	w.place.set = cpus // before tid, after which the monitor reads it
	if !cpus.IsEmpty() {
		w.place.now.CompareAndSwap(nil, &placeNow{cpus: cpus})
	}
	w.tid.Store(int32(threadID())) // locked now: the thread it keeps
	if cpus.Len() > 1 && w.tid.Load() > 0 {
		w.nodeCPUs.Store(&cpus) // after tid, which aim reads
	}
	return err
}

// end is the worker's last act: publish, let a waker's aim finish, put
// the thread's mask back.
func (w *Worker) end() {
	defer w.pool.workerEnded() // after the mask is put back
	w.publish()
	w.owner.ended.Store(true)
	w.releaseThread()
	if w.thread != nil {
		_ = w.thread.Set(w.restoreMask())
	}
	// Return still locked, if locked: the runtime ends this thread with
	// the goroutine.
}

// releaseThread makes the worker's thread ID unknown to wakers and waits
// for an aim in progress (aim): the thread may end after this, and its ID
// be given to another thread. tid and masking are a Dekker pair with
// aim's and the monitor's.
func (w *Worker) releaseThread() {
	w.tid.Store(0)
	for w.masking.Load() {
		runtime.Gosched()
	}
}

// restoreMask is the mask a thread the worker leaves gets back: the one
// it had before the worker locked it, inside the process's CPUs now and
// inside a mask set from outside that the pool honours, so that it is
// never wider than what the process, or the one who narrowed the
// thread, allows.
func (w *Worker) restoreMask() topology.CPUSet {
	m := w.pool.within(w.thread.Original())
	w.lockMask()
	if x := m.And(w.place.outside); !x.IsEmpty() {
		m = x
	}
	w.unlockMask()
	return m
}

// keepThread checks, at a stop point, that the worker still runs on its
// locked thread, and locks and binds the one it is on if a task unlocked
// it (see above). Owner only.
func (w *Worker) keepThread() {
	tid := int(w.tid.Load())
	if w.thread == nil || tid == 0 || threadID() == tid {
		return
	}
	back := w.restoreMask()
	w.releaseThread()
	_ = pin.Aim(tid, back) // the deserted thread runs other goroutines now
	if err := w.bind(); err != nil {
		w.pool.noteDegraded(err)
	}
	w.c.Relocks++
}

// replace runs as a task's runtime.Goexit ends the worker's goroutine,
// after every deferred call of the tasks on its stack: it hands the
// worker on to a new goroutine (see above). Still the owner here.
func (w *Worker) replace() {
	w.c.Goexits++
	if w.searching {
		w.endSearch()
	}
	if t := w.joinSlot.Swap(nil); t != nil {
		w.push(t)
	}
	w.publish()
	w.pool.byG.move(w, w.owner.g.Swap(0), 0)
	tid := int(w.tid.Load())
	var back topology.CPUSet
	if w.thread != nil {
		back = w.restoreMask()
	}
	w.releaseThread()
	if w.thread != nil && tid != 0 && threadID() != tid {
		// A task unlocked the goroutine past the slack: its thread is
		// not ending with it, and runs other goroutines from now on.
		_ = pin.Aim(tid, back)
	}
	go w.main(nil)
	// This goroutine ends now; locked, it takes its thread with it.
}

// settle is what a worker does at its stop points, after a wake-up and
// every spreadEvery tasks: it checks its thread, takes up a re-plan
// (follow), then checks its CPU (spread).
func (w *Worker) settle() {
	w.keepThread()
	w.follow()
	w.spread()
}
