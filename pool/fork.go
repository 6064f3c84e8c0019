package pool

import "errors"

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

// maxForkRecords bounds a worker's list of Fork records to reuse: it
// grows with the nesting of Forks whose b a thief runs, and holds records
// of whatever Fork types the worker saw last.
const maxForkRecords = 64

// forkRecord returns a record for a Fork of these types: the worker's
// last one if it is of them, else a new one.
func forkRecord[XB, RB any](w *Worker) *forkRec[XB, RB] {
	if r, ok := recordOf[*forkRec[XB, RB]](&w.forks); ok {
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
	w.forks.keep(r)
}
