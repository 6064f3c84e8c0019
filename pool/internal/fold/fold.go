// Package fold folds the results of a range of items in order, in
// bounded memory, while the items are worked on in parallel: the
// MapReduce of one node's block of chunks. A Window hands out items in
// order (Take), keeps the result of each item done and not yet folded in
// a ring, and whoever stores the result the fold waits for folds every
// result in order that is there (Put). A claim past the ring's length
// from the first item not folded is refused, so the results held never
// exceed the ring; a claimer refused that way may count itself as parked,
// and the Put that moves the fold on says how many to start again.
//
// Every method may be called from any goroutine; combine runs outside
// the lock, one call at a time per Window.
package fold

import "sync"

// Window folds the results of items [lo, hi) in order. The zero value is
// not usable; call Init.
type Window[T any] struct {
	mu      sync.Mutex
	lo      int // the first item
	next    int // the next item to hand out; next <= end
	end     int
	folded  int    // every item below it is folded into acc
	parked  int    // claimers that left at a full window
	ring    []T    // the result of item c at c % len(ring), once done, until folded
	ready   []bool // whether the ring's slot holds a result
	folding bool   // a caller is folding
	acc     T      // the fold of the items below folded
}

// Init makes w the window of items [lo, hi) that holds at most size
// results not yet folded (at least one; at most the items).
func (w *Window[T]) Init(lo, hi, size int) {
	w.lo, w.next, w.end, w.folded = lo, lo, hi, lo
	w.ring = make([]T, max(1, min(size, hi-lo)))
	w.ready = make([]bool, len(w.ring))
}

// Take hands out the next item, if any is left and it is inside the
// window. full says the window refused it; with park, such a refusal
// counts the caller as parked.
func (w *Window[T]) Take(park bool) (c int, ok, full bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.next >= w.end:
		return 0, false, false
	case w.next-w.folded >= len(w.ring):
		if park {
			w.parked++
		}
		return 0, false, true
	}
	c = w.next
	w.next++
	return c, true, false
}

// Put stores item c's result v and, unless another caller is folding,
// folds every result in order that is there with combine (the first
// item's result starts the fold). It returns how many parked claimers to
// start again: those parked when its fold moved on. A panic in combine
// leaves the window folding, so that nobody folds again; the caller
// fails the whole fold.
func (w *Window[T]) Put(c int, v T, combine func(a, b T) T) (restart int) {
	w.mu.Lock()
	slot := c % len(w.ring)
	w.ring[slot], w.ready[slot] = v, true
	if w.folding {
		w.mu.Unlock()
		return 0
	}
	w.folding = true
	start := w.folded
	for k := w.folded % len(w.ring); w.folded < w.end && w.ready[k]; k = w.folded % len(w.ring) {
		var zero T
		v := w.ring[k]
		w.ring[k], w.ready[k] = zero, false // the slot is free: the window moves on
		first := w.folded == w.lo
		w.folded++
		w.mu.Unlock()
		if first {
			w.acc = v
		} else {
			w.acc = combine(w.acc, v)
		}
		w.mu.Lock()
	}
	w.folding = false
	if w.folded > start {
		restart, w.parked = w.parked, 0
	}
	w.mu.Unlock()
	return restart
}

// Result returns the fold of every item, and false for an empty range.
// Call it once every item's result is Put.
func (w *Window[T]) Result() (T, bool) {
	return w.acc, w.end > w.lo
}
