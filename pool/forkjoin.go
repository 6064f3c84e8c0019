package pool

import "errors"

// Join runs a and b, possibly in parallel, and returns when both are
// done. If the worker's join slot is free, b goes there, where an idle
// worker (first of the node) can take it; a runs here; then b runs here
// if nobody took it, and otherwise this worker runs other tasks until b
// is done. If the slot already holds an outer Join's b, a and b simply
// run here one after the other: each worker offers one piece at a time,
// the outermost and so the largest, and a thief that takes it offers its
// own inner pieces in turn (lazy splitting; no task is made that nobody
// takes). A panic in a or b is returned as a *PanicError (both joined if
// both panic). Call it only from a task running on w.
func (w *Worker) Join(a, b func(*Worker)) error {
	if a == nil || b == nil {
		panic("pool: Join of a nil function")
	}
	w.owner.check("Join")
	if w.joinSlot.Load() != nil {
		return errors.Join(catch(w, a), catch(w, b))
	}
	jt := w.joinTask(b)
	errA := w.join(&jt.task, &jt.js.done, a)
	err := errors.Join(errA, jt.js.err)
	w.joinDone(jt) // only now: until b is done a thief may hold the record
	return err
}

// join runs a here while bt, the b side of a Join, is offered in the
// join slot, which must be empty; then it runs b here if nobody took it,
// and otherwise runs the scheduler loop until the thief sets done. It
// returns a's error; b's outcome is in bt's job.
func (w *Worker) join(bt *task, done *latch, a func(*Worker)) error {
	done.w = w // before the offer, which publishes it to the thief
	w.joinSlot.Store(bt)
	w.spawned(w.group)
	errA := catch(w, a)
	if w.joinSlot.CompareAndSwap(bt, nil) {
		if w.pool.aborted() {
			w.pool.drop(bt, true) // b never started: Shutdown gave up
		} else {
			w.c.TasksRun++ // nobody took b: run it here
			bt.job.run(w)
			w.c.Completed++
		}
	} else {
		w.runUntil(done) // a thief runs b: help, or sleep, until it is done
	}
	return errA
}

// The join slot. Each worker has one slot that offers the b side of its
// outermost pending Join to thieves; an inner Join, while the slot is
// taken, runs a then b inline. This is lazy splitting: a Join makes no
// task nobody takes, and the piece offered is the largest one pending,
// so a thief that takes it gets enough work to split further itself.
//
//   - Only the owner stores into its slot, and only when it is empty;
//     the owner and thieves both take the offer with a compare-and-swap
//     from the joinTask to nil, so exactly one of them runs b. The owner
//     that wins the CAS runs b itself; the one that loses runs the
//     scheduler loop (runUntil) until the thief sets done, the Join's
//     latch, whose swap publishes b's error and wakes the joiner if it
//     sleeps. Without the CAS both could run b, or neither. The owner
//     may also take its own offer back while it waits inside a
//     (ownOffer).
//   - A thief reads the joinTask's fields only after its CAS succeeded,
//     so a record the owner reuses for a later offer (joinTask below) is
//     never read half-written: a thief with a stale pointer fails its
//     CAS, or wins the current offer.
//   - A thief that ran b touches only the task part of the record after
//     setting done, which the owner never rewrites: latch.set reads the
//     waiter before its swap.
//   - Idle workers see the slot in their search (stealFrom) and in a
//     parker's re-check (wakeForPending), so an offered b wakes a
//     worker like any task (spawned calls notify).
//
// Fork's records (fork.go) follow the same rules.
//
// Tests: TestJoinHalfIsStolen (b runs on another worker while a waits
// for it), TestJoinFib and TestJoinDeep (nested Joins under -race, also
// with 4-slot queues), TestTimedOutShutdownReleasesWaiters/Join (a
// Shutdown drops an offered b and its joiner returns).

// joinTask is the b side of a Join, in one allocation.
type joinTask struct {
	task
	js joinState
}

// joinTask returns a joinTask for b, reused from the worker's list. A
// worker offers one Join at a time, but while a thief runs its b, the
// worker helps with other tasks, whose Joins need their own: the list
// grows to the depth of such nesting. The task part is set once; the
// thief that ran a joinTask reads only that part after it set done.
func (w *Worker) joinTask(b func(*Worker)) *joinTask {
	var jt *joinTask
	if n := len(w.joins); n > 0 {
		jt = w.joins[n-1]
		w.joins = w.joins[:n-1]
	} else {
		jt = &joinTask{task: task{home: noHome}}
		jt.job = &jt.js
	}
	jt.js.b = b
	return jt
}

// joinDone gives a finished Join's joinTask back to the worker's list.
func (w *Worker) joinDone(jt *joinTask) {
	jt.js = joinState{}
	w.joins = append(w.joins, jt)
}

// joinState is the b side of a Join: the function, and its outcome. It
// is the job of the Join's task: a thief that takes it runs b, and a
// panic goes back to the joiner as an error.
type joinState struct {
	b    func(*Worker)
	done latch
	err  error
}

// run runs b.
func (js *joinState) run(w *Worker) {
	js.err = ErrGoexit  // stays if b ends by runtime.Goexit
	defer js.done.set() // publishes js.err, also when b ends by Goexit
	js.err = catch(w, js.b)
}

func (js *joinState) drop(cause error) {
	js.err = cause
	js.done.set() // publishes js.err
}

// endSearch leaves the searching state without having found work.
func (w *Worker) endSearch() {
	if !w.searching {
		return
	}
	w.searching = false
	if w.pool.idle.stopSearching(w.group) {
		w.pool.wakeForPending(w.group, nil)
	}
}
