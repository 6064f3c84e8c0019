package pool

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// A task's panic never takes its worker down: it is recovered where the
// task ran and goes to whoever waits for the task, as a *PanicError
// (Join, Group.Wait, ParallelFor, MapReduce, a Future), or, for a plain
// task nobody waits for, to the pool's panic handler; without one it ends
// the process, as an unrecovered panic in a goroutine does.

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

// call runs a plain task's function, recovering a panic: the worker
// lives on.
func (w *Worker) call(fn func(*Worker)) {
	defer func() {
		if r := recover(); r != nil {
			w.c.Panicked++
			w.pool.taskPanicked(r, debug.Stack())
		}
	}()
	fn(w)
}

// taskPanicked hands a task's panic to the handler, or, without one, ends
// the process as any unrecovered panic does.
func (p *sched) taskPanicked(value any, stack []byte) {
	if p.cfg.panicHandler != nil {
		p.cfg.panicHandler(value, stack)
		return
	}
	// End the process as an unrecovered panic in a goroutine does, with
	// the task's stack and exit status 2. Not by panicking again: this
	// worker may be running the task while it waits inside another task
	// (Join, Group.Wait, a loop: helpUntil), and a panic from here would
	// unwind that task's frames, where its own recover would take the
	// panic for its own and the process would live on.
	fmt.Fprintf(os.Stderr, "panic: %v\n\ngoroutine running a numapool task:\n%s", value, stack)
	os.Exit(2)
}
