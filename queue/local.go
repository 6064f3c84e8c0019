package queue

import (
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// mask maps an index to its slot.
const mask = Capacity - 1

// The indexes are 32 bits wide although 8 would address 256 slots: an
// index is compared only by wrapping subtraction, so it must not come
// back to the same value while a thief holds a stale copy of the head
// (ABA). With 32 bits the owner would have to push 2^32 tasks during one
// steal for that to happen (tokio#5041). Capacity must be at most half
// the index space so that "full" (tail-steal == Capacity) and "empty"
// (tail == real) can never be confused.
const (
	_ = uint32(1<<31 - Capacity)          // compile-time check: Capacity <= 1<<31
	_ = uint32(0 - Capacity&(Capacity-1)) // compile-time check: Capacity is a power of two
)

func pack(steal, real uint32) uint64 { return uint64(steal)<<32 | uint64(real) }

func unpack(h uint64) (steal, real uint32) { return uint32(h >> 32), uint32(h) }

// ring is the state the owner and the thieves share.
//
// Slots in [steal, tail) hold tasks or are being emptied; the other
// Capacity-(tail-steal) are free. With no steal in progress steal ==
// real. A thief's claim of n moves real alone, so [steal, steal+n) are
// that thief's to copy out; slots the owner pops meanwhile move real
// further, so [steal+n, real) are the owner's; [real, tail) belong to
// whoever advances real first: the owner popping or a thief claiming.
// The thief's commit moves steal up to real, freeing both its slots and
// those the owner popped during the steal.
//
// A slot is written only by whoever holds it, and each slot has one
// holder at a time:
//   - a free slot, by the owner: Push and PushBatch fill it at tail,
//     while tail-steal < Capacity, then publish it with the release store
//     of tail; a worker that steals into its own ring (StealInto's dst)
//     fills free slots of that ring the same way, as its owner;
//   - a slot in [real, tail), by nobody: it is read by whoever claims
//     it, a thief after its acquire load of tail;
//   - a slot the owner moved real past (Pop, or both indexes in
//     takeHalf), by the owner, which zeroes it after reading it;
//   - a slot a thief claimed, by that thief, which zeroes it after
//     copying it out and before its commit CAS moves steal past it.
//
// So the owner and the thieves all write slots, never the same one at
// once: the owner's pushes stay outside [steal, tail), and a zeroing is
// done only by the one whose CAS of head claimed the slot. A slot a
// thief zeroed becomes free at its commit CAS, and the owner writes it
// again only after its acquire load of head has seen that commit
// (Push's tail-steal < Capacity), so the zeroing happens before the
// reuse.
type ring[T any] struct {
	_ cpu.CacheLinePad
	// head packs steal (high 32 bits) and real (low 32 bits). Written with
	// CAS by the owner (pop, overflow) and by thieves (claim, commit).
	//
	// head and tail share a cache line, as in Tokio: every push, pop and
	// steal touches both, so separate lines would double the coherence
	// traffic, each operation moving two lines between cores instead of
	// one (BenchmarkSteal measures it).
	head atomic.Uint64
	// tail is written only by the owner; its store publishes the slot
	// written before it to thieves, whose load of tail pairs with it.
	tail atomic.Uint32
	_    cpu.CacheLinePad
	buf  [Capacity]T
	own  ownerCheck
}

// New returns a ring's two handles: the owner's and the thieves'.
func New[T any]() (*Local[T], *Stealer[T]) {
	r := new(ring[T])
	return &Local[T]{r: r}, &Stealer[T]{r: r}
}

// Local is the owner's handle of a ring: push and pop. All of its methods
// must be called by the owning worker only, never concurrently; thieves
// use the Stealer.
type Local[T any] struct {
	r *ring[T]
	// What a full ring's Push hands back, made at the first overflow:
	// most rings never fill, and a pool of many workers would otherwise
	// hold half a ring more for each.
	spill *[Capacity/2 + 1]T
}

// Stealer is the thieves' handle of a ring. Its methods may be called
// from any goroutine, concurrently with each other and with the owner.
type Stealer[T any] struct {
	r *ring[T]
}

// Len returns the number of tasks in the ring. Owner only.
func (l *Local[T]) Len() int {
	steal, _ := unpack(l.r.head.Load())
	return int(l.r.tail.Load() - steal)
}

// Free returns how many tasks PushBatch can take now. Owner only. Thieves
// only ever make it grow.
func (l *Local[T]) Free() int { return Capacity - l.Len() }

// IsEmpty reports whether the owner has nothing to pop. Owner only.
func (l *Local[T]) IsEmpty() bool {
	_, real := unpack(l.r.head.Load())
	return real == l.r.tail.Load()
}

// Push appends t to the ring. When the ring is full it returns the tasks
// that the caller must queue elsewhere (a node's inject shard): the
// oldest half of the ring (Capacity/2 tasks) and t, or only t while a
// thief is copying tasks out. It returns nil when t went into the ring.
// The batch is the handle's own buffer: it is valid until the next Push,
// and the caller may clear it. Owner only.
func (l *Local[T]) Push(t T) (spilled []T) {
	r := l.r
	r.own.enter()
	for {
		// Acquire: pairs with the thieves' commit CAS, so that a slot they
		// finished copying may be reused.
		steal, real := unpack(r.head.Load())
		tail := r.tail.Load() // only the owner writes tail
		switch {
		case tail-steal < Capacity:
			r.buf[tail&mask] = t
			r.tail.Store(tail + 1) // release: publishes the slot to thieves
			r.own.exit()
			return nil
		case steal != real:
			// A thief is copying the oldest tasks out: room is coming, but
			// do not wait for it.
			r.own.exit()
			return append(l.spillBuf(), t)
		default:
			if batch, ok := l.takeHalf(real, tail); ok {
				r.own.exit()
				return append(batch, t)
			}
			// A thief claimed tasks meanwhile: there may be room now.
		}
	}
}

// takeHalf claims the Capacity/2 oldest tasks of a full ring and returns
// them in l.spill. It fails when a thief moves head first.
func (l *Local[T]) takeHalf(head, tail uint32) ([]T, bool) {
	const half = Capacity / 2
	if tail-head != Capacity {
		panic("queue: overflow of a ring that is not full")
	}
	r := l.r
	// Claim the oldest half by moving both steal and real past it. The CAS
	// fails if a thief claimed (real moved) since the owner loaded head.
	if !r.head.CompareAndSwap(pack(head, head), pack(head+half, head+half)) {
		return nil, false
	}
	// Copy out and clear (so the collector may have what the tasks held)
	// in at most two runs, the ring's end splitting the half.
	first := r.buf[head&mask : min(head&mask+half, Capacity)]
	rest := r.buf[:half-len(first)]
	batch := append(append(l.spillBuf(), first...), rest...)
	clear(first)
	clear(rest)
	return batch, true
}

// spillBuf returns l's spill buffer, empty, making it if need be.
func (l *Local[T]) spillBuf() []T {
	if l.spill == nil {
		l.spill = new([Capacity/2 + 1]T)
	}
	return l.spill[:0]
}

// PushBatch appends tasks, in order, to the ring. They must fit: the
// caller takes at most Free() tasks (for instance from an inject shard);
// a batch that does not fit panics. Owner only.
func (l *Local[T]) PushBatch(tasks []T) {
	if len(tasks) == 0 {
		return // common: a pull of one task from a shard runs it and pushes the rest, none
	}
	r := l.r
	r.own.enter()
	defer r.own.exit()
	steal, _ := unpack(r.head.Load())
	tail := r.tail.Load()
	if len(tasks) > Capacity-int(tail-steal) {
		panic("queue: PushBatch of more tasks than the ring has room for")
	}
	n := copy(r.buf[tail&mask:], tasks) // in at most two runs
	copy(r.buf[:], tasks[n:])
	r.tail.Store(tail + uint32(len(tasks))) // release: publishes the batch
}

// Pop removes and returns the oldest task. Owner only.
func (l *Local[T]) Pop() (T, bool) {
	r := l.r
	r.own.enter()
	head := r.head.Load()
	var idx uint32
	for {
		steal, real := unpack(head)
		if real == r.tail.Load() {
			r.own.exit()
			var zero T
			return zero, false
		}
		next := pack(steal, real+1)
		if steal == real {
			next = pack(real+1, real+1) // no steal in progress: move both
		}
		// Pairs with the thieves' claim: whoever moves real first owns
		// the slot.
		if r.head.CompareAndSwap(head, next) {
			idx = real & mask
			break
		}
		head = r.head.Load()
	}
	t := r.buf[idx]
	var zero T
	r.buf[idx] = zero
	r.own.exit()
	return t, true
}

// IsEmpty reports whether there is nothing left to steal or pop. Any
// goroutine.
func (s *Stealer[T]) IsEmpty() bool {
	_, real := unpack(s.r.head.Load())
	return real == s.r.tail.Load()
}

// Len returns how many tasks the ring holds at some moment during the
// call (the owner and thieves may change it meanwhile). Any goroutine.
func (s *Stealer[T]) Len() int {
	_, real := unpack(s.r.head.Load())
	return int(s.r.tail.Load() - real) // tail, read second, is at least real
}

// StealInto moves half of this ring's tasks (n - n/2 of n, the oldest)
// into dst, the calling worker's own ring, and returns one of them to run
// now and how many it moved, that one included (Tokio's steal_into
// counts the same). It gives up, returning 0, when dst is more than half
// full, when another thief is stealing from this ring, or when there is
// nothing to steal. The count is the steal's own: dst's Len before and
// after does not give it, since other thieves may finish taking from dst
// meanwhile. The caller must own dst. Any goroutine.
func (s *Stealer[T]) StealInto(dst *Local[T]) (t T, moved int) {
	if s.r == dst.r {
		panic("queue: StealInto the ring it steals from")
	}
	d := dst.r
	d.own.enter()
	defer d.own.exit()
	dstTail := d.tail.Load()
	dstSteal, _ := unpack(d.head.Load())
	if dstTail-dstSteal > Capacity/2 {
		return t, 0
	}
	n := s.stealInto(d, dstTail)
	if n == 0 {
		return t, 0
	}
	// Run the newest of the stolen tasks; publish the rest.
	idx := (dstTail + n - 1) & mask
	t = d.buf[idx]
	var zero T
	d.buf[idx] = zero
	if n > 1 {
		d.tail.Store(dstTail + n - 1) // release: publishes the stolen batch
	}
	return t, int(n)
}

// stealInto claims n - n/2 tasks, copies them to dst's slots from dstTail
// on (without publishing them) and returns n - n/2.
func (s *Stealer[T]) stealInto(d *ring[T], dstTail uint32) uint32 {
	r := s.r
	prev := r.head.Load()
	var n uint32
	for {
		steal, real := unpack(prev)
		if steal != real {
			return 0 // another thief is copying out of this ring
		}
		// Acquire: pairs with the owner's release store of tail, so the
		// slots up to tail are visible.
		avail := r.tail.Load() - real
		n = avail - avail/2
		if n == 0 {
			return 0
		}
		if n > Capacity/2 {
			// A stale head and a fresh tail can disagree for a moment; the
			// CAS below would fail anyway.
			prev = r.head.Load()
			continue
		}
		// Claim: move real, keep steal, so that the owner will not reuse
		// the claimed slots and other thieves keep off.
		next := pack(steal, real+n)
		if r.head.CompareAndSwap(prev, next) {
			break
		}
		prev = r.head.Load()
	}
	if raceEnabled {
		// Under -race, let the owner and the other thieves run while this
		// steal holds its claim, a window that is otherwise a few
		// nanoseconds wide (the runtime randomises its scheduler under
		// -race for the same reason), so that tests meet steals in
		// progress.
		runtime.Gosched()
	}
	first, _ := unpack(prev)
	var zero T
	for i := range n {
		src := (first + i) & mask
		d.buf[(dstTail+i)&mask] = r.buf[src]
		r.buf[src] = zero
	}
	// Commit: move steal up to real. The owner may have popped (moved
	// real) meanwhile, so retry with what it left; only this thief moves
	// steal.
	cur := pack(first, first+n)
	for {
		_, real := unpack(cur)
		if r.head.CompareAndSwap(cur, pack(real, real)) {
			return n
		}
		cur = r.head.Load()
		if steal, real := unpack(cur); steal == real {
			panic("queue: a steal in progress was ended by someone else")
		}
	}
}
