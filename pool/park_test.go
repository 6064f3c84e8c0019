package pool

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// An idle passive pool sleeps: its workers burn (almost) no CPU, with the
// default block time and with a long one once it has passed. An active
// pool keeps searchers spinning: it burns CPU while idle, the price of
// its faster hand-off. The figures go to the log (README: wait policy).
func TestIdleCPU(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process CPU time is read with getrusage")
	}
	const window = 300 * time.Millisecond
	for _, tc := range []struct {
		name     string
		opts     []Option
		min, max time.Duration // CPU used in window
	}{
		{"passive", nil, 0, 30 * time.Millisecond},
		{"passive, block time 20ms", []Option{WithBlockTime(20 * time.Millisecond)}, 0, 30 * time.Millisecond},
		{"block time 0", []Option{WithBlockTime(0)}, 0, 30 * time.Millisecond},
		{"active", []Option{WithBlockTime(-1)}, window / 3, 10 * window},
		{"passive, block time infinite", []Option{WithBlockTime(-1)}, window / 3, 10 * window},
	} {
		p := newTestPool(t, append(tc.opts, WithSpec("2x2"))...)
		var ran sync.WaitGroup
		ran.Add(100)
		for range 100 { // warm up
			_ = p.Submit(context.Background(), func(*Worker) { ran.Done() })
		}
		ran.Wait()
		if tc.min == 0 {
			// A sleeping pool: measure once every worker has parked (a
			// loaded machine may hold a searcher off its CPU past its
			// block time), then it must stay asleep.
			deadline := time.Now().Add(10 * time.Second)
			for p.idle.unparked.Load() != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		time.Sleep(10 * time.Millisecond)
		before := processCPU()
		time.Sleep(window)
		used := processCPU() - before
		_ = p.Close()
		t.Logf("%s: an idle pool of 4 workers used %v of CPU in %v", tc.name, used, window)
		if used < tc.min || used > tc.max {
			t.Errorf("%s: idle pool used %v of CPU in %v, want %v..%v", tc.name, used, window, tc.min, tc.max)
		}
	}
}
