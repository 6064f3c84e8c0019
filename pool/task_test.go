package pool

import (
	"context"
	"fmt"
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
	p := newTestPool(t, WithSpec("2x2"), WithMachineWatch(0)) // see newTestPool
	defer p.Close()
	const fan = 3 * maxStash * freeBatch / 4 // more than the workers' own lists hold
	counts := make([]atomic.Int32, fan)
	var wg sync.WaitGroup
	wave := func() {
		wg.Add(fan)
		err := p.Submit(context.Background(), func(w *Worker) {
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

// A worker's queue and its node's shard hold plain tasks as functions,
// not records (item): a task on the only worker spawns many more than its
// queue holds; every task but the one in the LIFO slot and the sampled
// ones (histogram.go) is queued without its record, and every task still
// runs once.
func TestQueuesHoldFunctions(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1"))
	defer p.Close()
	n := 4 * 4 * queue.Capacity
	counts := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	wg.Add(n)
	var records, functions int
	err := p.Submit(context.Background(), func(w *Worker) {
		for i := range n {
			w.Spawn(func(*Worker) { counts[i].Add(1); wg.Done() })
		}
		// Nobody else takes from the queue or the shard: this is the
		// only worker.
		var local []item
		for it, ok := w.local.Pop(); ok; it, ok = w.local.Pop() {
			local = append(local, it)
		}
		shard := w.domain.inject.PopN(nil, n)
		for _, it := range append(local, shard...) {
			if it.t != nil {
				records++
			} else {
				functions++
			}
		}
		w.local.PushBatch(local)
		w.domain.inject.Requeue(shard...)
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
	// The worker's every sampleEvery-th task (histogram.go), counted
	// from its first, is kept as its record, for its submit time; the
	// last spawned, n-1, is in the LIFO slot.
	if sampled := (n-2)/sampleEvery + 1; records != sampled || functions != n-1-sampled {
		t.Fatalf("the queue and the shard held %d records and %d functions of %d spawned tasks; want %d functions and %d records (the sampled ones)",
			records, functions, n, n-1-sampled, sampled)
	}
}

// Records pass between workers through the stash while several producers
// spawn at once: each wave, every worker makes a fan of tasks that the
// others steal and run, so records made on one worker are reused on
// another, and full batches are given and taken concurrently. Each task
// runs exactly once per wave.
func taskStashConcurrentProducers(t *testing.T) {
	for _, spec := range []string{"2x2", "4x1", "2x1"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, WithSpec(spec))
			defer p.Close()
			const fan = 2*freeBatch + 37 // more than a worker's own list holds
			producers := p.Workers()
			counts := make([]atomic.Int32, producers*fan)
			var wg sync.WaitGroup
			waves := 12
			if testing.Short() {
				waves = 4
			}
			for wave := range waves {
				wg.Add(producers * fan)
				for pi := range producers {
					node := p.Nodes()[pi%len(p.Nodes())]
					err := p.Node(node).Strict().Submit(context.Background(), func(w *Worker) {
						for i := range fan {
							k := pi*fan + i
							fn := func(*Worker) { counts[k].Add(1); wg.Done() }
							if i%5 == 4 {
								// a task that spawns again: a record is reused
								// by the worker that stole it, at once
								w.Spawn(func(w *Worker) { w.Spawn(fn) })
								continue
							}
							w.Spawn(fn)
						}
					})
					if err != nil {
						t.Fatal(err)
					}
				}
				within(t, hangBound, fmt.Sprintf("wave %d", wave), wg.Wait)
				for k := range counts {
					if got := counts[k].Load(); got != int32(wave+1) {
						t.Fatalf("wave %d: task %d ran %d times in all, want %d", wave, k, got, wave+1)
					}
				}
			}
			p.stash.mu.Lock()
			full := len(p.stash.full)
			p.stash.mu.Unlock()
			t.Logf("stash holds %d full batches", full)
		})
	}
}

// TestTaskAdversarial runs the adversarial cases of task records and their reuse, one subtest
// each: races and load meant to break what the tests above assert.
func TestTaskAdversarial(t *testing.T) {
	t.Run("StashConcurrentProducers", taskStashConcurrentProducers)
}
