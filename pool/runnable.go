package pool

import (
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// gaugeEvery is how often a pool's searchers read the runtime's count of
// runnable goroutines at most, together (runnableGauge), and how far
// apart one searcher's looks at it are at least (Worker.spin).
const gaugeEvery = 2 * time.Microsecond

// runnableGauge tells a pool's spinning searchers whether goroutines wait
// for a processor: the runtime's count of runnable goroutines, read by
// one searcher at a time, at most every gaugeEvery, and shared.
//
// The runtime counts them under its scheduler's global lock, which every
// goroutine's yield and many of its wake-ups take, and behind a semaphore
// that parks a reader that finds it held: a parked worker is a thread
// switch. Read by every searcher for itself every microsecond or so, the
// readings would grow with the number of searchers (up to half the
// workers of a machine) and contend with each other and with the whole
// process's scheduling. Shared, they stay at one per gaugeEvery for the
// whole pool.
type runnableGauge struct {
	_     [cacheLine]byte
	at    atomic.Int64 // when it was last read, on the pool's clock
	seen  atomic.Bool  // whether that read found runnable goroutines
	reads atomic.Int64 // reads so far
	_     [cacheLine]byte
}

// waiting reports whether goroutines waited for a processor at a reading
// made at most gaugeEvery before now (the pool's clock), reading it with
// the caller's own sample buffer when it is due.
func (g *runnableGauge) waiting(now int64, sample []metrics.Sample) bool {
	last := g.at.Load()
	if now-last < int64(gaugeEvery) || !g.at.CompareAndSwap(last, now) {
		return g.seen.Load()
	}
	metrics.Read(sample)
	g.reads.Add(1)
	v := sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > 0
	g.seen.Store(v)
	return v
}
