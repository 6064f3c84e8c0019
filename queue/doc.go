// Package queue holds a worker's run queue and its node's inject shard.
//
// The run queue is Tokio's bounded single-producer, multi-consumer ring
// (tokio/src/runtime/scheduler/multi_thread/queue.rs), kept protocol for
// protocol: Capacity slots, a 64-bit head packing two 32-bit indexes
// (steal in the high half, real in the low half) and a 32-bit tail
// written only by the owner. New returns the two handles: the owner's
// Local (push, pop) and the Stealer (steal half into another worker's
// Local), so that a thief cannot call push.
//
// The inject shard is a FIFO of linked 256-slot segments, as
// crossbeam-deque's Injector: Push takes no lock (one compare-and-swap on
// a tail word that also holds the closed bit claims a slot, which the
// pusher then writes and marks ready), while the consumers (Pop, PopN)
// and Requeue take turns under a mutex; an atomic length answers "is it
// empty?" without either. It is the queue of work submitted from outside
// the workers and of the halves that full rings move out. It can be
// closed: after Close it refuses new work and hands it back, never
// dropping it.
//
// Panic policy: using the owner's handle from two goroutines at once
// would corrupt the ring; race-enabled builds detect it and panic with a
// message. A batch push that does not fit panics: the caller must check
// Free first.
package queue
