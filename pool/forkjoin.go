package pool

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// PanicError is a task's panic returned as an error by Join, Group.Wait
// and ParallelFor: the panic value and the stack where it happened.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("pool: task panicked: %v\n%s", e.Value, e.Stack)
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
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	fn(w)
	return nil
}

// Join runs a and b, possibly in parallel, and returns when both are
// done: b goes to the back of this worker's queue, where idle workers of
// the node can steal it; a runs here; then b runs here if nobody took it,
// and otherwise this worker runs other tasks until b is done. Nested
// Joins run depth first on this worker while thieves take the oldest,
// largest pieces from the front (Rayon's join). A panic in a or b is
// returned as a *PanicError (both joined if both panic). Call it only
// from a task running on w.
func (w *Worker) Join(a, b func(*Worker)) error {
	if a == nil || b == nil {
		panic("pool: Join of a nil function")
	}
	w.owner.checkSampled("Join")
	js := &joinState{}
	tb := &task{home: -1, join: js, fn: func(x *Worker) {
		js.err = catch(x, b)
		js.done.Store(true) // publishes js.err
	}}
	w.c.Spawned++
	w.push(tb)
	w.pool.idle.notify(w.group.index)
	errA := catch(w, a)
	if js.claimed.CompareAndSwap(false, true) {
		// Nobody took b: run it here. Its queue entry is left behind as a
		// tombstone that whoever pops it skips.
		w.c.TasksRun++
		tb.fn(w)
	} else {
		w.helpUntil(js.done.Load) // a thief runs b: help until it is done
	}
	return errors.Join(errA, js.err)
}

// joinState is the b side of a Join. A thief and the joining worker race
// to claim it; the loser skips it. (The owner cannot take a task back
// from the back of its queue: a thief holding a stale tail could claim
// the same slot.)
type joinState struct {
	claimed atomic.Bool
	done    atomic.Bool
	err     error
}

// helpUntil runs other tasks until done reports true, so that a worker
// waiting for work it handed out is never blocked while runnable work
// exists: its usual order, then stealing. With nothing to run anywhere it backs off: spinning, then
// yielding, then short sleeps, and looks again.
func (w *Worker) helpUntil(done func() bool) {
	idle := 0
	for !done() {
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
		idle++
		switch {
		case idle < 16:
		case idle < 32:
			runtime.Gosched()
		default:
			time.Sleep(time.Duration(min(idle-31, 50)) * 2 * time.Microsecond)
		}
	}
	w.endSearch()
}

// endSearch leaves the searching state without having found work.
func (w *Worker) endSearch() {
	if !w.searching {
		return
	}
	w.searching = false
	if w.pool.idle.stopSearching(w.group) && w.pool.pendingWork() {
		w.pool.idle.notify(w.group.index)
	}
}
