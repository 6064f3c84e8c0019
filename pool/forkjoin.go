package pool

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// PanicError is a task's panic returned as an error by Join, Group.Wait,
// ParallelFor, MapReduce and a Future: the panic value and the stack
// where it happened. Error is one line; the stack prints with %+v.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("pool: task panicked: %v", e.Value)
}

// Format prints Error for %v and %s, and Error followed by the stack for
// %+v.
func (e *PanicError) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('+'):
		fmt.Fprintf(f, "%s\n%s", e.Error(), e.Stack)
	case verb == 'q':
		fmt.Fprintf(f, "%q", e.Error())
	default:
		io.WriteString(f, e.Error())
	}
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// catch runs fn on w and returns its panic as a *PanicError.
func catch(w *Worker, fn func(*Worker)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.c.Panicked++
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	fn(w)
	return nil
}

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
	defer w.joinDone(jt)
	w.c.Spawned++
	w.joinSlot.Store(jt)
	w.pool.idle.notify(w.group.index)
	errA := catch(w, a)
	if w.joinSlot.CompareAndSwap(jt, nil) {
		if w.pool.aborted() {
			w.pool.drop(&jt.task, true) // b never started: Shutdown gave up
		} else {
			w.c.TasksRun++ // nobody took b: run it here
			jt.js.run(w)
			w.c.Completed++
		}
	} else {
		w.helpUntil(jt.js.done.Load) // a thief runs b: help until it is done
	}
	return errors.Join(errA, jt.js.err)
}

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
		jt = &joinTask{task: task{home: -1}}
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
	done atomic.Bool
	err  error
}

// run runs b.
func (js *joinState) run(w *Worker) {
	js.err = catch(w, js.b)
	js.done.Store(true) // publishes js.err
}

func (js *joinState) drop(cause error) {
	js.err = cause
	js.done.Store(true) // publishes js.err
}

// helpUntil runs other tasks until done reports true, so that a worker
// waiting for work it handed out is never blocked while runnable work
// exists: its usual order, then stealing. With nothing to run anywhere
// it backs off: spinning, then yielding, then short sleeps, and looks
// again. Once a Shutdown gives up it runs nothing more: it drops what
// is queued anywhere (dropQueued), so what it waits for is either running
// on some worker or dropped (see lifecycle.go).
func (w *Worker) helpUntil(done func() bool) {
	idle := 0
	for !done() {
		if w.pool.aborted() {
			w.endSearch()
			w.dropQueued()
			idle = max(idle, 32)
			backOff(&idle)
			continue
		}
		t := w.next()
		if t == nil {
			t = w.search()
		}
		if t != nil {
			w.run(t)
			idle = 0
			continue
		}
		w.endSearch()
		w.stopClock()
		backOff(&idle)
	}
	w.endSearch()
}

// backOff waits a little longer each time it is called in a row: spins,
// then yields, then sleeps of up to 100 µs.
func backOff(idle *int) {
	*idle++
	switch {
	case *idle < 16:
	case *idle < 32:
		runtime.Gosched()
	default:
		time.Sleep(time.Duration(min(*idle-31, 50)) * 2 * time.Microsecond)
	}
}

// endSearch leaves the searching state without having found work.
func (w *Worker) endSearch() {
	if !w.searching {
		return
	}
	w.searching = false
	if w.pool.idle.stopSearching(w.group) {
		w.pool.wakeForPending(w.group)
	}
}

// Join is Worker.Join from outside the pool: a task on some worker runs
// a and b, possibly in parallel, and Join returns when both are done.
func (p *Pool) Join(a, b func(*Worker)) error {
	if a == nil || b == nil {
		panic("pool: Join of a nil function")
	}
	_, err := Run(p, func(w *Worker) (struct{}, error) { return struct{}{}, w.Join(a, b) })
	return err
}

// Join runs a and b, possibly in parallel, and returns both values, with
// their errors (and panics, as *PanicError) joined. On the calling task's
// own worker it is Worker.Join; on any other target a task there does
// the Join and Join waits for it (helping, from inside a task).
func Join[A, B any](on Target, a func(*Worker) (A, error), b func(*Worker) (B, error)) (A, B, error) {
	if a == nil || b == nil {
		panic("pool: Join of a nil function")
	}
	type pair struct {
		a A
		b B
	}
	both := func(w *Worker) (pair, error) {
		var r pair
		var errA, errB error
		err := w.Join(func(w *Worker) { r.a, errA = a(w) }, func(w *Worker) { r.b, errB = b(w) })
		return r, errors.Join(errA, errB, err)
	}
	r, err := Run(on, both)
	return r.a, r.b, err
}
