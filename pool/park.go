package pool

import (
	"runtime"
	"time"

	"github.com/numapool/numapool/pool/internal/goruntime"
)

// park sleeps until there is work, or with a latch l (a task waiting
// inside the pool, runUntil) until l is set, and reports false when an
// idle worker must end (the pool drained after Close, or Shutdown gave
// up); a waiter always gets true: it goes on until l is set.
func (w *Worker) park(l *latch) bool {
	p := w.pool
	if w.lifo.Load() != nil || !w.local.IsEmpty() {
		return true // a worker with local work never parks
	}
	w.publish()
	if l == nil {
		// An idle worker lets go of the user's Pool; a waiter keeps it:
		// its task is still running.
		w.handle.Store(nil)
	}
	// A seat with threads in Block (spare.go) has a task on its stack,
	// whichever thread holds it.
	recheck, allParked := p.idle.toParked(w, w.seek.searching, l != nil || w.relay.busy.Load() != 0)
	w.seek.searching = false
	// The keep-offs as of one reading of the clock: the re-check leaves
	// out the domains held then, and sleep wakes when the first of those
	// holds ends, though it may have ended by the time it sleeps.
	w.seek.keepOff.look()
	wakeAt := w.seek.keepOff.next(w.seek.keepOff.now)
	p.beforeSleep(w.domain, recheck, allParked, &w.seek.keepOff)
	if w.readyWaiter(l) {
		// A thread waits for the seat (spare.go): registered parked first,
		// so one that comes later finds it parked and wakes it.
		w.unparkSelf()
		return true
	}
	if l != nil {
		return w.parkWaiting(l, wakeAt)
	}
	return w.sleepParked(wakeAt)
}

// sleepParked is an idle worker registered as parked, with nothing left
// it must not sleep through: it sleeps until it is woken for work, Close
// wakes it to look once more (true), or the pool ends (false); with
// wakeAt not zero, also until then (true: its keep-off ended).
func (w *Worker) sleepParked(wakeAt time.Time) bool {
	p := w.pool
	for {
		if w.retire.Load() && w.retireParked() {
			return false // retired (resize.go): the goroutine ends
		}
		if p.ending() {
			w.leaving.Store(true) // while still parked: counted out throughout
			p.idle.unparkSelf(w)
			return false
		}
		// Offered, the seat's fields are the caller's (join.go): the thread
		// sleeps on what it read before.
		ch, timer := w.wakeCh, &w.seek.keepTimer
		w.seat.offer()
		woke := sleepOn(ch, timer, wakeAt)
		w.seat.reclaim(ch)
		if w.retire.Load() && p.idle.isRetired(w) {
			// A Resize retired it asleep (resize.go): whatever else woke
			// it, a retired worker counts as parked and ends.
			w.leaving.Store(true)
			return false
		}
		if !woke {
			// A keep-off ended (soft.go): look at that node again.
			w.unparkSelf()
			w.hold()
			return true
		}
		w.c.Parks++
		if p.ending() {
			w.leaving.Store(true) // while still parked: counted out throughout
			p.idle.unparkSelf(w)
			return false
		}
		parked, searching := p.idle.woken(w)
		if !parked {
			w.awake(searching)
			return true
		}
		if p.state.Load() == closing {
			w.unparkSelf() // Close woke everyone: look once more
			w.hold()
			w.settle()
			return true
		}
		// A stale token: sleep again.
	}
}

// retireParked retires the worker, registered parked with no task on its
// stack, before it sleeps, as a Resize asked (resize.go), and reports
// whether it is retired (a Resize may have retired it already). Its
// queue is empty: it parked.
func (w *Worker) retireParked() bool {
	if w.relay.onSpr || w.relay.busy.Load() != 0 {
		return false
	}
	ok := w.pool.idle.retireParked(w)
	if ok {
		w.leaving.Store(true)
	}
	return ok
}

// parkWaiting is park for a worker waiting inside a task, registered as
// parked: it marks l sleeping (latch.go) and sleeps until l is set or a
// wake-up for work comes, and leaves the sleepers' lists either way. The
// pool's end does not end it: the task on its stack goes on.
func (w *Worker) parkWaiting(l *latch, wakeAt time.Time) bool {
	p := w.pool
	for {
		if !l.sleep() {
			w.unparkSelf() // set since the loop last looked: back to the task
			return true
		}
		woke := w.sleep(wakeAt)
		l.woke()
		if woke {
			w.c.Parks++
		}
		if !woke || l.probe() {
			// A keep-off ended, or the latch was set: the loop looks at
			// it first.
			w.unparkSelf()
			return true
		}
		parked, searching := p.idle.woken(w)
		if !parked {
			w.awake(searching) // notify woke it for work
			return true
		}
		if p.state.Load() != running {
			// Close or an abort woke everyone: look once more (an abort
			// has the waiter drop what is queued).
			w.unparkSelf()
			return true
		}
		// A stale token: sleep again.
	}
}

// unparkSelf leaves the sleepers' lists on the worker's own account; if
// another took it off first (a token is on the way), it takes on how
// that one counted it.
func (w *Worker) unparkSelf() {
	if self, searching := w.pool.idle.unparkSelf(w); !self {
		w.seek.searching = searching
	}
}

// awake is what a worker does when another took it off the sleepers'
// lists and woke it: searching says whether it was counted as searching
// (notify, for work) or not (wakeWaiter, for its latch).
func (w *Worker) awake(searching bool) {
	w.seek.searching = searching
	if searching && len(w.pool.domains) > 1 {
		w.domain.busyAt.Store(w.pool.clock(time.Now())) // at it (soft.go)
	}
	w.hold()
	w.settle()
}

// sleep waits for a wake-up token, and reports false if instead the time
// until comes (unless it is zero): the end of a keep-off. A worker parked
// while it keeps off a node would not look at that node again until new
// work woke it, and a node with a backlog would be left without help.
func (w *Worker) sleep(until time.Time) bool {
	if w.out.on {
		// A caller on the seat sleeps on its own channel and timer: the
		// worker's thread sleeps on the worker's (join.go).
		return sleepOn(w.out.wake, &w.out.timer, until)
	}
	return sleepOn(w.wakeCh, &w.seek.keepTimer, until)
}

// sleepOn is sleep on the token channel wakeCh, with *timer for a time
// until (made at first use).
func sleepOn(wakeCh chan struct{}, timer **time.Timer, until time.Time) bool {
	if until.IsZero() {
		<-wakeCh
		return true
	}
	d := time.Until(until)
	if d <= 0 {
		return false
	}
	if *timer == nil {
		*timer = time.NewTimer(d)
	} else {
		(*timer).Reset(d)
	}
	select {
	case <-wakeCh:
		(*timer).Stop()
		return true
	case <-(*timer).C:
		return false
	}
}

// spin keeps a searcher searching for the block time before it parks
// (WithBlockTime). Waking a parked thread costs tens of
// microseconds; a searcher that stays awake is also what tells busy
// workers (through Join's lazy splitting) to expose work. At most half
// the workers search, so at most half spin.
//
// A worker's thread is locked to its goroutine (unless pin.Goroutines),
// so while it spins, a goroutine that waits for a processor (a task's
// waiter, or a worker just woken) may wait for this very one. When the
// searcher sees that twice in a row, a few microseconds apart (goruntime.Crowding),
// it gives way: with a block time (the passive policy) it parks, without
// one (the active policy) it yields once.
//
// A worker waiting inside a task (l not nil) spins the same way, searching
// when it may, until its latch is set: what it waits for is often about
// to finish.
func (w *Worker) spin(l *latch) item {
	p := w.pool
	limit := p.cfg.spinFor()
	deadline := time.Now().Add(limit)
	var crowded goruntime.Crowding
	var nextLook int64 // on the pool's clock
	for i := 0; p.state.Load() == running && (limit < 0 || time.Now().Before(deadline)); i++ {
		if l.probe() || w.relay.want.Load() != 0 || l == nil && w.retire.Load() {
			return item{} // a Resize retires an idle spinner through park (resize.go)
		}
		if it := w.next(); !it.none() {
			return it
		}
		if it := w.search(); !it.none() {
			return it
		}
		if i%8 != 7 {
			continue
		}
		now := p.clock(time.Now())
		if now < nextLook {
			continue
		}
		nextLook = now + int64(goruntime.GaugeEvery)
		seq, runnable := p.runnable.Waiting(now, w.seek.runnable[:])
		switch crowded.Look(seq, runnable, limit >= 0) {
		case goruntime.GiveWayPark:
			return item{}
		case goruntime.GiveWayYield:
			runtime.Gosched()
		}
	}
	return item{}
}

// wake gives the worker a wake-up token; a second one before it is used
// is dropped (waking is idempotent).
func (w *Worker) wake() {
	ch := w.wakeCh
	if r := w.route.Load(); r != nil {
		ch = *r // a caller holds the seat (join.go)
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}
