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
	mustWorker(w, "Join")
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
	// Before the offer, which publishes them to the thief: the latch's
	// waiter, and the labels a runs under, which b runs under too.
	done.w = w
	bt.labels = w.madeLabels()
	w.joinSlot.Store(bt)
	w.spawned(w.domain)
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
// Fork's records (Fork, below) follow the same rules.
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
	if n := len(w.recs.joins); n > 0 {
		jt = w.recs.joins[n-1]
		w.recs.joins = w.recs.joins[:n-1]
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
	w.recs.joins = append(w.recs.joins, jt)
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

// Fork runs fa(w, xa) and fb(w, xb), possibly in parallel, and returns
// both values, with a panic in either returned as a *PanicError (both
// joined if both panic). It is Worker.Join for functions that take their
// input as an argument rather than capture it, and it allocates nothing
// when fa and fb are function values made before (top-level functions,
// or closures made once, not per call) and nobody steals fb: the record
// that offers fb(xb) to idle workers is reused, and nothing escapes to
// the heap. Join's closures capture what they write
// (its b side is offered to other workers, so the compiler moves it, and
// what it captures, to the heap): two allocations per Join.
//
//	func fib(w *pool.Worker, n int) int {
//		if n < 20 {
//			return fibSeq(n)
//		}
//		a, b, _ := pool.Fork(w, fib, n-1, fib, n-2)
//		return a + b
//	}
//
// Call it only from a task running on w.
func Fork[XA, RA, XB, RB any](w *Worker, fa func(*Worker, XA) RA, xa XA, fb func(*Worker, XB) RB, xb XB) (RA, RB, error) {
	mustWorker(w, "Fork")
	if fa == nil || fb == nil {
		panic("pool: Fork of a nil function")
	}
	w.owner.check("Fork")
	var ra RA
	runA := func(w *Worker) { ra = fa(w, xa) }
	if w.joinSlot.Load() != nil {
		// An outer Join or Fork is on offer: run both here, in order.
		var rb RB
		errA := catch(w, runA)
		errB := catch(w, func(w *Worker) { rb = fb(w, xb) })
		return ra, rb, errors.Join(errA, errB)
	}
	rec := forkRecord[XB, RB](w)
	rec.fb, rec.xb = fb, xb
	errA := w.join(&rec.task, &rec.done, runA)
	rb, errB := rec.rb, rec.err
	forkDone(w, rec) // only now: until fb is done a thief may hold the record
	return ra, rb, errors.Join(errA, errB)
}

// forkRec is the b side of a Fork: a task whose job calls fb(xb) and
// keeps its outcome. A thief reads it only after taking it from the join
// slot, and after setting done touches only the task part, which is set
// once (Join's rules, forkjoin.go).
type forkRec[XB, RB any] struct {
	task
	fb   func(*Worker, XB) RB
	xb   XB
	rb   RB
	err  error
	done latch
}

func (r *forkRec[XB, RB]) run(w *Worker) {
	r.err = ErrGoexit  // stays if fb ends by runtime.Goexit
	defer r.done.set() // publishes rb and err, also when fb ends by Goexit
	r.err = catch(w, func(w *Worker) { r.rb = r.fb(w, r.xb) })
}

func (r *forkRec[XB, RB]) drop(cause error) {
	r.err = cause
	r.done.set() // publishes err
}

// forkRecord returns a record for a Fork of these types: the worker's
// last one if it is of them, else a new one.
func forkRecord[XB, RB any](w *Worker) *forkRec[XB, RB] {
	if r, ok := recordOf[*forkRec[XB, RB]](&w.recs.forks); ok {
		return r
	}
	r := &forkRec[XB, RB]{task: task{home: noHome}}
	r.job = r
	return r
}

// forkDone clears a finished Fork's record and keeps it for reuse.
func forkDone[XB, RB any](w *Worker, r *forkRec[XB, RB]) {
	var zb XB
	var zr RB
	r.fb, r.xb, r.rb, r.err = nil, zb, zr, nil
	r.done.reset()
	w.recs.forks.keep(r)
}
