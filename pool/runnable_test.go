package pool

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
		want := giveWayYield
		if parks {
			want = giveWayPark
		}
		var c crowding
		steps := []struct {
			seq      uint64
			runnable bool
			want     giveWay
		}{
			{0, true, giveWayNot}, // no reading yet
			{1, false, giveWayNot},
			{2, true, giveWayNot},  // first sighting
			{3, false, giveWayNot}, // gone: count over
			{4, true, giveWayNot},
			{4, true, giveWayNot}, // the same reading again: not a second sighting
			{5, true, want},       // second in a row
			{6, true, giveWayNot}, // after giving way, count over
			{8, true, want},
		}
		for i, s := range steps {
			if got := c.look(s.seq, s.runnable, parks); got != s.want {
				t.Errorf("block time %v, look %d (reading %d, runnable %v): got %d, want %d", parks, i, s.seq, s.runnable, got, s.want)
			}
		}
	}
}

// However many searchers look, a pool's gauge begins at most one reading
// per gaugeEvery of its clock, numbers them in order, and never answers a
// searcher with a reading older than one it answered it with before.
func TestGaugeReadsAtMostOncePerInterval(t *testing.T) {
	var g runnableGauge
	var clock atomic.Int64 // the pool's clock, 100 ns a look
	const searchers, looks = 8, 2000
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range searchers {
		wg.Go(func() {
			sample := []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
			var prev uint64
			for range looks {
				seq, _ := g.waiting(clock.Add(100), sample)
				if seq < prev {
					bad.Add(1)
				}
				prev = seq
			}
		})
	}
	wg.Wait()
	span := clock.Load()
	limit := uint64(span/int64(gaugeEvery)) + 1
	if n := g.reads.Load(); n == 0 || n > limit {
		t.Errorf("%d readings over %v of the pool's clock, want 1..%d", n, time.Duration(span), limit)
	}
	if bad.Load() != 0 {
		t.Errorf("%d looks went back to an older reading", bad.Load())
	}
}

// A pool's searchers take their readings through the gauge: two active
// searchers spinning for 100 ms begin at most one per gaugeEvery between
// them. Before the gauge each read the count for itself every eight turns
// of its loop: 680-1210 readings a millisecond here, and the process's
// threads switched 1000-8500 times in 200 ms (the semaphore behind the
// reading parks a reader that finds it held); through it, 320-350 readings
// a millisecond and 50-80 switches.
func TestSearchersShareOneRunnableReading(t *testing.T) {
	p := newTestPool(t, WithBlockTime(-1), WithSpec("1x4")) // two searchers
	defer p.Close()
	time.Sleep(20 * time.Millisecond) // the searchers are spinning by now
	before := p.sched.runnable.reads.Load()
	start := time.Now()
	time.Sleep(100 * time.Millisecond)
	reads := p.sched.runnable.reads.Load() - before
	elapsed := time.Since(start)
	limit := uint64(elapsed/gaugeEvery) + 2
	t.Logf("%d readings in %v (at most %d)", reads, elapsed, limit)
	if reads == 0 {
		t.Errorf("active searchers never looked for goroutines waiting for a processor in %v", elapsed)
	}
	if reads > limit {
		t.Errorf("%d readings of the runnable count in %v, want at most one per %v (%d)", reads, elapsed, gaugeEvery, limit)
	}
}
