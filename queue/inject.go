package queue

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrClosed is what Push returns once the shard no longer accepts work
// from outside; the task is handed back untouched.
var ErrClosed = errors.New("queue: inject shard closed")

// segmentSlots is the size of the blocks an inject shard's FIFO is made
// of: a linked list of fixed arrays grows and shrinks by whole blocks,
// never copying a task (a ring that doubles and halves copies every task
// it holds each time, and outside submission swings a shard's length
// widely).
const segmentSlots = 256

// maxSpares is how many emptied segments a shard keeps for its next
// growth. A shard that a full ring and its thieves keep filling and
// draining crosses segment boundaries at both ends, and in bursts (a
// full ring spills half of itself at once, a thief takes a batch): one
// spare overflows on a burst at the head and the next burst at the tail
// allocates (BenchmarkSpawnMany in pool measures it).
// Emptied segments beyond these go to the shard's sync.Pool: a backlog
// that drains and builds up again (a million tasks spawned, run, spawned)
// reuses them instead of allocating its whole length anew each time,
// and the garbage collector frees them once the shard stops needing them.
const maxSpares = 4

type segment[T any] struct {
	slots [segmentSlots]T
	next  *segment[T]
}

// InjectShard is a node's FIFO of tasks from outside its workers and of
// the halves that full rings move out. All methods may be called from any
// goroutine. The zero value is not usable; call NewInjectShard.
//
// The shard is unbounded: a caller that wants back-pressure counts its
// own tasks (the pool bounds each node's queue itself). Requeue, which
// takes the overflow of a worker's ring too, ignores Close: tasks already
// accepted are never lost.
type InjectShard[T any] struct {
	n atomic.Int64 // number of tasks; read without the lock

	mu sync.Mutex
	// The tasks are head.slots[first:] ... tail.slots[:last], oldest
	// first; head == tail when they fit in one segment.
	head, tail  *segment[T]
	first, last int
	spares      *segment[T] // emptied segments kept for the next growth, linked by next
	nspares     int
	more        sync.Pool // emptied segments beyond maxSpares: *segment[T]
	closed      bool
	pushed      uint64 // tasks taken by Push
	every       uint64 // SampleEvery: mark every every-th task Push takes; 0: none
	mark        func(T) T
}

// NewInjectShard returns an empty shard.
func NewInjectShard[T any]() *InjectShard[T] {
	seg := new(segment[T])
	return &InjectShard[T]{head: seg, tail: seg}
}

// Len returns the number of tasks, without taking the lock.
func (s *InjectShard[T]) Len() int { return int(s.n.Load()) }

// IsEmpty reports whether the shard has no task, without taking the lock.
func (s *InjectShard[T]) IsEmpty() bool { return s.n.Load() == 0 }

// Push appends t. After Close it returns ErrClosed and t is not taken.
func (s *InjectShard[T]) Push(t T) error {
	s.lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.every != 0 && s.pushed%s.every == 0 {
		t = s.mark(t)
	}
	s.append(t)
	s.n.Add(1)
	s.pushed++
	return nil
}

// SampleEvery makes Push store mark(t) instead of t for every n-th task
// it takes (the first included), counted under the shard's lock, which
// Push holds anyway: a sample of the tasks from outside that costs the
// others no shared counter and no random number. mark runs under the
// lock, so it must be short. Call it before the shard is shared.
func (s *InjectShard[T]) SampleEvery(n uint64, mark func(T) T) {
	s.every, s.mark = n, mark
}

// Pushed returns how many tasks Push has taken:
// the work accepted from outside, not counting Requeue and overflow.
func (s *InjectShard[T]) Pushed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushed
}

// Requeue appends ts, in order, even after Close: tasks the pool already
// accepted, which move between shards or out of a full ring.
func (s *InjectShard[T]) Requeue(ts ...T) {
	s.lock()
	defer s.mu.Unlock()
	s.n.Add(int64(len(ts))) // once: the length's line is read by every searcher
	for len(ts) > 0 {
		if s.last == segmentSlots {
			s.grow()
		}
		m := copy(s.tail.slots[s.last:], ts) // in bulk: one barrier pass, not one per task
		s.last += m
		ts = ts[m:]
	}
}

// append adds t at the back; the caller counts it in n. s.mu must be
// held.
func (s *InjectShard[T]) append(t T) {
	if s.last == segmentSlots {
		s.grow()
	}
	s.tail.slots[s.last] = t
	s.last++
}

// grow links an empty segment, a spare if there is one, after the full
// tail. s.mu must be held.
func (s *InjectShard[T]) grow() {
	seg := s.spares
	if seg != nil {
		s.spares, seg.next = seg.next, nil
		s.nspares--
	} else if v, ok := s.more.Get().(*segment[T]); ok {
		seg = v
	} else {
		seg = new(segment[T])
	}
	s.tail.next = seg
	s.tail, s.last = seg, 0
}

// Pop removes and returns the oldest task.
func (s *InjectShard[T]) Pop() (T, bool) {
	var zero T
	if s.IsEmpty() {
		return zero, false
	}
	s.lock()
	defer s.mu.Unlock()
	if s.n.Load() == 0 {
		return zero, false
	}
	s.n.Add(-1)
	return s.take(), true
}

// PopN removes up to n of the oldest tasks and appends them, oldest first,
// to dst.
func (s *InjectShard[T]) PopN(dst []T, n int) []T {
	if n <= 0 || s.IsEmpty() {
		return dst
	}
	s.lock()
	defer s.mu.Unlock()
	k := min(n, int(s.n.Load()))
	s.n.Add(-int64(k))
	for k > 0 {
		end := segmentSlots
		if s.head == s.tail {
			end = s.last
		}
		run := s.head.slots[s.first:min(s.first+k, end)]
		dst = append(dst, run...) // in bulk, as is the clearing
		clear(run)
		s.first += len(run)
		k -= len(run)
		s.advance()
	}
	return dst
}

// take removes the oldest task; the caller counts it in n. s.mu must be
// held and the shard non-empty.
func (s *InjectShard[T]) take() T {
	var zero T
	t := s.head.slots[s.first]
	s.head.slots[s.first] = zero
	s.first++
	s.advance()
	return t
}

// advance moves past the head segment once it is used up, and starts the
// segment over once the shard is empty. s.mu must be held.
func (s *InjectShard[T]) advance() {
	switch {
	case s.head == s.tail && s.first == s.last:
		s.first, s.last = 0, 0 // empty: start the segment over
	case s.first == segmentSlots:
		done := s.head
		s.head, s.first = done.next, 0
		done.next = nil
		// Its slots are all zero again.
		if s.nspares < maxSpares {
			done.next, s.spares = s.spares, done
			s.nspares++
		} else {
			s.more.Put(done)
		}
	}
}

// Close makes Push refuse work from now on. Tasks already in the shard
// stay and can be popped. Close is idempotent.
func (s *InjectShard[T]) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// lock takes s.mu, trying it for a few microseconds before it parks.
// sync.Mutex spins by itself only while its processor has nothing else
// to run, and a goroutine that submits to the pool has often just woken
// a worker, which waits in that processor's queue: on a busy shard the
// submitter parked at once, its processor went to the worker, and with
// every processor running a worker's locked thread it got one back
// milliseconds later. A holder keeps the lock for well under a
// microsecond, unless it is descheduled.
func (s *InjectShard[T]) lock() {
	for range lockTries {
		if s.mu.TryLock() {
			return
		}
	}
	s.mu.Lock()
}

// lockTries is how often lock tries before it parks: a failed try is a
// load of the lock's word (or a compare-and-swap that lost), about a
// nanosecond, so 5000 of them last a few microseconds: longer than the
// shard's critical sections (a push, a pop of a batch), shorter than
// parking and waking a goroutine.
const lockTries = 5000
