package pool

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/numapool/numapool/pool/internal/goruntime"
)

// ownerID is the goroutine of a worker, so that a Worker used from another
// goroutine panics instead of corrupting its queue. Its run queue, LIFO
// slot and join slot have one producer, the worker's own goroutine; a
// second one would lose or duplicate tasks.
//
// A worker's goroutine changes when a task ends it with runtime.Goexit
// (replace, worker.go): the ended goroutine gives up g before it ends and
// the new one sets its own before it runs a task, so no goroutine that the
// runtime later gives the ended one's g is taken for the worker.
//
// Cost: on amd64 and arm64 the check reads the g register (internal/goruntime), about
// as much as a function call, and runs in every build. Elsewhere it parses
// runtime.Stack and runs only in race-enabled builds.
type ownerID struct {
	g atomic.Uintptr // the worker's goroutine; 0 between two of them
	// ended is set as the worker ends for good: the runtime reuses a g
	// for later goroutines, so g alone no longer names the worker.
	ended atomic.Bool
}

// set makes the calling goroutine the owner.
func (o *ownerID) set() { o.g.Store(goruntime.G()) }

// check panics when the calling goroutine is not the owner.
func (o *ownerID) check(method string) {
	if (goruntime.Cheap || raceEnabled) && (goruntime.G() != o.g.Load() || o.ended.Load()) {
		panic(fmt.Sprintf("pool: Worker.%s called from a goroutine that is not running a task on that worker; a *Worker is valid only inside the task it was passed to", method))
	}
}

// owners maps the goroutines of a pool's workers to the workers. Lookups
// (every Submit, Wait and Group.Go asks whether its caller is a worker)
// read an immutable map through one atomic load; the rare change (a
// worker's goroutine replaced) copies it under mu.
type owners struct {
	m  atomic.Pointer[map[uintptr]*Worker]
	mu sync.Mutex
}

func (o *owners) init(ws []*Worker) {
	m := make(map[uintptr]*Worker, len(ws))
	for _, w := range ws {
		if g := w.owner.g.Load(); g != 0 { // 0: a worker New does not start (WithMaxWorkers)
			m[g] = w // each set it before it reported
		}
	}
	o.m.Store(&m)
}

// move records that w's goroutine changed from old (0: none) to now (0:
// none).
func (o *owners) move(w *Worker, old, now uintptr) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := maps.Clone(*o.m.Load())
	if old != 0 && m[old] == w {
		delete(m, old)
	}
	if now != 0 {
		m[now] = w
	}
	o.m.Store(&m)
}

// workerOf returns the worker whose goroutine is calling, or whose seat
// the calling goroutine holds as a caller from outside (join.go); nil
// when it is neither.
func (p *sched) workerOf() *Worker {
	m := p.byG.m.Load()
	if m == nil {
		return nil
	}
	// A goroutine of a worker is its worker only while it holds the seat:
	// not the worker's own in Block, nor a parked spare (spare.go).
	g := goruntime.G()
	if w := (*m)[g]; w != nil && w.owner.g.Load() == g && !w.owner.ended.Load() {
		return w
	}
	return p.callerOf()
}

// onWorker reports whether the calling goroutine is one of p's workers.
func (p *sched) onWorker() bool { return p.workerOf() != nil }

// inTaskNow reports whether the calling goroutine runs one of p's tasks: on
// a worker's seat, or in Worker.Block's function (spare.go), where it
// holds no seat but its task is on its stack.
func (p *sched) inTaskNow() bool {
	if p.onWorker() {
		return true
	}
	g := goruntime.G()
	if m := p.byG.m.Load(); m != nil {
		if w := (*m)[g]; w != nil && !w.owner.ended.Load() {
			return true // a worker's own goroutine or a spare's, in Block
		}
	}
	_, ok := p.blockedCallers.Load(g)
	return ok
}
