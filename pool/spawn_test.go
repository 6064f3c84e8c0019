package pool

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tree spawns the subtree under id with SpawnWith (fan children per node
// down to depth), and, at every other level, one child by Spawn, so that
// records of several kinds share the workers' lists and queues.
type tree struct {
	fan, depth int
	seen       []atomic.Int32
	wg         sync.WaitGroup
}

type treeNode struct{ id, level int }

func (tr *tree) visit(w *Worker, n treeNode) {
	tr.seen[n.id].Add(1)
	if n.level < tr.depth {
		for k := range tr.fan {
			child := treeNode{n.id*tr.fan + k + 1, n.level + 1}
			tr.wg.Add(1)
			if k == 0 && n.level%2 == 1 {
				w.Spawn(func(w *Worker) { tr.visit(w, child) })
			} else {
				SpawnWith(w, tr.visit, child)
			}
		}
	}
	tr.wg.Done()
}

// Every task spawned by SpawnWith runs exactly once and with its own
// argument: a tree of 4^8 leaves on one node and on a synthetic 2x2
// machine, where the tasks overflow the rings into the node shards and
// are stolen within and across nodes (with 4-slot rings in CI).
func TestSpawnWithRunsEachOnce(t *testing.T) {
	for _, spec := range []string{"", "2x2"} {
		var opts []Option
		if spec != "" {
			opts = append(opts, WithSpec(spec))
		}
		p := newTestPool(t, opts...)
		total := 0
		for l, n := 0, 1; l <= 8; l, n = l+1, n*4 {
			total += n
		}
		for rep := range 3 {
			tr := &tree{fan: 4, depth: 8, seen: make([]atomic.Int32, total)}
			tr.wg.Add(1)
			if err := p.Submit(context.Background(), func(w *Worker) { tr.visit(w, treeNode{0, 0}) }); err != nil {
				t.Fatal(err)
			}
			within(t, hangBound, "the tree", tr.wg.Wait)
			for id := range tr.seen {
				if c := tr.seen[id].Load(); c != 1 {
					t.Fatalf("spec %q rep %d: node %d visited %d times", spec, rep, id, c)
				}
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A chain of SpawnWith tasks, each spawning the next, allocates nothing
// once the worker has a record of that type to reuse.
func TestSpawnWithAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	done := make(chan struct{})
	var hop func(w *Worker, left int)
	hop = func(w *Worker, left int) {
		if left == 0 {
			done <- struct{}{}
			return
		}
		SpawnWith(w, hop, left-1)
	}
	start := func(w *Worker) { SpawnWith(w, hop, 1000) }
	run := func() {
		if err := p.Submit(context.Background(), start); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	run() // warm: the first chain makes the record
	if allocs := testing.AllocsPerRun(20, run); allocs >= 1 {
		t.Errorf("a chain of 1000 SpawnWith tasks allocated %.1f times", allocs)
	}
}

// A panic in a SpawnWith task goes to the pool's handler, and the worker
// runs the tasks after it.
func TestSpawnWithPanicGoesToHandler(t *testing.T) {
	var handled atomic.Int32
	var msg atomic.Value
	var wg sync.WaitGroup
	wg.Add(10)
	p := newTestPool(t, WithWorkers(2), WithPanicHandler(func(v any, _ []byte) {
		handled.Add(1)
		msg.Store(fmt.Sprint(v))
		wg.Done() // the panicking task's: only once the handler has it
	}))
	defer p.Close()
	var ran atomic.Int32
	if err := p.Submit(context.Background(), func(w *Worker) {
		for i := range 10 {
			SpawnWith(w, func(_ *Worker, i int) {
				if i == 3 {
					panic(fmt.Sprintf("task %d", i))
				}
				ran.Add(1)
				wg.Done()
			}, i)
		}
	}); err != nil {
		t.Fatal(err)
	}
	within(t, hangBound, "the spawned tasks", wg.Wait)
	if handled.Load() != 1 || msg.Load() != "task 3" || ran.Load() != 9 {
		t.Errorf("handled %d panics (%v), %d tasks ran; want 1 (task 3) and 9", handled.Load(), msg.Load(), ran.Load())
	}
	r := onWorker(t, p, func(w *Worker) any {
		return recovered(func() { SpawnWith[int](w, nil, 1) })
	})
	if !strings.HasPrefix(fmt.Sprint(r), "pool: SpawnWith of a nil function") {
		t.Errorf("SpawnWith of nil panicked with %v", r)
	}
}

// SpawnWith tasks still queued when a Shutdown gives up are counted as
// abandoned, never run, never lost.
func TestSpawnWithAbandonedAreCounted(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1"))
	started, proceed := make(chan struct{}), make(chan struct{})
	var ran atomic.Int32
	const n = 300 // more than a ring holds: some go to the node's shard
	if err := p.Submit(context.Background(), func(w *Worker) {
		for i := range n {
			SpawnWith(w, func(*Worker, int) { ran.Add(1) }, i)
		}
		close(started)
		<-proceed
	}); err != nil {
		t.Fatal(err)
	}
	<-started
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan int, 1)
	go func() {
		k, _ := p.Shutdown(expired)
		done <- k
	}()
	for !p.aborted() {
		time.Sleep(100 * time.Microsecond)
	}
	close(proceed)
	var abandoned int
	within(t, hangBound, "Shutdown", func() { abandoned = <-done })
	if int(ran.Load())+abandoned != n || ran.Load() != 0 {
		t.Errorf("%d ran, %d abandoned; want 0 and %d", ran.Load(), abandoned, n)
	}
	_ = p.Close()
	if got := p.Stats().Abandoned; got != uint64(n) {
		t.Errorf("Stats().Abandoned = %d, want %d", got, n)
	}
}
