package pool

import (
	"fmt"
	"sync/atomic"
)

// ownerID is the goroutine of a worker, so that a Worker used from another
// goroutine panics instead of corrupting its queue. Its run queue, LIFO
// slot and join slot have one producer, the worker's own goroutine; a
// second one would lose or duplicate tasks.
//
// Cost: on amd64 and arm64 the check reads the g register (gid_*.s), about
// 1.5 ns, and runs in every build. Elsewhere it parses runtime.Stack and
// runs only in race-enabled builds.
type ownerID struct {
	g uintptr // set by the worker's goroutine before it runs a task
	// ended is set as the worker's goroutine ends: the runtime reuses a
	// g for later goroutines, so g alone no longer names the worker.
	ended atomic.Bool
}

func (o *ownerID) set() { o.g = gid() }

// check panics when the calling goroutine is not the owner.
func (o *ownerID) check(method string) {
	if (cheapGID || raceEnabled) && (gid() != o.g || o.ended.Load()) {
		panic(fmt.Sprintf("pool: Worker.%s called from a goroutine that is not running a task on that worker; a *Worker is valid only inside the task it was passed to", method))
	}
}

// workerOf returns the worker whose goroutine is calling, or nil when the
// caller is not one of p's workers.
func (p *sched) workerOf() *Worker {
	if w := p.byG[gid()]; w != nil && !w.owner.ended.Load() {
		return w
	}
	return nil
}

// onWorker reports whether the calling goroutine is one of p's workers.
func (p *sched) onWorker() bool { return p.workerOf() != nil }
