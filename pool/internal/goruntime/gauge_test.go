package goruntime

import (
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A spinning searcher gives way to goroutines waiting for a processor only
// when two looks in a row, at two different readings, see them: one
// sighting is often a waiter that yields while it spins for its result,
// and parking on it put a thread wake-up on the next hand-off. A look at
// the reading the last look saw counts for nothing; a reading that sees
// none starts the count over; with a block time the searcher parks,
// without one it yields once.
func TestSearcherGivesWayOnTheSecondSighting(t *testing.T) {
	for _, parks := range []bool{true, false} {
		want := GiveWayYield
		if parks {
			want = GiveWayPark
		}
		var c Crowding
		steps := []struct {
			seq      uint64
			runnable bool
			want     GiveWay
		}{
			{0, true, GiveWayNot}, // no reading yet
			{1, false, GiveWayNot},
			{2, true, GiveWayNot},  // first sighting
			{3, false, GiveWayNot}, // gone: count over
			{4, true, GiveWayNot},
			{4, true, GiveWayNot}, // the same reading again: not a second sighting
			{5, true, want},       // second in a row
			{6, true, GiveWayNot}, // after giving way, count over
			{8, true, want},
		}
		for i, s := range steps {
			if got := c.Look(s.seq, s.runnable, parks); got != s.want {
				t.Errorf("block time %v, look %d (reading %d, runnable %v): got %d, want %d", parks, i, s.seq, s.runnable, got, s.want)
			}
		}
	}
}

// However many searchers look, a pool's gauge begins at most one reading
// per GaugeEvery of its clock, numbers them in order, and never answers a
// searcher with a reading older than one it answered it with before.
func TestGaugeReadsAtMostOncePerInterval(t *testing.T) {
	var g Gauge
	var clock atomic.Int64 // the pool's clock, 100 ns a look
	const searchers, looks = 8, 2000
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range searchers {
		wg.Go(func() {
			sample := []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
			var prev uint64
			for range looks {
				seq, _ := g.Waiting(clock.Add(100), sample)
				if seq < prev {
					bad.Add(1)
				}
				prev = seq
			}
		})
	}
	wg.Wait()
	span := clock.Load()
	limit := uint64(span/int64(GaugeEvery)) + 1
	if n := g.reads.Load(); n == 0 || n > limit {
		t.Errorf("%d readings over %v of the pool's clock, want 1..%d", n, time.Duration(span), limit)
	}
	if bad.Load() != 0 {
		t.Errorf("%d looks went back to an older reading", bad.Load())
	}
}
