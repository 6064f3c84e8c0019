package pool

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/observe"
)

// A worker's seat: the state a caller from outside borrows (join.go),
// kept apart from the joining itself so that the worker's own files use
// it without reaching up to the calls that join.

// The seat's handshake. A worker's thread that sleeps in park offers its
// seat (asleep) after everything it does before sleeping, and takes it
// back (own) after it wakes; a caller lends an asleep seat (lent) with a
// compare-and-swap, under the idle lock that takes it off the sleepers'
// lists, and gives it back (asleep). The states are one word, so the
// thread's writes before it offered happen before the caller's reads,
// and the caller's writes before it gave back happen before the thread's
// reads. A thread that wakes while its seat is lent (a stale token, a
// keep-off's timer, Close waking everyone) marks it lentWoken and waits
// on its token channel; the caller that gives back a lentWoken seat
// sends it a token.
type seat struct{ state atomic.Int32 }

const (
	seatOwn       int32 = iota // the worker's goroutine holds its place
	seatAsleep                 // its thread sleeps in park; a caller may lend the seat
	seatLent                   // a caller holds the seat
	seatLentWoken              // a caller holds it, and the thread woke and waits for it
)

// maxCallers bounds the callers on seats at once, per pool: workerOf
// scans their table (up to the highest entry used) for every call from
// outside while any caller is on a seat. More callers hand off as before.
const maxCallers = 64

// offer makes the seat lendable: the thread is about to sleep and
// touches none of the worker's fields until it reclaims. Owner only.
func (s *seat) offer() { s.state.Store(seatAsleep) }

// reclaim takes the seat back after the thread woke, waiting on wake for
// a caller that holds it to give it back. Owner only.
func (s *seat) reclaim(wake chan struct{}) {
	for !s.state.CompareAndSwap(seatAsleep, seatOwn) {
		if s.state.CompareAndSwap(seatLent, seatLentWoken) || s.state.Load() == seatLentWoken {
			<-wake // the caller's token (or a stale one: look again)
		}
	}
}

// caller is what a worker keeps while a caller holds its seat (owner
// only, the owner being the caller then).
type caller struct {
	on     bool            // a caller holds the seat
	g      uintptr         // the worker's goroutine, given back at leave
	labels *observe.Set    // the worker's label set, given back at leave
	ctx    context.Context // the loop's context, whose labels the caller leaves under; nil for Run
	bound  *pin.Thread     // the caller's thread while bound to the seat's CPUs (bindCaller)
	wake   chan struct{}   // the caller's wake-up tokens (Worker.route); made at the first join
	timer  *time.Timer     // the caller's keep-off timer (Worker.sleep)
	slot   int             // its index in sched.callers
}
