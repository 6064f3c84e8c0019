package place

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// Thread is a worker's OS thread as placement sees it: where the plan
// places the worker, the thread the worker's goroutine is locked to, the
// mask the pool last set on it and why, and the CPU it last found itself
// on. The worker's goroutine owns it (Bind, End, Desert, KeepThread,
// Follow, Spread, SetMask); wakers (Aim), the monitor (Placer.observe),
// Stats and Explain (TID, Bound, Now, Report) may call the rest from any
// goroutine.
//
// A worker's place in the scheduling (queue, slots, node, ID) and the
// thread that serves it are two things: when a task ends the worker's
// goroutine (runtime.Goexit) the worker goes on in a new goroutine,
// which binds a new thread to the same Thread (Desert, then Bind).
type Thread struct {
	pl     *Placer
	worker int // the worker's ID
	home   int // the worker's domain index
	cpu    int // the topology CPU the plan places the worker on

	// What wakers, the monitor and Stats read.
	nodeCPUs atomic.Pointer[topology.CPUSet] // the node's CPUs when the thread may run on several (spreading)
	onCPU    atomic.Int32                    // the CPU it last found itself on; -1: unknown
	aimed    atomic.Bool                     // a waker bound it to some CPUs of its node (Aim)
	masking  atomic.Bool                     // the pool is setting the thread's mask (lockMask)
	tid      atomic.Int32                    // the OS thread; 0 where unknown, with no thread of its own, or between two
	// now is the CPUs the thread is bound to and why they are not the
	// planned ones; nil until its first thread is bound, and for a worker
	// that locks no thread. Written under masking (or, the first time, by
	// Bind before tid is published).
	now atomic.Pointer[Placed]

	// Under masking:
	set     topology.CPUSet // the mask the pool last set on the thread
	outside topology.CPUSet // a mask set from outside, honoured; empty: none
	seenAt  uint64          // the monitor's look that found outside
	retry   bool            // the kernel refused the re-plan's mask: the monitor's next looks set it again

	// The owner's: bound is set before the worker runs tasks and changes
	// only if a new thread cannot be bound as the last one was; Stats and
	// Explain read it.
	bound  topology.CPUSet // the OS CPUs the plan binds the thread to
	thread *pin.Thread     // the locked thread while bound, else nil
	gen    uint64          // the machine generation last taken up (Follow)
}

// Placed is a thread's placement as Stats and Explain show it.
type Placed struct {
	CPUs    topology.CPUSet // OS CPUs
	Why     string          // why they are not the planned ones; "" when they are
	Outside bool            // set from outside and honoured
}

// LockSlack is how many times a worker locks its thread beyond the one
// lock it needs: a task's unpaired UnlockOSThread calls come off this
// slack first. Each lock costs a few nanoseconds, once per thread.
const LockSlack = 4096

// TID returns the worker's OS thread ID: 0 where unknown, for a worker
// that locks no thread, or between two threads.
func (t *Thread) TID() int { return int(t.tid.Load()) }

// Bound returns the OS CPUs the plan binds the thread to (empty: none).
func (t *Thread) Bound() topology.CPUSet { return t.bound }

// Locked reports whether the worker's goroutine holds a locked thread
// that the pool bound (or tried to). Owner only.
func (t *Thread) Locked() bool { return t.thread != nil }

// Now returns the thread's placement now; nil before its first thread
// is bound, and for a worker that locks no thread.
func (t *Thread) Now() *Placed { return t.now.Load() }

// placed returns the CPUs the thread is to be bound to now (empty: none
// known).
func (t *Thread) placed() topology.CPUSet {
	if n := t.now.Load(); n != nil {
		return n.CPUs
	}
	return topology.CPUSet{}
}

// Bind locks the calling goroutine, the worker's, to its thread and
// binds the thread where the worker is placed now, and reports a
// placement that did not hold (the worker then runs locked but unbound).
// A worker that locks no thread (pin.Goroutines) binds nothing. Owner
// only.
func (t *Thread) Bind() error {
	pl := t.pl
	if !pl.binding.LocksThread() {
		return nil
	}
	planned, err := pin.Place(pl.topo, pl.binding, t.cpu)
	cpus := t.placed() // where a re-plan put the worker
	if cpus.IsEmpty() {
		cpus = pl.within(planned)
	}
	var th *pin.Thread
	if err == nil {
		th, err = pin.Lock(cpus)
	}
	if err != nil {
		err = fmt.Errorf("worker %d (node %d, CPU %d) runs unbound: %w", t.worker, pl.nodes[t.home].ID, t.cpu, err)
		th, _ = pin.Lock(topology.CPUSet{}) // locked, not bound
		planned, cpus = topology.CPUSet{}, topology.CPUSet{}
	}
	for range LockSlack {
		runtime.LockOSThread()
	}
	t.thread = th
	if !planned.Equal(t.bound) {
		t.bound = planned
	}
	t.set = cpus // before tid, after which the monitor reads it
	if !cpus.IsEmpty() {
		t.now.CompareAndSwap(nil, &Placed{CPUs: cpus})
	}
	t.tid.Store(int32(ThreadID())) // locked now: the thread it keeps
	if cpus.Len() > 1 && t.tid.Load() > 0 {
		t.nodeCPUs.Store(&cpus) // after tid, which Aim reads
	}
	return err
}

// End is the worker's last act on its thread: it lets a waker's Aim
// finish and puts the thread's mask back. The goroutine returns still
// locked, and the runtime ends the thread with it. Owner only.
func (t *Thread) End() {
	t.release()
	if t.thread != nil {
		_ = t.thread.Set(t.restoreMask())
	}
}

// Desert lets go of the thread as a task's runtime.Goexit ends the
// worker's goroutine; the worker's next goroutine binds a new one
// (Bind). If a task unlocked the goroutine past the slack, the thread
// does not end with it and runs other goroutines from now on: its mask
// is put back. Owner only.
func (t *Thread) Desert() {
	tid := t.TID()
	var back topology.CPUSet
	if t.thread != nil {
		back = t.restoreMask()
	}
	t.release()
	if t.thread != nil && tid != 0 && ThreadID() != tid {
		_ = pin.Aim(tid, back)
	}
}

// release makes the thread's ID unknown to wakers and waits for an Aim in
// progress: the thread may end after this, and its ID be given to another
// thread. tid and masking are a Dekker pair with Aim's and the monitor's.
func (t *Thread) release() {
	t.tid.Store(0)
	for t.masking.Load() {
		runtime.Gosched()
	}
}

// restoreMask is the mask a thread the worker leaves gets back: the one
// it had before the worker locked it, inside the process's CPUs now and
// inside a mask set from outside that the pool honours, so that it is
// never wider than what the process, or the one who narrowed the
// thread, allows.
func (t *Thread) restoreMask() topology.CPUSet {
	m := t.pl.within(t.thread.Original())
	t.lockMask()
	if x := m.And(t.outside); !x.IsEmpty() {
		m = x
	}
	t.unlockMask()
	return m
}

// KeepThread checks, at a stop point, that the worker's goroutine still
// runs on its locked thread, and if a task unlocked it past the slack,
// locks and binds the thread it is on and puts the deserted thread's
// mask back. It reports whether it did, and a new binding that did not
// hold. Owner only.
func (t *Thread) KeepThread() (relocked bool, err error) {
	tid := t.TID()
	if t.thread == nil || tid == 0 || ThreadID() == tid {
		return false, nil
	}
	back := t.restoreMask()
	t.release()
	_ = pin.Aim(tid, back) // the deserted thread runs other goroutines now
	return true, t.Bind()
}

// Follow is the worker's look at the machine's generation at a stop
// point: a new one re-binds its thread to its placement, if the
// monitor's re-bind by thread ID missed it. It reports whether it took up
// a new generation on a thread of its own (a worker that locks no thread
// has none to take up). Owner only.
func (t *Thread) Follow() bool {
	st := t.pl.machine.Load()
	if st.Gen == t.gen {
		return false
	}
	t.gen = st.Gen
	if t.thread == nil {
		return false
	}
	t.lockMask()
	if to := t.placed(); !to.IsEmpty() && !to.Equal(t.set) && t.ownsMask(0) && t.thread.Set(to) == nil {
		t.set, t.retry = to, false
	}
	t.unlockMask()
	return true
}

// lockMask takes the thread's masking flag, which every change of the
// thread's mask by the pool holds, so that the recorded mask (set) is
// the thread's unless someone else set it.
func (t *Thread) lockMask() {
	for !t.masking.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}

func (t *Thread) unlockMask() { t.masking.Store(false) }

// ownsMask reports whether thread tid (0: the calling thread) has the
// mask the pool last set on the worker's thread, as far as the process's
// CPUs keep it: a worker and its wakers set a mask only then, and leave
// one someone else set for the monitor to honour. Under masking.
func (t *Thread) ownsMask(tid int) bool {
	mask, err := topology.ThreadAffinity(tid)
	return err == nil && mask.Equal(t.pl.within(t.set))
}

// setNodeCPUs publishes the CPUs a spreading worker and its wakers choose
// among: to, when it has several.
func (t *Thread) setNodeCPUs(to topology.CPUSet) {
	if to.Len() > 1 {
		t.nodeCPUs.Store(&to)
	} else {
		t.nodeCPUs.Store(nil)
	}
}

// Mask returns the mask of the worker's thread, read from the kernel by
// its ID; where it cannot be read, the CPUs the pool bound it to. Empty
// for a worker that locks no thread.
func (t *Thread) Mask() topology.CPUSet {
	set := t.placed()
	if set.IsEmpty() {
		return topology.CPUSet{}
	}
	if tid := t.TID(); tid > 0 {
		if mask, err := topology.ThreadAffinity(tid); err == nil {
			return mask
		}
	}
	return set
}

// Report says which thread the worker runs on and the mask that thread
// has now, read from the kernel (not the plan), with what the pool
// bound it to when the two differ: Explain's line for the worker.
func (t *Thread) Report() string {
	tid := t.TID()
	set := t.placed()
	if set.IsEmpty() {
		set = t.bound
	}
	bound := set.String()
	if bound == "" {
		bound = "nothing"
	}
	if tid == 0 {
		return "no thread now (ended, or between two), bound to " + bound
	}
	mask, err := topology.ThreadAffinity(tid)
	switch {
	case err != nil:
		return fmt.Sprintf("thread %d, bound to %s (its mask cannot be read: %v)", tid, bound, err)
	case set.IsEmpty() || mask.Equal(set):
		return fmt.Sprintf("thread %d, mask %s", tid, mask)
	}
	return fmt.Sprintf("thread %d, mask %s (the pool bound it to %s)", tid, mask, bound)
}

// errNotOwned: the thread's mask is not the one the pool set (ownsMask).
var errNotOwned = errors.New("pool: the thread's mask was set from outside")

// Aimed reports whether a waker aimed the thread (Aim) and the worker has
// not widened its mask again since.
func (t *Thread) Aimed() bool { return t.aimed.Load() }

// ReportCPU records cpu as the one the worker last found itself on, as
// its spreading does.
func (t *Thread) ReportCPU(cpu int) { t.onCPU.Store(int32(cpu)) }
