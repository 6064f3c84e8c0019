package pool

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/numapool/numapool/topology"
)

// onThreads skips where threads have no IDs, or the pool cannot bind a
// 2x1 layout (one CPU per worker) to two CPUs.
func onThreads(t *testing.T) {
	t.Helper()
	if threadID() == 0 {
		t.Skip("no thread IDs on " + runtime.GOOS)
	}
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
}

// parkAll waits until every worker of p is parked, so that the next task
// wakes one: the point at which an unlocked goroutine may come back on
// another thread.
func parkAll(t *testing.T, p *Pool) {
	t.Helper()
	if !eventually(hangBound, func() bool { return p.idle.unparked.Load() == 0 }) {
		t.Fatalf("workers did not park: %d awake", p.idle.unparked.Load())
	}
}

// checkOnThread runs a task on node k's worker and reports what was wrong
// with its thread: a thread other than the worker's, or a mask other than
// its binding.
func checkOnThread(t *testing.T, p *Pool, k int) string {
	t.Helper()
	var bad string
	within(t, hangBound, "a task on node "+strconv.Itoa(k), func() {
		_, _ = Run(p.Node(k).Strict(), func(w *Worker) (int, error) {
			tid := threadID()
			if want := int(w.tid.Load()); tid != want {
				bad = "worker " + strconv.Itoa(w.id) + " ran a task on thread " + strconv.Itoa(tid) + ", not its thread " + strconv.Itoa(want)
				return 0, nil
			}
			if mask, err := topology.ThreadAffinity(tid); err != nil || !mask.Equal(w.bound) {
				bad = "worker " + strconv.Itoa(w.id) + "'s thread has mask " + mask.String() + ", not its binding " + w.bound.String()
			}
			return 0, nil
		})
	})
	return bad
}

// processThreadsUnnarrowed reports the threads of the process whose mask
// is not want, the process's own.
func processThreadsUnnarrowed(t *testing.T, want topology.CPUSet) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task:", err)
	}
	var bad []string
	for _, e := range entries {
		tid, _ := strconv.Atoi(e.Name())
		if mask, err := topology.ThreadAffinity(tid); err == nil && !mask.Equal(want) {
			bad = append(bad, e.Name()+":"+mask.String())
		}
	}
	return bad
}

// A task's stray runtime.UnlockOSThread cannot take the worker's thread
// away: the worker keeps running every task on its own bound thread, and
// once the pool closes no thread of the process stays narrowed. Unlocks
// past the slack are found at the worker's next stop point, counted, and
// repaired: the worker locks and binds the thread it is on, and the
// deserted thread gets the process's mask back.
func TestStrayUnlockKeepsTheThread(t *testing.T) {
	onThreads(t)
	for _, tc := range []struct {
		name    string
		unlocks int
		relocks uint64
	}{
		{"one unlock", 1, 0},
		{"unlocks past the slack", lockSlack + 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mask, err := topology.ThreadAffinity(os.Getpid())
			if err != nil {
				t.Skip(err)
			}
			p := newTestPool(t, WithSpec("2x1"))
			before := int(p.workers[1].tid.Load())
			if _, err := Run(p.Node(1).Strict(), func(*Worker) (int, error) {
				for range tc.unlocks {
					runtime.UnlockOSThread()
				}
				return 0, nil
			}); err != nil {
				t.Fatal(err)
			}
			// The first wake-up repairs what the slack did not absorb.
			parkAll(t, p)
			_ = checkOnThread(t, p, 1)
			for round := range 50 {
				parkAll(t, p)
				for k := range 2 {
					if bad := checkOnThread(t, p, k); bad != "" {
						t.Fatalf("round %d: %s", round, bad)
					}
				}
			}
			if got := p.Stats().Workers[1].Counters.Relocks; got != tc.relocks {
				t.Errorf("worker 1 counts %d relocks, want %d", got, tc.relocks)
			}
			if tc.relocks > 0 {
				if m, err := topology.ThreadAffinity(before); err == nil && !m.Equal(mask) {
					t.Errorf("the deserted thread %d has mask %s, not the process's %s", before, m, mask)
				}
			}
			within(t, hangBound, "Close", func() { err = p.Close() })
			if err != nil {
				t.Fatal(err)
			}
			// Ended workers' threads take a moment to go.
			var bad []string
			if !eventually(hangBound, func() bool { bad = processThreadsUnnarrowed(t, mask); return len(bad) == 0 }) {
				t.Errorf("after Close, threads narrowed from the process's %s: %v", mask, bad)
			}
		})
	}
}

// A worker whose goroutine a task ended with Goexit goes on with the same
// ID on a new thread bound as the old one was; the old thread ends.
func TestGoexitReplacesTheThread(t *testing.T) {
	onThreads(t)
	p := newTestPool(t, WithSpec("2x1"))
	w := p.workers[1]
	old := int(w.tid.Load())
	var err error
	within(t, hangBound, "Run of a task that calls Goexit", func() {
		_, err = Run(p.Node(1).Strict(), func(*Worker) (int, error) { runtime.Goexit(); return 0, nil })
	})
	if !errors.Is(err, ErrGoexit) {
		t.Fatalf("Run = %v, want ErrGoexit", err)
	}
	if bad := checkOnThread(t, p, 1); bad != "" {
		t.Error(bad)
	}
	if now := int(w.tid.Load()); now == old || now == 0 {
		t.Errorf("worker 1 is on thread %d after its thread %d ended", now, old)
	}
	if !eventually(hangBound, func() bool { _, err := os.Stat("/proc/self/task/" + strconv.Itoa(old)); return err != nil }) {
		t.Errorf("thread %d of the ended goroutine still runs", old)
	}
	st := p.Stats()
	if st.Workers[1].Counters.Goexits != 1 || st.Workers[1].Worker != 1 || len(st.Workers) != 2 {
		t.Errorf("stats after Goexit: %+v", st.Workers)
	}
	within(t, hangBound, "Close", func() { err = p.Close() })
	if err != nil {
		t.Error(err)
	}
}
