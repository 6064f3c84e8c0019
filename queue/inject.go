package queue

// The inject shard's protocol: pushes take no lock, pops take turns.
//
// The FIFO is a chain of segments of segmentSlots slots, as in
// crossbeam-deque's Injector. Every slot ever used has an index, counted
// from 0 over the shard's life; segment b holds the indexes [b.base,
// b.base+segmentSlots), and the bases are multiples of segmentSlots, so an
// index names its slot in whichever segment holds it.
//
// Producers (Push, from any goroutine; Requeue, under mu):
//
//  1. Claim. tail packs the next free index (above bit 0) and the closed
//     bit (bit 0). A producer loads tail, then tailSeg, the segment that
//     holds tail's index. If the index lies outside tailSeg's range, the
//     producer that claimed the last slot of the segment before it is
//     still linking the next one: wait and load again. Otherwise one
//     compare-and-swap moves tail on by the slots claimed. It succeeds only
//     if tail still holds the loaded index, and the index is then
//     in the loaded segment: a segment is re-based (reused) only after
//     every slot of it was taken, so after tail passed the index, and
//     tail never comes back to an index. Push refuses when the closed bit
//     is set; since the bit lives in the word the claim swaps, a Push
//     either claims before Close's store or sees the bit: there is no
//     third case.
//  2. Grow. The producer whose claim covers the last slot of a segment
//     links the segment after it (seg.next, then tailSeg), before it marks
//     any slot ready. Each boundary has exactly one such producer, and it
//     links before anyone can claim a slot past the boundary.
//  3. Write. The producer writes its task into the slot, adds to n, and
//     then stores the slot's ready flag. n's add is an atomic
//     read-modify-write that precedes Push's return, which is what the
//     pool's idle protocol needs (pool/idle.go, "Why no task is left
//     queued with every worker asleep"). Close, which returns only once
//     every accepted task is counted, waits for these adds: under mu, n
//     plus the slots taken equals the slots claimed once none is pending.
//
// Consumers (Pop, PopN) and Close's wait hold mu; so does Requeue, which
// therefore never leaves a slot half written while a consumer looks. A
// consumer takes k = min(wanted, n) tasks and subtracts k from n first.
// n counts only claimed slots (a producer adds after its claim), less the
// slots taken, so the k slots after the head are all claimed; a claimed
// slot whose ready flag is still clear is being written, and the consumer
// waits for the flag. The ready flag of a segment's last slot is stored
// after its next pointer, so a consumer that saw it may follow next.
//
// Reuse: a consumer clears each slot and flag it takes; an emptied
// segment goes to handoff (the segment the next growing Push takes, with
// one swap), else to the spares list (mu), else to the sync.Pool. The
// slot writes of a segment's next life happen after its clearing: the
// segment passes from consumer to producer through handoff or the
// sync.Pool, then through tailSeg.

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// ErrClosed is what Push returns once the shard no longer accepts work
// from outside; the task is handed back untouched.
var ErrClosed = errors.New("queue: inject shard closed")

// maxSpares is how many emptied segments a shard keeps in its spares
// list, besides the one in handoff, for its next growth. A shard that a
// full ring and its thieves keep filling and draining crosses segment
// boundaries at both ends, and in bursts (a full ring spills half of
// itself at once, a thief takes a batch): one spare overflows on a burst
// at the head and the next burst at the tail allocates.
// Emptied segments beyond these go to the shard's sync.Pool: a backlog
// that drains and builds up again (a million tasks spawned, run, spawned)
// reuses them instead of allocating its whole length anew each time,
// and the garbage collector frees them once the shard stops needing them.
const maxSpares = 4

// closedBit is the bit of tail that Close sets; the index is above it.
const closedBit = 1

type segment[T any] struct {
	slots [segmentSlots]T
	// ready[i] is 1 once slots[i] holds its task. Push stores it
	// atomically, after the task and n's add (it pairs with the
	// consumers' atomic loads in Pop, PopN and await); Requeue
	// and the consumers write it plainly under mu.
	ready [segmentSlots]uint32
	// next is the segment after this one. Its grower writes it before
	// it stores the ready flag of this segment's last slot (which
	// publishes it to consumers) and before tailSeg (which publishes it
	// to producers); a consumer clears it under mu before the segment is
	// reused.
	next *segment[T]
	// base is the index of slots[0]. The grower stores it before it
	// publishes the segment in tailSeg; a producer loads it to check its
	// index against the segment (see the protocol above).
	base atomic.Uint64
}

// InjectShard is a node's FIFO of tasks from outside its workers and of
// the halves that full rings move out. All methods may be called from any
// goroutine; Push takes no lock. The zero value is not usable; call
// NewInjectShard.
//
// The shard is unbounded: a caller that wants back-pressure counts its
// own tasks (the pool bounds each node's queue itself). Requeue, which
// takes the overflow of a worker's ring too, ignores Close: tasks already
// accepted are never lost.
type InjectShard[T any] struct {
	// The producers' line.
	tail    atomic.Uint64              // next free index << 1 | closedBit; swapped by a claim, Or'ed by Close
	tailSeg atomic.Pointer[segment[T]] // the segment holding tail's index, once linked; stored by its grower
	n       atomic.Int64               // tasks claimed and not taken: added by producers after their claim, subtracted by consumers before they take
	every   uint64                     // SampleEvery: mark the tasks whose index is a multiple of every; 0: none
	mark    func(T) T
	_       [64]byte

	// The consumers' part: mu guards what follows, except handoff and
	// more, which are safe by themselves.
	mu       sync.Mutex
	head     *segment[T] // the segment of the oldest task (or of tail, when empty)
	first    int         // the oldest task's slot in head
	spares   *segment[T] // emptied segments kept for the next growth, linked by next
	nspares  int
	requeued uint64                     // slots claimed by Requeue: Pushed is the rest
	handoff  atomic.Pointer[segment[T]] // an emptied segment for the next grower: set by consumers (CompareAndSwap from nil), taken by a grower's Swap
	more     sync.Pool                  // emptied segments beyond maxSpares: *segment[T]
}

// NewInjectShard returns an empty shard.
func NewInjectShard[T any]() *InjectShard[T] {
	seg := new(segment[T])
	s := &InjectShard[T]{head: seg}
	s.tailSeg.Store(seg)
	return s
}

// Len returns the number of tasks, without taking the lock. It counts a
// Push's task from before Push returns until a consumer takes it.
func (s *InjectShard[T]) Len() int { return int(s.n.Load()) }

// IsEmpty reports whether the shard has no task, without taking the lock.
func (s *InjectShard[T]) IsEmpty() bool { return s.n.Load() == 0 }

// Push appends t. After Close it returns ErrClosed and t is not taken.
// Push takes no lock: it may wait only for another producer that is
// between its claim and the link of a new segment.
func (s *InjectShard[T]) Push(t T) error {
	seg, i, ok := s.claim(1, true)
	if !ok {
		return ErrClosed
	}
	if i%segmentSlots == segmentSlots-1 {
		s.grow(seg, s.takeSpare())
	}
	if s.every != 0 && i%s.every == 0 {
		t = s.mark(t)
	}
	off := i % segmentSlots
	seg.slots[off] = t
	s.n.Add(1)
	atomic.StoreUint32(&seg.ready[off], 1) // pairs with await's load
	return nil
}

// claim reserves the k slots from tail's index on (step 1 of the
// protocol) and returns the segment that holds the first and its index.
// With refuse, it reserves nothing once the shard is closed and reports
// false.
func (s *InjectShard[T]) claim(k uint64, refuse bool) (*segment[T], uint64, bool) {
	for try := 0; ; try++ {
		w := s.tail.Load() // pairs with the claims' swaps and Close's Or
		if refuse && w&closedBit != 0 {
			return nil, 0, false
		}
		i := w >> 1
		seg := s.tailSeg.Load() // pairs with grow's store
		if i-seg.base.Load() >= segmentSlots {
			backoff(try) // the grower of i's segment has not linked it yet
			continue
		}
		if s.tail.CompareAndSwap(w, w+k<<1) {
			return seg, i, true
		}
	}
}

// grow links next after seg, whose last slot the caller claimed, and
// makes it the tail segment (step 2 of the protocol).
func (s *InjectShard[T]) grow(seg, next *segment[T]) *segment[T] {
	next.base.Store(seg.base.Load() + segmentSlots)
	seg.next = next
	s.tailSeg.Store(next) // pairs with claim's load
	return next
}

// takeSpare returns an empty segment for a growing Push, without a lock:
// handoff's, the sync.Pool's or a new one.
func (s *InjectShard[T]) takeSpare() *segment[T] {
	if seg := s.handoff.Swap(nil); seg != nil { // pairs with advance's CompareAndSwap
		return seg
	}
	if seg, ok := s.more.Get().(*segment[T]); ok {
		return seg
	}
	return new(segment[T])
}

// SampleEvery makes Push store mark(t) instead of t for each task it
// takes whose index in the shard (counted over Push's and Requeue's tasks
// together, from 0) is a multiple of n: about one in n of the tasks from
// outside, the first among them if nothing was requeued before, at the
// cost of no shared counter and no random number. mark runs on Push's
// goroutine. Call it before the shard is shared.
func (s *InjectShard[T]) SampleEvery(n uint64, mark func(T) T) {
	s.every, s.mark = n, mark
}

// Pushed returns how many tasks Push has taken:
// the work accepted from outside, not counting Requeue and overflow.
// It takes the consumers' lock, which Requeue holds while it claims.
func (s *InjectShard[T]) Pushed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tail.Load()>>1 - s.requeued // Requeue claims under mu
}

// Requeue appends ts, in order, even after Close: tasks the pool already
// accepted, which move between shards or out of a full ring. It takes the
// consumers' lock, so that no consumer ever waits for its slots.
func (s *InjectShard[T]) Requeue(ts ...T) {
	if len(ts) == 0 {
		return
	}
	s.lock()
	defer s.mu.Unlock()
	k := uint64(len(ts))
	s.requeued += k
	seg, i, _ := s.claim(k, false)
	// Link every segment up to the one holding the next free index, as
	// the claimer of each last slot must, before anything is marked ready.
	for last, end := seg, i+k; end-last.base.Load() >= segmentSlots; {
		last = s.grow(last, s.spare())
	}
	off := int(i % segmentSlots)
	for len(ts) > 0 {
		m := copy(seg.slots[off:], ts)          // in bulk: one barrier pass, not one per task
		copy(seg.ready[off:off+m], allReady[:]) // plain: consumers look only under mu, which this holds
		ts = ts[m:]
		if off += m; off == segmentSlots {
			seg, off = seg.next, 0
		}
	}
	s.n.Add(int64(k)) // once: the length's line is read by every searcher
}

// allReady is a segment's worth of set ready flags, for Requeue to copy.
var allReady = func() (r [segmentSlots]uint32) {
	for i := range r {
		r[i] = 1
	}
	return r
}()

// spare returns an empty segment for a growing Requeue: one from the
// spares list, else takeSpare's. s.mu must be held.
func (s *InjectShard[T]) spare() *segment[T] {
	if seg := s.spares; seg != nil {
		s.spares, seg.next = seg.next, nil
		s.nspares--
		return seg
	}
	return s.takeSpare()
}

// Pop removes and returns the oldest task. It reports false when Len is
// 0. Like PopN, it takes the consumers' lock, and may wait for a Push
// that claimed the oldest slot and is still writing it.
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
	seg, off := s.head, s.first
	await(&seg.ready[off])
	t := seg.slots[off]
	seg.slots[off], seg.ready[off] = zero, 0
	s.first++
	s.advance()
	return t, true
}

// PopN removes up to n of the oldest tasks, at most Len, and appends
// them, oldest first, to dst. It takes the consumers' lock, and may wait
// for a Push that claimed one of their slots and is still writing it.
func (s *InjectShard[T]) PopN(dst []T, n int) []T {
	if n <= 0 || s.IsEmpty() {
		return dst
	}
	s.lock()
	defer s.mu.Unlock()
	k := min(n, int(s.n.Load()))
	s.n.Add(-int64(k))
	for k > 0 {
		seg := s.head
		end := min(s.first+k, segmentSlots)
		ready := seg.ready[s.first:end]
		for j := range ready {
			if atomic.LoadUint32(&ready[j]) == 0 { // pairs with Push's store; set unless a push is mid-write
				await(&ready[j])
			}
		}
		run := seg.slots[s.first:end]
		dst = append(dst, run...) // in bulk, as is the clearing
		clear(run)
		clear(ready)
		s.first = end
		k -= len(run)
		s.advance()
	}
	return dst
}

// advance moves past the head segment once it is used up, and recycles
// it. s.mu must be held; the ready flag of head's last slot was seen if
// first reached the end.
func (s *InjectShard[T]) advance() {
	if s.first < segmentSlots {
		return
	}
	done := s.head
	s.head, s.first = done.next, 0
	done.next = nil
	// Its slots and flags are all zero again.
	switch {
	case s.handoff.CompareAndSwap(nil, done): // pairs with takeSpare's Swap
	case s.nspares < maxSpares:
		done.next, s.spares = s.spares, done
		s.nspares++
	default:
		s.more.Put(done)
	}
}

// Close makes Push refuse work from now on. Tasks already in the shard
// stay and can be popped. When Close returns, every task Push accepted is
// in the shard, counted by Len: Close waits, under the consumers' lock,
// for the pushes that claimed their slot before it to add to n. Close is
// idempotent.
func (s *InjectShard[T]) Close() {
	s.tail.Or(closedBit) // pairs with claim's load and swap
	s.lock()
	defer s.mu.Unlock()
	// No claim moves tail now: Push refuses and Requeue needs mu. Of the
	// claimed slots, those below the head were taken (each counted out
	// of n by its consumer, none of which is running), and Requeue's
	// were counted in n under mu; so n falls short of the rest by the
	// pushes still between their claim and their add.
	claimed := s.tail.Load() >> 1
	taken := s.head.base.Load() + uint64(s.first)
	for try := 0; uint64(s.n.Load()) != claimed-taken; try++ { // pairs with Push's add
		backoff(try)
	}
}

// await returns once *flag, a slot's ready flag, is set: its producer has
// claimed the slot and is writing it.
func await(flag *uint32) {
	for try := 0; atomic.LoadUint32(flag) == 0; try++ { // pairs with Push's store
		backoff(try)
	}
}

// backoff waits a little before the try-th look again at what another
// producer is in the middle of (a few stores): it spins first, then
// yields the processor, in case the producer was descheduled.
func backoff(try int) {
	if try >= spinTries {
		runtime.Gosched()
	}
}

// spinTries is how many looks backoff lets pass before it yields: about
// the time a producer takes from its claim to its ready flag.
const spinTries = 64

// lock takes s.mu, trying it for a few microseconds before it parks.
// sync.Mutex spins by itself only while its processor has nothing else
// to run, and a goroutine that requeues or pops has often just woken a
// worker, which waits in that processor's queue: on a busy shard the
// caller parked at once, its processor went to the worker, and with
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
// shard's critical sections (a requeue, a pop of a batch), shorter than
// parking and waking a goroutine.
const lockTries = 5000
