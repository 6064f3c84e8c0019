package pool

import (
	"context"
	"runtime"
	"runtime/trace"
	"sync/atomic"

	"github.com/numapool/numapool/pool/internal/observe"
)

// Target is where Async and Run send work: a *Pool (any node, as
// Submit), a Node (one node, soft or strict, as Node.Submit) or a *Worker
// (the calling task's own worker, as Spawn; only from that task).
type Target interface {
	// queue queues t there, or returns why it cannot.
	queue(t *task) error
	// poolOf is the user's Pool: a Future holds it, so that a pool whose
	// work someone still waits for is not closed as dropped.
	poolOf() *Pool
	// joinTarget says whether a caller from outside may run the work
	// itself, and in which domain (join.go).
	joinTarget() (p *sched, d *domain, ok bool)
}

// Future is the result of a function run on the pool by Async: its value
// and error, once it has run. Wait for it with Wait, or select on Done
// (beside a context's Done, to stop waiting). Waiting from inside one of
// the pool's tasks runs other tasks meanwhile (as Join does); from outside
// the pool it spins briefly before it blocks, so a result that is nearly
// ready costs no thread wake-up.
//
// The function's panic is returned as a *PanicError. If a Shutdown gives
// up before the function started, the error wraps ErrAbandoned.
type Future[T any] struct {
	task
	fn  func(*Worker) (T, error)
	val T
	err error
	ch  chan struct{} // closed once val and err are final
	p   *Pool
	// done is set once val and err are final and ch is closed, before
	// the latches of the workers waiting inside tasks are set: the
	// condition of their waiters list (latch.go).
	done    atomic.Bool
	waiters waiters
	// The call's trace task while tracing (trace.go); nil otherwise, so
	// that a Future costs one word for it.
	trace *callTrace
}

// Async runs fn on the target and returns its Future. If the target
// refuses the work (the pool is closed, the node unknown), the Future is
// done with that error. From outside the pool, under WithShardBound,
// Async waits for room in the node's queue as Submit does; from one of
// the pool's tasks it never waits (the work goes to the calling worker
// for a *Pool target, past the bound for a Node).
func Async[T any](on Target, fn func(w *Worker) (T, error)) *Future[T] {
	mustTarget(on, "Async")
	return async(on, fn, "numapool.Async")
}

// async is Async, as a trace task named name.
func async[T any](on Target, fn func(w *Worker) (T, error), name string) *Future[T] {
	if fn == nil {
		panic("pool: Async of a nil function")
	}
	f := &Future[T]{task: task{home: noHome}, fn: fn, ch: make(chan struct{}), p: on.poolOf()}
	f.job = f
	if trace.IsEnabled() {
		ctx, end := observe.Task(context.Background(), name)
		f.trace = &callTrace{ctx: ctx, end: end}
	}
	if err := on.queue(&f.task); err != nil {
		f.finish(*new(T), err)
	}
	return f
}

// Run runs fn on the target and waits for its value and error: Async and
// Wait in one call. On the calling task's own worker it simply calls fn
// (panics still come back as a *PanicError). From outside the pool, on
// the pool or a soft Node of the caller's node, the caller runs fn itself
// on the seat of a parked worker when there is one (The caller joins, in
// the package doc).
//
// Cost, from outside the pool: a function call and a few hundred
// nanoseconds when the caller joins; otherwise a round trip costs a few
// times what a goroutine and a channel do when calls come back to back (a
// worker is still searching and the waiter's short spin sees the result;
// BenchmarkPingPongRun), and a thread wake-up more, tens of microseconds,
// when a parked worker's thread must be woken. Offload batches (Async
// many, then Wait; a Group; ParallelFor) rather than one small job at a
// time.
func Run[T any](on Target, fn func(w *Worker) (T, error)) (T, error) {
	mustTarget(on, "Run")
	if w, ok := on.(*Worker); ok {
		if fn == nil {
			panic("pool: Run of a nil function")
		}
		w.owner.check("Run")
		var v T
		var err error
		if perr := catch(w, func(w *Worker) { v, err = fn(w) }); perr != nil {
			return v, perr
		}
		return v, err
	}
	if fn != nil {
		if w := joinFor(on); w != nil {
			v, err := runAsCaller(w, fn)
			runtime.KeepAlive(on) // the caller's Pool stays open while fn runs
			return v, err
		}
	}
	return async(on, fn, "numapool.Run").Wait()
}

func (f *Future[T]) run(w *Worker) {
	var v T
	err := ErrGoexit // what the waiter gets if fn ends by runtime.Goexit
	defer func() { f.finish(v, err) }()
	if f.trace != nil {
		defer w.traceRegion(f.trace.ctx).End()
	}
	if perr := catch(w, func(w *Worker) { v, err = f.fn(w) }); perr != nil {
		err = perr
	}
}

func (f *Future[T]) drop(cause error) { f.finish(*new(T), cause) }

func (f *Future[T]) finish(v T, err error) {
	f.val, f.err = v, err
	f.fn = nil
	if f.trace != nil && f.trace.end != nil {
		f.trace.end()
	}
	close(f.ch)        // publishes val and err: the close happens before every receive
	f.done.Store(true) // then the waiters' condition, and their latches
	f.waiters.setAll()
}

// isDone reports whether the result is ready (a receive that does not
// block: a few nanoseconds, no lock).
func (f *Future[T]) isDone() bool {
	select {
	case <-f.ch:
		return true
	default:
		return false
	}
}

// waitIn waits for the result from a task on w: it runs the scheduler
// loop (runUntil) until its latch is set, by finish.
func (f *Future[T]) waitIn(w *Worker) {
	l := &latch{w: w}
	f.waiters.add(l)
	if f.done.Load() { // after add: finish either sees l or is seen here
		return
	}
	w.runUntil(l)
}

// Done returns a channel closed when the result is ready.
func (f *Future[T]) Done() <-chan struct{} { return f.ch }

// Wait waits for the result and returns it; it may be called any number
// of times, from any goroutine.
func (f *Future[T]) Wait() (T, error) {
	if !f.isDone() {
		if w := f.p.workerOf(); w != nil {
			f.waitIn(w)
		} else if !spinUntil(f.isDone) {
			<-f.ch
		}
	}
	return f.val, f.err
}

// A waiter outside the pool looks at a result outsideLooks times in a
// row, then yields its processor, outsideSpins times over, before it
// blocks on a channel. A hand-off that outlasts the spin costs a thread
// wake-up on top, so the spin must cover the slow hand-offs too (a
// worker just woken, a busy host), not only the usual one. A yield with
// nothing else to run returns at once, so yields alone would give up
// too soon; the looks between them stretch the spin for the price of a
// few loads.
const (
	outsideSpins = 64
	outsideLooks = 32
)

// spinUntil looks at done for a while, yielding the processor now and
// then, and reports whether it became true: a result a worker is about
// to finish is then taken without parking the waiter (and waking a
// thread for it later).
func spinUntil(done func() bool) bool {
	for range outsideSpins {
		for range outsideLooks {
			if done() {
				return true
			}
		}
		runtime.Gosched()
	}
	return done()
}
