package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/numapool/numapool/pool/internal/goruntime"
)

// A Worker used from a goroutine other than its task's panics with a
// "pool:" message in every build, not only under -race: both while the
// task that leaked it still runs, and after it returned.
func TestWorkerUsedFromAnotherGoroutinePanics(t *testing.T) {
	uses := []struct {
		name string
		use  func(w *Worker)
	}{
		{"Spawn", func(w *Worker) { w.Spawn(func(*Worker) {}) }},
		{"Join", func(w *Worker) { _ = w.Join(func(*Worker) {}, func(*Worker) {}) }},
		{"Fork", func(w *Worker) { _, _, _ = Fork(w, forkIdentity, 1, forkIdentity, 2) }},
		{"SpawnWith", func(w *Worker) { SpawnWith(w, func(*Worker, int) {}, 1) }},
		{"Run on the worker", func(w *Worker) { _, _ = Run(w, func(*Worker) (int, error) { return 1, nil }) }},
		{"Async on the worker", func(w *Worker) { Async(w, func(*Worker) (int, error) { return 1, nil }) }},
	}
	// foreign uses w from a new goroutine and returns what it panicked with.
	foreign := func(t *testing.T, w *Worker, use func(*Worker)) any {
		t.Helper()
		var r any
		within(t, hangBound, "a foreign use of a Worker", func() {
			done := make(chan struct{})
			go func() { defer close(done); r = recovered(func() { use(w) }) }()
			<-done
		})
		return r
	}
	check := func(t *testing.T, what string, r any) bool {
		t.Helper()
		if r == nil || !strings.Contains(fmt.Sprint(r), "pool:") {
			t.Errorf("%s from another goroutine: recover() = %v; want a panic with a \"pool:\" message", what, r)
			return false
		}
		return true
	}
	spawns := 2000
	if testing.Short() {
		spawns = 200
	}
	for _, u := range uses {
		t.Run(u.name+"/task-running", func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			leaked := make(chan *Worker, 1)
			release := make(chan struct{})
			if err := p.Submit(context.Background(), func(w *Worker) { leaked <- w; <-release }); err != nil {
				t.Fatal(err)
			}
			w := <-leaked
			ok := check(t, u.name, foreign(t, w, u.use))
			close(release)
			if ok && u.name == "Spawn" {
				// Every one of many foreign calls is refused, none corrupts.
				for i := range spawns {
					if !check(t, fmt.Sprintf("Spawn #%d", i), foreign(t, w, u.use)) {
						break
					}
				}
			}
			within(t, hangBound, "Close after foreign uses", func() { _ = p.Close() })
		})
		t.Run(u.name+"/task-returned", func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			leaked := make(chan *Worker, 1)
			if err := p.Submit(context.Background(), func(w *Worker) { leaked <- w }); err != nil {
				t.Fatal(err)
			}
			w := <-leaked
			// Keep the worker busy with other work meanwhile.
			var wg sync.WaitGroup
			for range 100 {
				wg.Add(1)
				_ = p.Submit(context.Background(), func(w *Worker) { defer wg.Done(); w.Spawn(func(*Worker) {}) })
			}
			check(t, u.name, foreign(t, w, u.use))
			within(t, hangBound, "tasks after a foreign use", wg.Wait)
			within(t, hangBound, "Close after a foreign use", func() { _ = p.Close() })
		})
	}
}

func TestWorkerMisusePanics(t *testing.T) {
	if !goruntime.Cheap && !raceEnabled {
		t.Skip("on this platform the owner check is compiled in with -race only")
	}
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	ch := make(chan *Worker)
	_ = p.Submit(context.Background(), func(w *Worker) { ch <- w })
	w := <-ch
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Spawn") {
			t.Errorf("Spawn from a foreign goroutine: recover() = %v", r)
		}
	}()
	w.Spawn(func(*Worker) {})
}

// Inside a task gid is what the pool recorded for the task's worker
// (ownerID, the owner table), and outside the pool it names no worker.
func TestGIDMatchesTheWorkersOwner(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	type seen struct {
		gid, owner uintptr
		of, w      *Worker
	}
	for range 4 {
		s := onWorker(t, p, func(w *Worker) seen {
			return seen{goruntime.G(), w.owner.g.Load(), p.workerOf(), w}
		})
		if s.gid != s.owner {
			t.Errorf("in a task on worker %d goruntime.G() = %#x, the worker's owner is %#x", s.w.ID(), s.gid, s.owner)
		}
		if s.of != s.w {
			t.Errorf("in a task on worker %d workerOf() = %p, want the worker %p", s.w.ID(), s.of, s.w)
		}
	}
	if w := p.workerOf(); w != nil {
		t.Errorf("workerOf() outside the pool = worker %d", w.ID())
	}
}

// Goroutines that reuse ended workers' g addresses are not taken for
// workers.
func gIDReuseAfterEnd(t *testing.T) {
	for round := range 20 {
		p := newTestPool(t, WithWorkers(2))
		var ws [2]*Worker
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			p.Submit(context.Background(), func(w *Worker) { mu.Lock(); ws[w.id] = w; mu.Unlock(); wg.Done() })
		}
		wg.Wait()
		g := p.Group(context.Background())
		p.Close()
		var bad atomic.Int32
		var wg2 sync.WaitGroup
		for range 2000 {
			wg2.Add(1)
			go func() {
				defer wg2.Done()
				if p.workerOf() != nil {
					bad.Add(1)
				}
				for _, w := range ws {
					if w == nil {
						continue
					}
					r := recovered(func() { w.Spawn(func(*Worker) {}) })
					if s, _ := r.(string); !strings.HasPrefix(s, "pool:") {
						bad.Add(1)
					}
				}
				g.Go(func(*Worker) error { return nil })
			}()
		}
		wg2.Wait()
		if err := g.Wait(); !errors.Is(err, ErrClosed) {
			t.Errorf("round %d: group on closed pool: %v", round, err)
		}
		if bad.Load() != 0 {
			t.Fatalf("round %d: %d goroutines taken for workers", round, bad.Load())
		}
	}
}

// TestGIDAdversarial runs the adversarial cases of the g-pointer identity, one subtest
// each: races and load meant to break what the tests above assert.
func TestGIDAdversarial(t *testing.T) {
	t.Run("ReuseAfterEnd", gIDReuseAfterEnd)
}
