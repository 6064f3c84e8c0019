package pool

import (
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/goruntime"
	"github.com/numapool/numapool/pool/internal/observe"
	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/topology"
)

// Work that blocks. A task that waits in the kernel or the Go runtime (a
// read, a sleep, a lock, a channel) holds its worker's thread, and with
// it the worker's place in the scheduling: its queue, its LIFO and join
// slots and its share of the node's CPUs. Worker.Block hands that place
// (the seat, seat.go) to a spare thread of the worker for the time of
// the blocking call, as Tokio's block_in_place hands a worker's core to
// a new thread and Java's ForkJoinPool.managedBlock starts a
// compensating worker. The spare is the worker meanwhile: its ID, node,
// CPUs, queue and slots, PerWorker value and counters. So the node keeps
// as many threads running its work as it has workers, and what the
// blocked task had queued (its LIFO task, a Join's offered half) runs on
// the spare or is stolen.
//
// Why the seat moves rather than a spare worker being added: a
// PerWorker value, Worker.ID and everything indexed by it stay one
// thread's at a time, the steal layout does not change, and no more
// threads run the pool's work than it has workers.
//
// The rules:
//
//   - A worker's spares are bound to the worker's CPUs (its thread's
//     planned mask) and serve no other worker. They start when a Block
//     finds none parked, park when they hand the seat back, and end when
//     they have been parked for spareKeepAlive, or with their worker.
//   - The seat has one holder at a time: the goroutine that is its owner
//     (ownerID). Every other thread of the seat is in a Block call, or
//     waits for the seat (relay.waiting).
//   - The seat changes hands only at a task boundary of its holder: the
//     top of the scheduler loop, which a holder reaches after each task
//     and after each wake-up (runUntil, yield), or in Block. A thread
//     whose blocking call returned waits until then: at most the rest of
//     the task the holder runs, since a holder that blocks in Block hands
//     the seat on at once.
//   - Any waiting thread may get the seat, in any order, not the last
//     one to block first: two tasks that block on each other (a send and
//     a receive on one channel, both marked) must both go on whichever
//     returns first, which a stack of holders would deadlock.
//   - A thread that gets the seat back goes on with its task. A holder
//     at a boundary inside a wait (a Join, a Group.Wait, a loop) hands
//     the seat to a thread that is ready, and waits for it back itself:
//     it is ready when what it waits for is done (its latch). A spare at
//     its own loop's top hands the seat to any waiting thread and parks
//     as a spare; the worker's own thread at its loop's top waits until
//     a spare hands it back.
//   - While any thread of the seat is in Block or waits for the seat, the
//     seat counts as a worker with a task on its stack (idle.go's
//     waiting): the pool is not quiet, no caller from outside borrows it
//     (join.go), and the worker does not end with the pool; the worker's
//     own thread, once its loop ends, hands the seat to each returning
//     thread until none is left (endWait).
//   - A Block past the node's cap of spares (WithSpares), or past the
//     threads the process may start beyond the workers' (New's count,
//     internal/place/limits.go), runs its function on the task's thread,
//     with no spare, and is counted (SparesRefused): a thread past the
//     process's limits ends the process.
//
// Inside the function the task must not use its *Worker: the seat is
// the spare's (the owner check panics). Submitting to the Pool or a Node
// works as from any goroutine.
//
// Why the idle protocol holds (idle.go). To the idle protocol the seat is
// one worker whichever thread holds it: the holder searches, parks and
// is woken through the same counters, and a hand-over happens between
// tasks, with the seat awake and not searching on both sides. A parked
// holder of a seat with threads in Block registers as a waiter (toParked
// with waiting), so the pool is not quiet and a caller does not borrow
// it. A thread that wants the seat back (reacquire, or a displaced
// holder whose latch is set) is a second reason to wake, with the
// handshake of a latch: it first makes itself known (relay.waiting, or
// its latch set), then takes the holder off the sleepers' lists under
// the idle lock and sends it a token (wakeWaiter); the holder registers
// parked under that lock first and then looks for a ready waiter
// (readyWaiter) before it sleeps. So either the holder's look sees the
// waiter, or the waiter's wake-up finds the holder parked.

// spareKeepAlive is how long a spare thread stays parked after it handed
// its worker's seat back before it ends (Tokio's blocking threads keep
// 10 s): a job whose tasks block again and again keeps its spares, and
// one that stopped blocking gives the threads back.
const spareKeepAlive = 10 * time.Second

// defaultSpares is the default cap on live spare threads per node
// (WithSpares): Java's common pool allows 256 spares; a spare costs an OS
// thread and its stack while it lives.
const defaultSpares = 256

// relay is the seat's threads: its holder, those in Block, those that
// wait for the seat, and its parked spares.
type relay struct {
	// busy counts the seat's threads in Block or waiting for the seat:
	// while it is not zero the seat is not only its holder's.
	busy atomic.Int32
	// want counts the threads waiting for the seat (len(waiting)): a
	// holder hands it over at its next boundary.
	want atomic.Int32

	mu      sync.Mutex
	waiting []*hand  // threads waiting for the seat, in arrival order
	idle    []*spare // parked spares, the last parked last
	gone    bool     // the worker ended: no spare starts, parked ones end
	quit    chan struct{}
	alive   sync.WaitGroup // the seat's spares, until their goroutines end (endSpares waits)
	// endNote wakes the worker's own thread, holding the seat once the
	// pool ended, when a thread starts waiting for it (endWait).
	endNote chan struct{}
	ending  bool

	// The holder's, owner only:
	cur   *hand // the holder's record; nil: the worker's own goroutine (or a caller) before its first Block
	home  hand  // the worker's own goroutine's record
	onSpr bool  // the holder is a spare (no settle, no caller binding)
}

// hand is one thread's record on a seat: what it keeps while it does not
// hold the seat, and where it is handed the seat.
type hand struct {
	g      uintptr
	labels *observe.Set // the label set its goroutine runs under (Worker.obs.labels)
	ready  chan struct{}
	sp     *spare // the spare this is; nil for the worker's own goroutine or a caller
	back   bool   // waiting after its Block returned: ready at once
	l      *latch // a displaced holder's wait; nil at the loop's top
}

// spare is a spare thread of a worker.
type spare struct {
	w    *Worker
	h    hand
	stay latch // its loop's latch, never set: its loop ends by yield
	cpus topology.CPUSet
	lock bool // lock the goroutine to a thread (the worker's is)
	th   *pin.Thread
	tid  int // the thread bind bound; 0 where unknown
}

// Block runs fn, which may block, on the task's thread while a spare
// thread of the worker runs the worker's other work: its queue, its LIFO
// and join slots, the node's shards, steals (see "Tasks that block" in
// the package documentation). The task goes on after fn returns once the
// spare reaches a task boundary, with w valid again. fn must not use w;
// it may submit to the pool. A panic or runtime.Goexit in fn passes
// through Block, the seat taken back first.
func (w *Worker) Block(fn func()) {
	mustWorker(w, "Block")
	w.owner.check("Block")
	if fn == nil {
		misuse("Worker.Block", "a nil function")
	}
	s := w.spareFor()
	if s == nil {
		w.c.SparesRefused++
		fn()
		return
	}
	w.c.Blocks++
	r := &w.relay
	me := w.holderHand()
	r.busy.Add(1)
	caller := w.out.on && !r.onSpr
	if caller {
		w.pool.blockedCallers.Store(me.g, struct{}{})
	}
	w.handTo(me, &s.h)
	defer w.reacquire(me, caller)
	fn()
}

// holderHand is the record of the goroutine that holds the seat now.
func (w *Worker) holderHand() *hand {
	r := &w.relay
	if r.cur != nil {
		return r.cur
	}
	h := &r.home
	if w.out.on {
		h = &hand{} // a caller from outside (join.go): a record for this call
	}
	if h.ready == nil {
		h.ready = make(chan struct{}, 1)
	}
	h.g = goruntime.G()
	r.cur = h
	return h
}

// spareFor returns a parked spare of w, or a new one; nil when the
// node's cap is reached or the worker ended. Holder only.
func (w *Worker) spareFor() *spare {
	r := &w.relay
	r.mu.Lock()
	if r.gone {
		r.mu.Unlock()
		return nil
	}
	if n := len(r.idle); n > 0 {
		s := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		return s
	}
	r.mu.Unlock()
	d, p := w.domain, w.pool
	if d.spares.Add(1) > int32(p.cfg.sparesCap()) {
		d.spares.Add(-1)
		return nil
	}
	if p.spares.Add(1) > p.threadsLeft {
		// The threads the process may start (New's count, limits.go)
		// are the workers' and the runtime's: a spare past them could
		// end the process.
		p.spares.Add(-1)
		d.spares.Add(-1)
		return nil
	}
	w.c.SparesStarted++
	s := &spare{w: w, cpus: w.th.Bound(), lock: w.th.Locked()}
	s.h = hand{ready: make(chan struct{}, 1), sp: s}
	s.stay.w = w
	w.relay.alive.Add(1)
	go s.main(false)
	return s
}

// handTo gives the seat from its holder me to the thread of to: the
// holder's own state is kept in me, and the seat's owner is to's
// goroutine before to runs. The holder touches no field of the seat
// after it.
func (w *Worker) handTo(me, to *hand) {
	if w.seek.searching {
		w.endSearch()
	}
	w.stopClock()
	me.labels = w.obs.labels
	w.publish()
	w.owner.g.Store(0) // no goroutine's until to takes it (take)
	to.ready <- struct{}{}
}

// take makes the calling thread, handed the seat on h, its holder; one
// that waited for it (in Block, or displaced by yield) leaves busy's
// count, a parked spare was never in it.
func (w *Worker) take(h *hand, waited bool) {
	r := &w.relay
	if waited {
		r.busy.Add(-1)
	}
	h.back, h.l = false, nil
	w.owner.g.Store(h.g)
	r.cur = h
	r.onSpr = h.sp != nil
	w.obs.labels = h.labels
}

// reacquire waits, after me's Block returned, until the seat's holder
// hands it back at a task boundary.
func (w *Worker) reacquire(me *hand, caller bool) {
	if caller {
		w.pool.blockedCallers.Delete(me.g)
	}
	r := &w.relay
	me.back, me.l = true, nil
	r.mu.Lock()
	r.waiting = append(r.waiting, me)
	r.want.Add(1)
	ending := r.ending
	r.mu.Unlock()
	w.pool.idle.wakeWaiter(w) // a parked holder wakes to hand it over
	if ending {
		select {
		case r.endNote <- struct{}{}:
		default:
		}
	}
	<-me.ready
	w.take(me, true)
}

// ready reports whether h may be handed the seat now, by a spare at its
// loop's top (top) or another holder. r.mu must be held.
func (h *hand) readyFor(top bool) bool {
	return top || h.back || h.l.probe()
}

// pick removes and returns the first waiting thread ready for the
// holder (top: a spare at its loop's top), nil if none. r.mu must be
// held.
func (r *relay) pick(top bool) *hand {
	for i, h := range r.waiting {
		if h.readyFor(top) {
			r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
			r.want.Add(-1)
			return h
		}
	}
	return nil
}

// readyWaiter reports whether a thread waits that the holder would hand
// the seat to now (park's re-check).
func (w *Worker) readyWaiter(l *latch) bool {
	r := &w.relay
	if r.want.Load() == 0 {
		return false
	}
	top := r.onSpr && l == &r.cur.sp.stay
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.waiting {
		if h.readyFor(top) {
			return true
		}
	}
	return false
}

// yield is the holder at a boundary of its loop, with l its loop's
// latch, while threads wait for the seat: it hands the seat to one that
// is ready. A spare at its loop's top then parks as a spare and yield
// reports true (its loop ends, touching the seat no more); any other
// holder waits until the seat is handed back to it, ready once l is set
// (the worker's own thread at its loop's top: once a spare hands it
// back).
func (w *Worker) yield(l *latch) bool {
	r := &w.relay
	me := w.holderHand()
	top := r.onSpr && l == &me.sp.stay
	if !top && l != nil {
		l.sleep() // its set wakes the holder then (latch.set, wakeWaiter), to hand the seat back
	}
	r.mu.Lock()
	to := r.pick(top)
	if to == nil {
		r.mu.Unlock()
		if !top && l != nil {
			l.woke()
		}
		return false
	}
	if top {
		r.idle = append(r.idle, me.sp)
	} else {
		me.l = l
		r.waiting = append(r.waiting, me)
		r.want.Add(1)
		r.busy.Add(1) // counted before to leaves the count (take): busy never reads low
	}
	r.mu.Unlock()
	w.handTo(me, to)
	if top {
		return true
	}
	<-me.ready
	if l != nil {
		l.woke()
	}
	w.take(me, true)
	return false
}

// endWait is the worker's own thread once its loop ended with the pool
// while other threads of the seat are in Block or wait for it: it hands
// the seat to each that comes back, and gets it back from a spare, until
// none is left.
func (w *Worker) endWait() {
	r := &w.relay
	for r.busy.Load() != 0 {
		r.mu.Lock()
		if r.endNote == nil {
			r.endNote = make(chan struct{}, 1)
		}
		r.ending = true
		r.mu.Unlock()
		if !w.yield(nil) && r.busy.Load() != 0 {
			// None ready: a Block returns (its reacquire sends endNote), or a
			// holder displaced in a wait finds its latch set (whose wake-up
			// finds the seat unparked: hence the look every millisecond).
			select {
			case <-r.endNote:
			case <-time.After(time.Millisecond):
			}
		}
	}
}

// counts returns the seat's tasks in Block or back from it, the tasks of
// holders displaced inside a wait (yield), and its parked spares (Stats,
// running). The worker's own thread waiting at its loop's top has no
// task.
func (r *relay) counts() (blocked, waiting, parked int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	blocked = int(r.busy.Load())
	for _, h := range r.waiting {
		if !h.back {
			blocked-- // displaced, not in Block
			if h.l != nil {
				waiting++
			}
		}
	}
	return max(0, blocked), waiting, len(r.idle)
}

// endSpares ends the worker's parked spares, and any that would start,
// and waits for their goroutines to end: the worker ends (end), and Close
// returns with no spare left.
func (w *Worker) endSpares() {
	r := &w.relay
	r.mu.Lock()
	r.gone = true
	if r.quit != nil {
		close(r.quit)
	}
	r.idle = nil
	r.mu.Unlock()
	r.alive.Wait() // parked ones, or on their way there: none holds the seat (endWait)
}

// main is the spare's goroutine: it holds the seat when handed it
// (Block), runs the worker's loop until it hands the seat on, and parks
// until it is handed the seat again, its keep-alive ends, or its worker
// ends. holding says it takes over the seat at once (a spare whose
// goroutine a task ended, goexit).
//
// While it holds the seat its goroutine is locked to a thread bound to
// the worker's CPUs; parked, it is an ordinary goroutine, its thread
// given back with the mask it had. So the thread that takes the seat is
// whichever one the runtime runs the spare on: handed a processor by the
// blocking task's thread, it runs at once, where a spare parked locked
// would need its own thread woken (a second thread switch, the costliest
// step of a Block), and handing the seat back likewise wakes only the
// task's thread. Binding costs two or three system calls per hold, far
// less than a thread switch.
func (s *spare) main(holding bool) {
	w := s.w
	pprof.SetGoroutineLabels(w.labelsFor(nil))
	s.h.g = goruntime.G()
	w.pool.byG.move(w, 0, s.h.g) // workerOf finds the spare's goroutine while it holds the seat
	quit := w.relay.quitCh()
	timer := time.NewTimer(spareKeepAlive)
	ended := false
	defer func() {
		timer.Stop()
		defer w.relay.alive.Done()
		if !ended {
			s.goexit() // a task ended this goroutine with runtime.Goexit
			return
		}
		w.pool.byG.move(w, s.h.g, 0)
		w.domain.spares.Add(-1)
		w.pool.spares.Add(-1)
	}()
	for first := true; ; first = false {
		if !first || !holding {
			select {
			case <-s.h.ready:
			case <-quit:
				ended = true
				return
			case <-timer.C:
				if s.leaveIdle() {
					ended = true
					return
				}
				<-s.h.ready // taken by a Block as the keep-alive ended
			}
		}
		s.th = s.bind()
		w.take(&s.h, false)
		w.runUntil(&s.stay)
		s.unbind(s.th)
		timer.Reset(spareKeepAlive)
	}
}

// bind locks the spare's goroutine to its thread, bound to the worker's
// CPUs, if the worker's is (not pin.Goroutines); nil when there is
// nothing to restore. It locks spareLockSlack times more, as a worker's
// thread does (place.LockSlack), so that a task's unpaired
// UnlockOSThread calls leave the goroutine on the thread it bound; past
// the slack, unbind finds the thread it left by its ID.
func (s *spare) bind() *pin.Thread {
	if !s.lock {
		return nil
	}
	th, err := pin.Lock(s.cpus)
	if err != nil {
		runtime.LockOSThread() // unbound, as a worker whose binding failed still runs
	}
	for range spareLockSlack {
		runtime.LockOSThread()
	}
	s.tid = place.ThreadID()
	return th
}

// spareLockSlack is bind's extra locks: each costs a few nanoseconds per
// hold of a seat.
const spareLockSlack = 64

// unbind gives the bound thread the process's CPUs back and unlocks the
// goroutine. The process's CPUs, not the mask the thread had at bind: a
// spare binds whichever thread the runtime runs it on, and that thread
// may be one another spare was moved off and has not yet given back.
func (s *spare) unbind(th *pin.Thread) {
	if !s.lock {
		return
	}
	if th != nil {
		if s.left(th) {
			return
		}
		if th.Set(s.processCPUs(th)) != nil {
			return // stays locked: the runtime ends the thread with the goroutine rather than run others narrowed
		}
	}
	for range spareLockSlack + 1 {
		runtime.UnlockOSThread() // no more than were taken: a task's unpaired unlocks took some
	}
}

// processCPUs is what a thread a spare bound gets back: the process's
// CPUs as the machine monitor last read them, else the thread's mask
// before bind.
func (s *spare) processCPUs(th *pin.Thread) topology.CPUSet {
	if c := s.w.pool.placer.CPUsNow(); !c.IsEmpty() {
		return c
	}
	return th.Original()
}

// left reports whether a task's unpaired unlocks, past the slack, moved
// the goroutine off the thread bind bound, and if so gives that thread
// the process's CPUs back by its ID (as place.Thread.Desert does).
func (s *spare) left(th *pin.Thread) bool {
	if s.tid == 0 || place.ThreadID() == s.tid {
		return false
	}
	_ = pin.Aim(s.tid, s.processCPUs(th))
	return true
}

// goexit runs as a task's runtime.Goexit ends the spare's goroutine while
// it holds the seat, after every deferred call of the tasks on its stack:
// a new spare goroutine takes the seat over (as Worker.replace does for
// the worker's own). Still the holder here.
func (s *spare) goexit() {
	w := s.w
	if s.th != nil {
		s.left(s.th) // the thread it is on ends with it; one it left is given its mask back
	}
	w.goexited()
	w.pool.byG.move(w, s.h.g, 0)
	w.owner.g.Store(0)
	ns := &spare{w: w, cpus: s.cpus, lock: s.lock}
	ns.h = hand{ready: make(chan struct{}, 1), sp: ns}
	ns.stay.w = w
	w.relay.alive.Add(1)
	go ns.main(true)
	// This goroutine ends now; locked, it takes its thread with it.
}

// reopen lets spares start again for a worker a Resize brought back
// (resize.go): endSpares closed the relay when it retired.
func (r *relay) reopen() {
	r.mu.Lock()
	r.gone, r.quit = false, nil
	r.mu.Unlock()
}

// quitCh is the channel closed when the worker ends (endSpares).
func (r *relay) quitCh() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.quit == nil {
		r.quit = make(chan struct{})
		if r.gone {
			close(r.quit)
		}
	}
	return r.quit
}

// leaveIdle takes the spare off its worker's parked spares as its
// keep-alive ends; false if a Block took it first.
func (s *spare) leaveIdle() bool {
	r := &s.w.relay
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, o := range r.idle {
		if o == s {
			r.idle = append(r.idle[:i], r.idle[i+1:]...)
			return true
		}
	}
	return r.gone
}
