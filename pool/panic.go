package pool

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/numapool/numapool/pool/internal/goruntime"
)

// How a task can fail, and who hears of it.
//
// A task's panic never takes its worker down: it is recovered where the
// task ran and goes to whoever waits for the task, as a *PanicError
// (Join, Fork, Group.Wait, ParallelFor, MapReduce, Run, a Future), or,
// for a plain task nobody waits for, to the pool's panic handler. Without
// a handler, or when the handler itself panics, the process ends as it
// does for an unrecovered panic in a goroutine: the panic is raised again
// on a goroutine of its own (crash), so the runtime's crash path
// (GOTRACEBACK, debug.SetCrashOutput) sees it, while the worker's own
// frames, which may hold tasks waiting inside other tasks, are never
// unwound by it. panic(nil) under GODEBUG=panicnil=1, which recover
// reports as nil, is a panic like any other.
//
// runtime.Goexit in a task (t.Fatal, t.FailNow, t.SkipNow call it) cannot
// be stopped: it runs every deferred call on the worker's goroutine and
// ends it. Every job completes its waiter in a deferred call, so the task
// that called Goexit, and every task that was waiting on the same stack
// (helping inside Join, Group.Wait, Future.Wait, a loop), completes with
// ErrGoexit; then the worker goes on in a new goroutine on a new thread
// (replace, worker.go).

// ErrGoexit is what waiters get for a task that ended by runtime.Goexit
// (t.Fatal, t.FailNow and t.SkipNow call it), or that was waiting on a
// worker's stack when a task there did.
var ErrGoexit = errors.New("pool: task ended by runtime.Goexit")

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

// panicked is what a task's deferred call makes of a body that did not
// return, r being what recover gave it: the panic, counted, or nil when
// the body is ending by runtime.Goexit.
func (w *Worker) panicked(r any) *PanicError {
	if r == nil && goruntime.Goexiting() {
		return nil
	}
	w.c.Panicked++
	return &PanicError{Value: r, Stack: debug.Stack()}
}

// taskPanicked hands a plain task's panic to the handler, or, without one,
// ends the process as any unrecovered panic does. A handler that panics
// ends the process with its own panic.
func (p *sched) taskPanicked(value any, stack []byte) {
	h := p.cfg.panicHandler
	if h == nil {
		crash(&crashError{what: "task panicked", value: value, stack: stack})
	}
	returned := false
	defer func() {
		if !returned {
			r := recover()
			if r == nil && goruntime.Goexiting() {
				return // the handler called Goexit: the worker is replaced
			}
			crash(&crashError{what: fmt.Sprintf("panic handler panicked (handling a task's panic: %v)", value),
				value: r, stack: debug.Stack()})
		}
	}()
	h(value, stack)
	returned = true
}

// crashError is the panic that ends the process for a task's panic nobody
// handled: the runtime prints its Error, which holds the task's stack.
type crashError struct {
	what  string
	value any
	stack []byte
}

// It starts with the value, as the runtime's report of a panic does.
func (e *crashError) Error() string {
	return fmt.Sprintf("%v [pool: %s]\n\ngoroutine of the numapool worker that ran it:\n%s", e.value, e.what, e.stack)
}

// crash ends the process with err as an unrecovered panic: raised on a
// goroutine of its own, so that the runtime's crash handling (exit status
// 2, GOTRACEBACK=crash's abort, debug.SetCrashOutput) applies, and not on
// the worker's, where it would unwind the frames of tasks waiting inside
// other tasks, whose own recover would take it. The worker's goroutine
// blocks until the process ends.
func crash(err error) {
	go func() { panic(err) }()
	select {}
}
