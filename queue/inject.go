package queue

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Errors the inject shard returns; the task is handed back untouched.
var (
	// ErrClosed: the shard no longer accepts work from outside.
	ErrClosed = errors.New("queue: inject shard closed")
	// ErrFull: the shard holds its bound of tasks (TryPush only).
	ErrFull = errors.New("queue: inject shard full")
)

// segmentSlots is the size of the blocks an inject shard's FIFO is made
// of: a linked list of fixed arrays grows and shrinks by whole blocks,
// never copying a task (a ring that doubled and halved spent a seventh of
// an outside-submission benchmark resizing).
const segmentSlots = 256

type segment[T any] struct {
	slots [segmentSlots]T
	next  *segment[T]
}

// InjectShard is a node's FIFO of tasks from outside its workers and of
// the halves that full rings move out. All methods may be called from any
// goroutine. The zero value is not usable; call NewInjectShard.
//
// A bound makes TryPush refuse work at that length, for back-pressure.
// Push and PushBatch ignore the bound, and the overflow of a worker's ring
// ignores the bound and Close: tasks already accepted are never lost.
type InjectShard[T any] struct {
	n     atomic.Int64 // number of tasks; read without the lock
	bound int          // 0: unbounded

	mu sync.Mutex
	// The tasks are head.slots[first:] ... tail.slots[:last], oldest
	// first; head == tail when they fit in one segment.
	head, tail  *segment[T]
	first, last int
	spare       *segment[T] // one emptied segment kept for the next growth
	closed      bool
	pushed      uint64 // tasks taken by Push, TryPush and PushBatch
}

// NewInjectShard returns an empty shard; bound > 0 makes TryPush fail with
// ErrFull once the shard holds bound tasks.
func NewInjectShard[T any](bound int) *InjectShard[T] {
	seg := new(segment[T])
	return &InjectShard[T]{bound: max(bound, 0), head: seg, tail: seg}
}

// Len returns the number of tasks, without taking the lock.
func (s *InjectShard[T]) Len() int { return int(s.n.Load()) }

// IsEmpty reports whether the shard has no task, without taking the lock.
func (s *InjectShard[T]) IsEmpty() bool { return s.n.Load() == 0 }

// Bound returns the TryPush bound, 0 when unbounded.
func (s *InjectShard[T]) Bound() int { return s.bound }

// Push appends t. After Close it returns ErrClosed and t is not taken.
func (s *InjectShard[T]) Push(t T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.append(t)
	s.pushed++
	return nil
}

// Pushed returns how many tasks Push, TryPush and PushBatch have taken:
// the work accepted from outside, not counting Requeue and overflow.
func (s *InjectShard[T]) Pushed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushed
}

// TryPush appends t unless the shard is closed (ErrClosed) or holds its
// bound of tasks (ErrFull); then t is not taken.
func (s *InjectShard[T]) TryPush(t T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.bound > 0 && int(s.n.Load()) >= s.bound:
		return ErrFull
	}
	s.append(t)
	s.pushed++
	return nil
}

// PushBatch appends tasks in order, all or none: after Close it returns
// ErrClosed and takes none.
func (s *InjectShard[T]) PushBatch(tasks []T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for _, t := range tasks {
		s.append(t)
	}
	s.pushed += uint64(len(tasks))
	return nil
}

// Requeue appends t whatever the bound and Close: for a task the pool
// already accepted and moves between shards.
func (s *InjectShard[T]) Requeue(t T) { s.pushOverflow(nil, t) }

// pushOverflow appends batch then t, whatever the bound and Close: these
// tasks were already accepted by a worker's ring.
func (s *InjectShard[T]) pushOverflow(batch []T, t T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range batch {
		s.append(b)
	}
	s.append(t)
}

// append adds t at the back. s.mu must be held.
func (s *InjectShard[T]) append(t T) {
	if s.last == segmentSlots {
		seg := s.spare
		if seg == nil {
			seg = new(segment[T])
		}
		s.spare = nil
		s.tail.next = seg
		s.tail, s.last = seg, 0
	}
	s.tail.slots[s.last] = t
	s.last++
	s.n.Add(1)
}

// Pop removes and returns the oldest task.
func (s *InjectShard[T]) Pop() (T, bool) {
	var zero T
	if s.IsEmpty() {
		return zero, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n.Load() == 0 {
		return zero, false
	}
	return s.take(), true
}

// PopN removes up to n of the oldest tasks and appends them, oldest first,
// to dst.
func (s *InjectShard[T]) PopN(dst []T, n int) []T {
	if n <= 0 || s.IsEmpty() {
		return dst
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := min(n, int(s.n.Load())); k > 0; k-- {
		dst = append(dst, s.take())
	}
	return dst
}

// take removes the oldest task. s.mu must be held and the shard non-empty.
func (s *InjectShard[T]) take() T {
	var zero T
	t := s.head.slots[s.first]
	s.head.slots[s.first] = zero
	s.first++
	s.n.Add(-1)
	switch {
	case s.head == s.tail && s.first == s.last:
		s.first, s.last = 0, 0 // empty: start the segment over
	case s.first == segmentSlots:
		done := s.head
		s.head, s.first = done.next, 0
		done.next = nil
		if s.spare == nil {
			s.spare = done // its slots are all zero again
		}
	}
	return t
}

// Close makes Push, TryPush and PushBatch refuse work from now on. Tasks
// already in the shard stay and can be popped. Close is idempotent.
func (s *InjectShard[T]) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// Closed reports whether Close was called.
func (s *InjectShard[T]) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
