package pool

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/numapool/numapool/queue"
)

// Task records are reused (task.go): every task still runs exactly once
// when records pass between workers through the stash, and a warmed-up
// pool spawns without allocating a record per task. Waves of spawns on
// four workers in two nodes make records run on other workers than the
// one that made them, and fill and drain the stash.
func TestSpawnReusesRecords(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	const fan = 3 * maxStash * freeBatch / 4 // more than the workers' own lists hold
	counts := make([]atomic.Int32, fan)
	var wg sync.WaitGroup
	wave := func() {
		wg.Add(fan)
		err := p.Submit(func(w *Worker) {
			for i := range fan {
				w.Spawn(func(*Worker) { counts[i].Add(1); wg.Done() })
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	const waves = 20
	for range waves {
		wave()
	}
	for i := range counts {
		if n := counts[i].Load(); n != waves {
			t.Fatalf("task %d ran %d times in %d waves", i, n, waves)
		}
	}
	if raceEnabled {
		return // the race detector's allocations would blur the count
	}
	// A wave allocates fan closures; a record each would double that.
	if allocs := testing.AllocsPerRun(5, wave); allocs > 1.25*fan {
		t.Errorf("a wave of %d spawns allocated %.0f times: records are not reused", fan, allocs)
	}
}

// A backlog in a node's shard holds plain tasks as functions, not records
// (item): a task on the only worker spawns many more than its queue
// holds; the shard's first overflows keep their records, the rest only
// their functions, and every task still runs once, on a worker that
// makes a record for it again.
func TestBacklogHoldsFunctions(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1"))
	defer p.Close()
	n := 4*backlog + 3*queue.Capacity
	counts := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	wg.Add(n)
	var records, functions int
	err := p.Submit(func(w *Worker) {
		for i := range n {
			w.Spawn(func(*Worker) { counts[i].Add(1); wg.Done() })
		}
		// Nobody else takes from the shard: this is the only worker.
		items := w.group.inject.PopN(nil, n)
		for _, it := range items {
			if it.t != nil {
				records++
			} else {
				functions++
			}
		}
		w.group.inject.Requeue(items...)
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range counts {
		if c := counts[i].Load(); c != 1 {
			t.Fatalf("task %d ran %d times", i, c)
		}
	}
	if records < backlog || functions < n-2*backlog {
		t.Fatalf("the shard held %d records and %d functions of %d spawned tasks; want the first %d or more as records, %d or more as functions",
			records, functions, n, backlog, n-2*backlog)
	}
}
