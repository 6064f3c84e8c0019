package pool

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/numapool/numapool/pool/internal/goruntime"
	"github.com/numapool/numapool/pool/internal/place"
)

// idleWindow is how long TestIdleCPU measures a parked pool, and
// idleCPUPerSecond the CPU its workers' threads may use meanwhile, per
// second; the machine monitor's thread, five times that; the whole
// process, ten times (where threads cannot be read, the process is held
// to the bound).
const (
	idleWindow       = 2 * time.Second
	idleCPUPerSecond = time.Millisecond
)

// An idle passive pool sleeps: its workers' threads burn at most
// idleCPUPerSecond of CPU, and the machine monitor's five times that, with
// the default block time and with a long one once it has passed, measured
// over idleWindow. An active
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
		// The monitor looks as often as the shortest interval of the
		// pools it watches: wait for pools that earlier tests left
		// closing to end, so that its looks in the window are this pool's.
		if !eventually(10*time.Second, func() bool { _, n := place.MonitorRunning(); return n <= 1 }) {
			_, n := place.MonitorRunning()
			t.Logf("%s: the monitor still watches %d pools", tc.name, n)
		}
		// A sleeping pool gets up to three windows to show it sleeps: the
		// process's time, and under the race detector the threads' too,
		// also grow with what other tests left behind and with the
		// machine's load, now and then past the bound for one window, while
		// a pool that does not sleep exceeds it in every window.
		attempts := 3
		if tc.spins {
			attempts = 1
		}
		var minSearching int32
		var fails []string
		for range attempts {
			fails = fails[:0]
			var tids, mon []int // the workers' threads, the monitor's
			for _, w := range p.workers {
				if tid := w.th.TID(); tid > 0 {
					tids = append(tids, tid)
				}
			}
			if tid := place.MonitorTID(); tid > 0 {
				mon = append(mon, tid)
			}
			before := processCPU()
			poolBefore, perThread := threadsCPU(tids)
			monBefore, _ := threadsCPU(mon)
			minSearching = p.idle.searching.Load()
			if tc.spins {
				for end := time.Now().Add(window); time.Now().Before(end); {
					time.Sleep(time.Millisecond)
					minSearching = min(minSearching, p.idle.searching.Load())
				}
			} else {
				time.Sleep(window) // no sampling: it would cost CPU of its own
			}
			used := processCPU() - before
			poolAfter, ok := threadsCPU(tids)
			monAfter, monOK := threadsCPU(mon)
			t.Logf("%s: an idle pool of 4 workers used %v of CPU in %v (the process), %v (its workers' threads), %v (the monitor's)", tc.name, used, window, poolAfter-poolBefore, monAfter-monBefore)
			switch {
			case tc.spins:
				if used > tc.max {
					fails = append(fails, fmt.Sprintf("%s: idle pool used %v of CPU in %v, want at most %v", tc.name, used, window, tc.max))
				}
			case perThread && ok:
				if d := poolAfter - poolBefore; d > tc.max {
					fails = append(fails, fmt.Sprintf("%s: the workers' threads of an idle pool used %v of CPU in %v, want at most %v", tc.name, d, window, tc.max))
				}
				// A look of the monitor's allocates, and so may do the
				// collector's work that the rest of the process owes (an
				// assist, milliseconds under the race detector): its
				// thread gets five times the workers' bound.
				if d := monAfter - monBefore; monOK && d > 5*tc.max {
					fails = append(fails, fmt.Sprintf("%s: the monitor's thread used %v of CPU in %v with the pool idle, want at most %v", tc.name, d, window, 5*tc.max))
				}
				if used > 10*tc.max {
					fails = append(fails, fmt.Sprintf("%s: the process used %v of CPU in %v while the pool was idle, want at most %v", tc.name, used, window, 10*tc.max))
				}
			case used > tc.max:
				fails = append(fails, fmt.Sprintf("%s: idle pool used %v of CPU in %v, want at most %v", tc.name, used, window, tc.max))
			}
			if len(fails) == 0 {
				break
			}
		}
		_ = p.Close()
		for _, f := range fails {
			t.Error(f)
		}
		if tc.spins && minSearching == 0 {
			t.Errorf("%s: no worker searching at some point of %v; want searchers that never stop", tc.name, window)
		}
	}
}

// A pool's searchers take their readings through the gauge: two active
// searchers spinning for 100 ms begin at most one per goruntime.GaugeEvery between
// them. Before the gauge each read the count for itself every eight turns
// of its loop: 680-1210 readings a millisecond here, and the process's
// threads switched 1000-8500 times in 200 ms (the semaphore behind the
// reading parks a reader that finds it held); through it, 320-350 readings
// a millisecond and 50-80 switches.
func TestSearchersShareOneRunnableReading(t *testing.T) {
	p := newTestPool(t, WithBlockTime(-1), WithSpec("1x4")) // two searchers
	defer p.Close()
	time.Sleep(20 * time.Millisecond) // the searchers are spinning by now
	before := p.sched.runnable.Reads()
	start := time.Now()
	time.Sleep(100 * time.Millisecond)
	reads := p.sched.runnable.Reads() - before
	elapsed := time.Since(start)
	limit := uint64(elapsed/goruntime.GaugeEvery) + 2
	t.Logf("%d readings in %v (at most %d)", reads, elapsed, limit)
	if reads == 0 {
		t.Errorf("active searchers never looked for goroutines waiting for a processor in %v", elapsed)
	}
	if reads > limit {
		t.Errorf("%d readings of the runnable count in %v, want at most one per %v (%d)", reads, elapsed, goruntime.GaugeEvery, limit)
	}
}
