package pool

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/topology"
)

// onThreads skips where threads have no IDs, or the pool cannot bind a
// 2x1 layout (one CPU per worker) to two CPUs.
func onThreads(t *testing.T) {
	t.Helper()
	if place.ThreadID() == 0 {
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
			tid := place.ThreadID()
			if want := w.th.TID(); tid != want {
				bad = "worker " + strconv.Itoa(w.id) + " ran a task on thread " + strconv.Itoa(tid) + ", not its thread " + strconv.Itoa(want)
				return 0, nil
			}
			if mask, err := topology.ThreadAffinity(tid); err != nil || !mask.Equal(w.th.Bound()) {
				bad = "worker " + strconv.Itoa(w.id) + "'s thread has mask " + mask.String() + ", not its binding " + w.th.Bound().String()
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
		{"unlocks past the slack", place.LockSlack + 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mask, err := topology.ThreadAffinity(os.Getpid())
			if err != nil {
				t.Skip(err)
			}
			p := newTestPool(t, WithSpec("2x1"))
			before := p.workers[1].th.TID()
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
	old := w.th.TID()
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
	if now := w.th.TID(); now == old || now == 0 {
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

// With the goroutines binding the workers are plain goroutines: no
// thread locked, bound or recorded, and Explain says so; every other
// binding locks each worker to a thread. Fork-join, spawns and outside
// submissions all run, each exactly once, up to Close.
func TestGoroutineWorkersAreNotLocked(t *testing.T) {
	for _, b := range []pin.Binding{pin.Goroutines, pin.None} {
		p := newTestPool(t, WithSpec("2x2"), WithBinding(b))
		for _, w := range p.workers {
			if locked := w.th.Locked(); locked != (b != pin.Goroutines) {
				t.Errorf("binding %v: worker %d locked to a thread: %v", b, w.id, locked)
			}
			if b == pin.Goroutines && (w.th.TID() != 0 || !w.th.Bound().IsEmpty() || w.th.Spreadable().Len() != 0) {
				t.Errorf("binding %v: worker %d has thread %d, bound %s", b, w.id, w.th.TID(), w.th.Bound())
			}
		}
		ex := p.Explain()
		if onAny := strings.Count(ex, "a goroutine on any thread and CPU"); (b == pin.Goroutines) != (onAny == 4) {
			t.Errorf("binding %v: Explain names %d workers as goroutines:\n%s", b, onAny, ex)
		}
		const outside, spawns = 2000, 8
		ran := make([]atomic.Int32, outside*(spawns+1))
		var wg sync.WaitGroup
		wg.Add(len(ran))
		for i := range outside {
			err := p.Submit(context.Background(), func(w *Worker) {
				ran[i].Add(1)
				wg.Done()
				for k := range spawns {
					w.Spawn(func(*Worker) { ran[outside+i*spawns+k].Add(1); wg.Done() })
				}
				if i%100 == 0 {
					x, y, err := Fork(w, fibFork, fibArg{18, 6}, fibFork, fibArg{17, 6})
					if n := x + y; err != nil || n != fibSeq(18)+fibSeq(17) {
						t.Errorf("Fork in task %d: %d, %v", i, x+y, err)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		within(t, 10*time.Second, "tasks", wg.Wait)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		for i := range ran {
			if n := ran[i].Load(); n != 1 {
				t.Fatalf("binding %v: task %d ran %d times", b, i, n)
			}
		}
	}
}

// A locked worker runs every task on its thread; a goroutine worker has
// nothing to place, so a placement that cannot be made (a topology whose
// CPU list lacks a CPU it allows) leaves it unlocked and undegraded, even
// WithStrict, while a locked worker runs unbound and says so.
func TestWorkerThreadsByBinding(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("needs Linux thread IDs and two CPUs")
	}
	p := newTestPool(t, WithWorkers(2), WithBinding(pin.None))
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		_ = p.Submit(context.Background(), func(w *Worker) {
			defer wg.Done()
			runtime.Gosched()
			if tid := place.ThreadID(); tid != w.th.TID() {
				t.Errorf("worker %d (thread %d) ran a task on thread %d", w.id, w.th.TID(), tid)
			}
		})
	}
	wg.Wait()
	_ = p.Close()

	broken := func() *topology.Topology {
		topo := topology.Fallback("test")
		topo.CPUs = topo.CPUs[:len(topo.CPUs)-1] // still allowed, no longer a CPU of it
		return topo
	}
	// Two workers, whatever GOMAXPROCS: the second gets the missing CPU.
	locked := newTestPool(t, WithTopology(broken()), WithWorkers(2), WithBinding(pin.NUMADomains))
	if ex := locked.Explain(); !strings.Contains(ex, "runs unbound") {
		t.Errorf("a locked worker that could not be placed is not reported:\n%s", ex)
	}
	_ = locked.Close()
	// Goroutine workers need no CPU of their own, so the missing CPU is no
	// degradation for them (the fallback's own note is taken away: under
	// WithRequiredPlacement it would fail New by itself).
	quiet := broken()
	quiet.Degraded = nil
	free, err := New(WithoutEnv(), WithTopology(quiet), WithWorkers(2), WithBinding(pin.Goroutines), WithRequiredPlacement())
	if err != nil {
		t.Fatalf("goroutine workers refused: %v", err)
	}
	defer free.Close()
	for _, w := range free.workers {
		if w.th.Locked() || w.th.TID() != 0 {
			t.Errorf("goroutine worker %d locked to thread %d", w.id, w.th.TID())
		}
	}
	if ex := free.Explain(); strings.Contains(ex, "runs unbound") {
		t.Errorf("goroutine workers degraded:\n%s", ex)
	}
}
