package pool

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// idleWindow is how long TestIdleCPU measures a parked pool, and
// idleCPUPerSecond the CPU it may use meanwhile, per second: the whole
// process's (the test's goroutines, the runtime's, the monitor's).
const (
	idleWindow       = 2 * time.Second
	idleCPUPerSecond = time.Millisecond
)

// An idle passive pool sleeps: it burns at most idleCPUPerSecond of CPU,
// the machine monitor's looks included, with the default block time and
// with a long one once it has passed, measured over idleWindow. An active
// pool keeps searchers spinning: none of them parks while idle, and it
// burns CPU, the price of its faster hand-off, as much as the machine
// gives it (on a machine busy with other work, less than a CPU), so
// what is asserted is that it never sleeps. The figures go to the log.
func TestIdleCPU(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process CPU time is read with getrusage")
	}
	window := idleWindow
	parked := time.Duration(window.Seconds() * float64(idleCPUPerSecond))
	if raceEnabled {
		parked *= 2 // every access of the runtime's and the test's Go code is instrumented
	}
	for _, tc := range []struct {
		name  string
		opts  []Option
		spins bool          // active: never sleeps
		max   time.Duration // CPU used in window
	}{
		{"passive", nil, false, parked},
		{"passive, block time 20ms", []Option{WithBlockTime(20 * time.Millisecond)}, false, parked},
		{"block time 0", []Option{WithBlockTime(0)}, false, parked},
		{"active", []Option{WithBlockTime(-1)}, true, 10 * window},
	} {
		if tc.spins {
			window = 300 * time.Millisecond // enough to see searchers that never stop
		}
		p := newTestPool(t, append(tc.opts, WithSpec("2x2"))...)
		var ran sync.WaitGroup
		ran.Add(100)
		for range 100 { // warm up
			_ = p.Submit(context.Background(), func(*Worker) { ran.Done() })
		}
		ran.Wait()
		if !tc.spins {
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
		minSearching := p.idle.searching.Load()
		var used time.Duration
		if tc.spins {
			for end := time.Now().Add(window); time.Now().Before(end); {
				time.Sleep(time.Millisecond)
				minSearching = min(minSearching, p.idle.searching.Load())
			}
			used = processCPU() - before
		} else {
			// The least of up to three windows: the process's own CPU time
			// grows with the machine's load (other processes' threads
			// evict its caches and preempt it), and a pool that burns CPU
			// burns it in every window.
			for try := range 3 {
				time.Sleep(window) // no sampling: it would cost CPU of its own
				u := processCPU() - before
				if try == 0 || u < used {
					used = u
				}
				if used <= tc.max {
					break
				}
				t.Logf("%s: %v of CPU in window %d; trying another", tc.name, u, try+1)
				before = processCPU()
			}
		}
		_ = p.Close()
		t.Logf("%s: an idle pool of 4 workers used %v of CPU in %v", tc.name, used, window)
		if used > tc.max {
			t.Errorf("%s: idle pool used %v of CPU in %v, want at most %v", tc.name, used, window, tc.max)
		}
		if tc.spins && minSearching == 0 {
			t.Errorf("%s: no worker searching at some point of %v; want searchers that never stop", tc.name, window)
		}
	}
}
