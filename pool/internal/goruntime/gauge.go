package goruntime

import (
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// How a spinning searcher gives way to goroutines that wait for its
// processor (Worker.spin): it looks at whether goroutines wait for a
// processor at most every GaugeEvery, through its pool's Gauge,
// and gives way when two looks in a row, at two different readings, see
// them (Crowding).

// GaugeEvery is how often readings of the runtime's count of runnable
// goroutines begin at most, for a whole pool (Gauge), and how far
// apart one searcher's looks at it are at least (Worker.spin).
const GaugeEvery = 2 * time.Microsecond

// Gauge tells a pool's spinning searchers whether goroutines wait
// for a processor: the runtime's count of runnable goroutines, read by
// whichever searcher finds the last reading GaugeEvery old, and shared.
//
// The runtime counts them under its scheduler's global lock, which every
// goroutine's yield and many of its wake-ups take, and behind a semaphore
// that parks a reader that finds it held: a parked worker is a thread
// switch. Read by every searcher for itself every microsecond or so, the
// readings would grow with the number of searchers (up to half the
// workers of a machine) and contend with each other and with the whole
// process's scheduling. Shared, at most one begins per GaugeEvery for the
// whole pool.
type Gauge struct {
	_ [64]byte
	// at is when the last reading began, on the pool's clock; the
	// searcher whose CAS moves it takes the next one.
	at atomic.Int64
	// reads numbers the readings as they begin.
	reads atomic.Uint64
	// last is the latest reading published: its number << 1, | 1 if it
	// found runnable goroutines. A reading that ends after a later one
	// does not replace it.
	last atomic.Uint64
	_    [64]byte
}

// Waiting returns the latest reading, its number (0: none yet) and
// whether it found goroutines waiting for a processor, taking a new one
// with the caller's own sample buffer when the last began GaugeEvery or
// more before now (the pool's clock).
func (g *Gauge) Waiting(now int64, sample []metrics.Sample) (seq uint64, runnable bool) {
	last := g.at.Load()
	if now-last < int64(GaugeEvery) || !g.at.CompareAndSwap(last, now) {
		r := g.last.Load()
		return r >> 1, r&1 == 1
	}
	seq = g.reads.Add(1)
	metrics.Read(sample)
	runnable = sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > 0
	r := seq << 1
	if runnable {
		r |= 1
	}
	for old := g.last.Load(); old>>1 < seq && !g.last.CompareAndSwap(old, r); old = g.last.Load() {
	}
	return seq, runnable
}

// Crowding counts a spinning searcher's looks in a row that saw goroutines
// waiting for a processor. One sighting is not enough to give way: a
// goroutine outside the pool that waits for a result yields its processor
// while it waits (spinUntil), and is runnable for a moment each time.
// Parking on such a sighting puts a thread wake-up, tens of microseconds,
// on the next hand-off. Two looks in a row, a few microseconds apart,
// rarely both catch such a moment, while a goroutine that really waits for
// a processor is seen by both: so a searcher gives way on the second. A
// look that finds no new reading (the last is still the one it saw
// before) counts for nothing.
type Crowding struct {
	seen int    // looks in a row that saw goroutines waiting
	last uint64 // the number of the reading the last look saw
}

// GiveWay is what a spinning searcher does after a look (Crowding.Look).
type GiveWay int

const (
	GiveWayNot   GiveWay = iota // go on searching
	GiveWayPark                 // park: the processor goes to whoever waits
	GiveWayYield                // yield the processor once, then search on
)

// Look takes one look's answer, the reading's number (Gauge) and
// whether goroutines wait for a processor, and says whether to give way;
// parks says the searcher parks rather than yields (it has a block time).
func (c *Crowding) Look(seq uint64, runnable, parks bool) GiveWay {
	if seq == c.last {
		return GiveWayNot // no new reading since the last look (or none yet)
	}
	c.last = seq
	switch {
	case !runnable:
		c.seen = 0
		return GiveWayNot
	case c.seen == 0:
		c.seen = 1
		return GiveWayNot
	}
	c.seen = 0
	if parks {
		return GiveWayPark
	}
	return GiveWayYield
}

// Reads returns how many readings the gauge has begun.
func (g *Gauge) Reads() uint64 { return g.reads.Load() }
