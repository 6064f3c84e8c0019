//go:build race

package pool

import "fmt"

// useLIFO is off under the race detector, so that tests see tasks run in
// more orders (as the runtime's randomizeScheduler does).
const useLIFO = false

// ownerID remembers the worker's goroutine so that a Worker used from
// another goroutine panics instead of corrupting its queue. The check
// parses runtime.Stack, so it is compiled in only with -race.
type ownerID struct {
	id    uint64
	calls uint32 // for checkSampled; touched by the owner only
}

func (o *ownerID) set() { o.id = goid() }

func (o *ownerID) check(method string) {
	if g := goid(); g != o.id {
		panic(fmt.Sprintf("pool: Worker.%s called from goroutine %d, not from a task on the worker (goroutine %d)", method, g, o.id))
	}
}

// checkSampled is check on one call in 32, for hot methods (Join): a
// goroutine id costs a stack walk. A foreign call that touches the
// worker's state while it runs is also reported by the race detector.
func (o *ownerID) checkSampled(method string) {
	o.calls++
	if o.calls%32 == 1 {
		o.check(method)
	}
}
