package pool

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
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
	if !cheapGID && !raceEnabled {
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
