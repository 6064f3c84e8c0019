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

// minInjectSlots is the smallest ring an inject shard keeps.
const minInjectSlots = 64

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

	mu     sync.Mutex
	buf    []T // ring of len(buf) slots, a power of two
	head   int // index of the oldest task
	closed bool
}

// NewInjectShard returns an empty shard; bound > 0 makes TryPush fail with
// ErrFull once the shard holds bound tasks.
func NewInjectShard[T any](bound int) *InjectShard[T] {
	return &InjectShard[T]{bound: max(bound, 0), buf: make([]T, minInjectSlots)}
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
	return nil
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
	n := int(s.n.Load())
	if n == len(s.buf) {
		s.resize(2 * len(s.buf))
	}
	s.buf[(s.head+n)&(len(s.buf)-1)] = t
	s.n.Store(int64(n + 1))
}

// resize moves the tasks, oldest first, to a ring of size slots.
func (s *InjectShard[T]) resize(size int) {
	n := int(s.n.Load())
	buf := make([]T, size)
	for i := range n {
		buf[i] = s.buf[(s.head+i)&(len(s.buf)-1)]
	}
	s.buf, s.head = buf, 0
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
	if l := len(s.buf); l > minInjectSlots && int(s.n.Load()) < l/4 {
		s.resize(l / 2) // give back what a burst grew
	}
	return dst
}

// take removes the oldest task. s.mu must be held and the shard non-empty.
func (s *InjectShard[T]) take() T {
	var zero T
	t := s.buf[s.head]
	s.buf[s.head] = zero
	s.head = (s.head + 1) & (len(s.buf) - 1)
	s.n.Add(-1)
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
