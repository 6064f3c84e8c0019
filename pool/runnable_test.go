package pool

import (
	"testing"
	"time"
)

// A pool's searchers read the runtime's count of runnable goroutines
// through one shared gauge: at most one reading per gaugeEvery for the
// whole pool, however many search. When each read it for itself, two
// active searchers on two CPUs read it 680-1210 times a millisecond, and
// the process's threads switched 1000-8500 times in 200 ms (the semaphore
// behind the reading parks a reader that finds it held); sharing it,
// 320-350 readings a millisecond and 50-80 switches.
func TestSearchersShareOneRunnableReading(t *testing.T) {
	p := newTestPool(t, WithWaitPolicy(Active), WithSpec("1x4")) // two searchers
	defer p.Close()
	time.Sleep(20 * time.Millisecond) // the searchers are spinning by now
	const window = 100 * time.Millisecond
	before := p.sched.runnable.reads.Load()
	start := time.Now()
	time.Sleep(window)
	reads := p.sched.runnable.reads.Load() - before
	elapsed := time.Since(start)
	limit := int64(elapsed/gaugeEvery) + 2
	t.Logf("%d readings in %v (at most %d)", reads, elapsed, limit)
	if reads == 0 {
		t.Errorf("active searchers never looked for goroutines waiting for a processor in %v", elapsed)
	}
	if reads > limit {
		t.Errorf("%d readings of the runnable count in %v, want at most one per %v (%d)", reads, elapsed, gaugeEvery, limit)
	}
}
