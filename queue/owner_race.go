//go:build race

package queue

import "sync/atomic"

// ownerCheck catches a Local used from two goroutines at once, which would
// corrupt the ring. It costs two atomic operations per call, so it is
// compiled in only with the race detector (go test -race), as the
// runtime's own checks are.
type ownerCheck struct {
	busy atomic.Bool
}

func (o *ownerCheck) enter() {
	if !o.busy.CompareAndSwap(false, true) {
		panic("queue: a Local used by two goroutines at once (only its owner may push, pop or steal into it)")
	}
}

func (o *ownerCheck) exit() { o.busy.Store(false) }
