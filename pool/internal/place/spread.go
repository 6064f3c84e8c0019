package place

import (
	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// Spreading. A worker bound to a node of several CPUs (numa_domains) may
// run on any of them, and the kernel decides which: a thread woken while
// a worker runs is often queued on that worker's CPU and waits there, or
// shares it, until the load balancer moves it, which can take
// milliseconds with another CPU idle all along, and two workers that
// share a CPU run at the speed of one. So:
//
//   - a worker that wakes a parked one first aims it (Aim): it binds the
//     parked worker's thread to the CPUs of its node that no awake worker
//     of the node reported and the waker is not on, so that the kernel
//     wakes it on one of them (all of them, not one: a thread of another
//     program may hold any one CPU for milliseconds). A goroutine outside
//     the pool that wakes a worker does not: it is about to wait, so its
//     CPU is about to be free, while a thread woken on an idle CPU waits
//     for that CPU to leave its idle state, which costs the hand-off more
//     (BenchmarkPingPongRunBlock0 measures it);
//   - the waker reads its own CPU as it aims and reports it first: a
//     worker in a long recursion of Forks runs few tasks, and its last
//     report may name a CPU it has left;
//   - the woken worker, and every worker every SpreadEvery tasks, reads
//     its CPU (Spread); it widens its mask to the whole node again if it
//     was aimed (which leaves it where it is), and if another awake worker
//     of its node last reported the same CPU, the one with the higher ID
//     moves to a CPU none reported, the same way.
//
// A worker bound to one CPU, or unbound, takes no part. Counted in
// Counters.Spreads (moves, not aims). Tests (the pool's spread_test.go):
// TestSpreadSeparatesWorkers, TestAimWakesAWorkerOffTheWakersCPU,
// TestAimCountsTheWakersCPUNow.

// SpreadEvery is how many tasks a worker runs between two checks of its
// CPU, besides the check after each wake-up: where no register holds the
// CPU (pin.CurrentCPU), reading it is a system call, about as much as a
// spawn.
const SpreadEvery = 1024

// Spreadable is the worker's node CPUs when it may run on several of
// them: set by the worker before it runs tasks, and read by wakers.
func (t *Thread) Spreadable() topology.CPUSet {
	if s := t.nodeCPUs.Load(); s != nil {
		return *s
	}
	return topology.CPUSet{}
}

// othersCPUs returns the CPUs the awake workers of t's node other than t
// last reported.
func (t *Thread) othersCPUs() topology.CPUSet {
	var taken topology.CPUSet
	for _, o := range t.pl.byHome[t.home] {
		if o == t || !t.pl.awake(o.worker) { // parked: on no CPU
			continue
		}
		if c := int(o.onCPU.Load()); c >= 0 {
			taken.Add(c)
		}
	}
	return taken
}

// Aim binds parked worker t's thread to the CPUs of its node that no
// awake worker reported and waker is not on. It costs the waker a read
// of its CPU and a system call (sched_setaffinity) on its way to the
// wake-up; it is kept because a fork-join recursion runs faster with it
// than with the woken worker's own Spread alone, which comes only after
// the woken thread has shared the waker's CPU. The waker, a worker that
// runs on after waking t, calls it just before the wake-up. It reports
// its CPU first: its last report may be old (a worker reads its CPU only
// after a wake-up and every SpreadEvery tasks, and a Fork that nobody
// steals runs no task), and an old report elsewhere left no CPU to aim
// at, so t woke on the waker's CPU and shared it.
func (t *Thread) Aim(waker *Thread) {
	cpus := t.Spreadable()
	if cpus.Len() < 2 {
		return
	}
	cpu, _, err := pin.CurrentCPU()
	if err == nil {
		waker.onCPU.Store(int32(cpu))
	}
	taken := t.othersCPUs()
	if err == nil {
		taken.Add(cpu)
	}
	free := cpus.AndNot(taken)
	if free.IsEmpty() {
		return
	}
	// masking and the worker's tid are a Dekker pair: either the worker,
	// leaving its thread, waits for this aim, or this aim sees tid 0 and
	// leaves the thread (whose ID may soon be another thread's) alone.
	// Another setting the mask: no aim this time.
	if !t.masking.CompareAndSwap(false, true) {
		return
	}
	if tid := t.TID(); tid > 0 && t.ownsMask(tid) && pin.Aim(tid, free) == nil {
		t.set = free
		t.aimed.Store(true)
	}
	t.unlockMask()
}

// Spread reads the worker's CPU, widens an aimed worker's mask again and
// moves the worker off a CPU it shares with an awake worker of lower ID
// (see above). It reports whether it moved. Owner only.
func (t *Thread) Spread() bool {
	cpus := t.Spreadable()
	if cpus.Len() < 2 {
		return false
	}
	if t.aimed.Swap(false) {
		t.SetMask(cpus) // stays on the CPU it was woken on
	}
	cpu, _, err := pin.CurrentCPU()
	if err != nil {
		return false
	}
	t.onCPU.Store(int32(cpu))
	shared := false
	for _, o := range t.pl.byHome[t.home] {
		if o.worker < t.worker && t.pl.awake(o.worker) && int(o.onCPU.Load()) == cpu {
			shared = true
		}
	}
	if !shared {
		return false
	}
	free := cpus.AndNot(t.othersCPUs())
	free.Remove(cpu)
	if free.IsEmpty() {
		return false // as many awake workers as CPUs: nowhere better
	}
	var to topology.CPUSet
	to.Add(free.First())
	t.lockMask()
	err = errNotOwned
	if t.ownsMask(0) {
		err = t.thread.Set(to)
	}
	if err == nil {
		t.set = to
		if t.thread.Set(cpus) == nil { // stays where it was moved to
			t.set = cpus
		}
	}
	t.unlockMask()
	if err != nil {
		return false
	}
	t.onCPU.Store(int32(to.First()))
	return true
}

// SetMask sets the worker's thread mask to cpus and records it, unless
// the mask was set from outside. Owner only.
func (t *Thread) SetMask(cpus topology.CPUSet) {
	t.lockMask()
	if t.ownsMask(0) && t.thread.Set(cpus) == nil {
		t.set = cpus
	}
	t.unlockMask()
}
