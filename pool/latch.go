package pool

import (
	"sync"
	"sync/atomic"
)

// Waiting inside a task. A task that waits for other work (Join's b
// taken by a thief, a Fork's fb, a Future, a Group, a loop) keeps its
// worker in the scheduler loop (runUntil): the worker runs other tasks,
// searches, spins for the block time and parks exactly as an idle worker
// does, and leaves the loop once what it waits for is done. That is a
// latch: set once by whoever completes the work, read by the one worker
// waiting for it (rayon's CoreLatch and wait_until).
//
// A latch is unset, sleeping or set:
//
//	unset ──waiter parks (park)──▶ sleeping ──waiter wakes──▶ unset
//	  │                               │
//	  └─────────────set───────────────┴──▶ set (final until reset)
//
// The waiter moves unset to sleeping with a compare-and-swap after it
// registered as parked (idle.toParked) and before it blocks, and back to
// unset with a compare-and-swap when it wakes for any reason; either CAS
// fails only if the latch was set meanwhile. The completer swaps in set
// and, if the old state was sleeping, wakes the waiter (idle.wakeWaiter).
// The state is one word, so the CAS and the swap are ordered: either the
// waiter's CAS comes first, and the completer sees sleeping and wakes it,
// or the swap comes first, and the waiter's CAS fails and it does not
// block. A waiter that is sleeping is registered as parked (toParked came
// first), so wakeWaiter finds it on the sleepers' lists unless a notify
// took it off first, which sends it a token of its own. A latch is set
// when its waiter leaves the loop (or it never was sleeping), so a late
// set finds no sleeper and wakes nobody.
//
// A latch is used once, or reset by its owner after the waiter has seen
// it set (a Join's record). set reads the waiter before its swap: the
// swap lets the waiter return and reuse the record.
type latch struct {
	state atomic.Int32
	w     *Worker // the waiting worker; nil for a waiter outside the pool
}

const (
	latchUnset int32 = iota
	latchSleeping
	latchSet
)

// probe reports whether l is set; a nil latch never is (an idle worker's
// loop, which ends with the pool).
func (l *latch) probe() bool { return l != nil && l.state.Load() == latchSet }

// set sets l and wakes its waiter if it sleeps. Any goroutine may call it,
// once per use of l or more (the later calls do nothing).
func (l *latch) set() {
	w := l.w // before the swap, which lets the waiter reuse l
	if l.state.Swap(latchSet) == latchSleeping {
		w.pool.idle.wakeWaiter(w)
	}
}

// sleep moves l from unset to sleeping, and reports false if it is set.
// Waiter only, registered as parked.
func (l *latch) sleep() bool { return l.state.CompareAndSwap(latchUnset, latchSleeping) }

// woke moves l back to unset if it is sleeping. Waiter only.
func (l *latch) woke() { l.state.CompareAndSwap(latchSleeping, latchUnset) }

// reset makes a set latch unset, for another use. Owner only, once the
// waiter has seen it set.
func (l *latch) reset() { l.state.Store(latchUnset) }

// waiters holds the latches of the workers waiting inside tasks for one
// condition that may have several waiters (a Future's result, a Group's
// end, room in a Group's limit). A waiter adds its latch and then checks
// the condition again; the completer makes the condition true and then
// sets every latch added (setAll). n and the condition are both
// sequentially consistent atomics, so either the waiter's check sees the
// condition or the completer's load of n sees the latch (the Dekker
// order of the idle protocol, idle.go).
type waiters struct {
	n  atomic.Int32 // len(ls), for setAll's fast path
	mu sync.Mutex
	ls []*latch
}

// add registers l; the caller then checks the condition again.
func (ws *waiters) add(l *latch) {
	ws.mu.Lock()
	ws.ls = append(ws.ls, l)
	ws.n.Store(int32(len(ws.ls)))
	ws.mu.Unlock()
}

// setAll sets every latch added so far, and forgets them. Call it after
// making the condition true.
func (ws *waiters) setAll() {
	if ws.n.Load() == 0 {
		return
	}
	ws.setAllLocked()
}

// setAllLocked is setAll without the fast path, for a condition that is
// not an atomic (room in a channel): taking mu puts it either after a
// waiter's add, and it sets that waiter's latch, or before the add, and
// so before the waiter's check of the condition, which sees it true.
func (ws *waiters) setAllLocked() {
	ws.mu.Lock()
	for i, l := range ws.ls {
		l.set()
		ws.ls[i] = nil
	}
	ws.ls = ws.ls[:0]
	ws.n.Store(0)
	ws.mu.Unlock()
}
