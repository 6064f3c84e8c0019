package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The steal counters count what the steals moved: the tasks stolen never
// outnumber the tasks run. A thief whose own queue is being stolen from
// while it steals must not count by its queue's length before and after:
// the other thief's commit shrinks that length in between, and the
// difference can go below zero and wrap to about 2^64. Fan-out trees keep
// every worker's queue full of tasks to steal, so thieves steal from
// thieves all the time (with -tags numapool_smallqueue, 4-slot queues,
// more so).
func TestStealCountersNeverExceedTasksRun(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 5
	}
	const roots, fan, depth = 4, 16, 3 // 4 trees of 1+16+16^2+16^3 tasks
	const want = roots * (1 + fan + fan*fan + fan*fan*fan)
	for _, spec := range []string{"1x8", "2x4"} {
		t.Run("spec="+spec, func(t *testing.T) {
			var steals uint64
			for round := range rounds {
				p := newTestPool(t, WithSpec(spec))
				var ran atomic.Int64
				// Each level is spawned in a loop: the spawner's queue
				// fills while its thieves take half of it, and their
				// thieves half of that.
				var tree func(w *Worker, d int)
				tree = func(w *Worker, d int) {
					ran.Add(1)
					if d == 0 {
						return
					}
					for range fan {
						w.Spawn(func(w *Worker) { tree(w, d-1) })
					}
				}
				within(t, hangBound, "the fan-out and Close", func() {
					for range roots {
						if err := p.Submit(context.Background(), func(w *Worker) { tree(w, depth) }); err != nil {
							t.Fatal(err)
						}
					}
					if err := p.Close(); err != nil {
						t.Fatal(err)
					}
				})
				if ran.Load() != want {
					t.Fatalf("round %d: %d tasks ran, want %d", round, ran.Load(), want)
				}
				st := p.Stats()
				check := func(who string, c Counters) {
					if c.TasksStolenInNode+c.TasksStolenCrossNode > st.Total.TasksRun {
						t.Errorf("round %d: %s: %d tasks stolen in node and %d across nodes, of %d run in all",
							round, who, c.TasksStolenInNode, c.TasksStolenCrossNode, st.Total.TasksRun)
					}
					if c.StealsInNode > c.TasksStolenInNode || c.StealsCrossNode > c.TasksStolenCrossNode {
						t.Errorf("round %d: %s: %d+%d steals moved only %d+%d tasks",
							round, who, c.StealsInNode, c.StealsCrossNode, c.TasksStolenInNode, c.TasksStolenCrossNode)
					}
				}
				for _, ws := range st.Workers {
					check(fmt.Sprintf("worker %d", ws.Worker), ws.Counters)
				}
				check("the total", st.Total)
				if t.Failed() {
					return
				}
				steals += st.Total.StealsInNode + st.Total.StealsCrossNode
			}
			if steals == 0 {
				t.Error("no worker stole: the test does not reach stealing")
			}
		})
	}
}

// By default no loop piece runs off its node: the pieces a dry
// node takes from the busy one go straight back. Such a steal is not a
// cross-node steal: the cross-node counters stay at the pieces that ran
// off node (none), and the steals sent home are counted apart, their
// pieces in SentHome.
func TestStrictLoopCrossNodeSentHomeAreNotCrossNode(t *testing.T) {
	const n, grain = 4000, 4
	p := newTestPool(t, WithSpec("2x1"))
	nodeOf := make([]int, n)
	split := p.Split(n)
	for _, b := range split {
		for i := b.Lo; i < b.Hi; i++ {
			nodeOf[i] = b.Node
		}
	}
	slow := split[0] // node 0's block takes a few ms, node 1's no time
	var offNode atomic.Int64
	within(t, 4*hangBound, "the loops and Close", func() {
		// Five loops, and more while the dry node has not yet taken a
		// piece to send home: on a loaded machine its worker may not get
		// a CPU while the busy node's block lasts.
		for i := 0; i < 5 || i < 200 && p.Stats().Total.CrossNodeSentHome == 0; i++ {
			err := p.ParallelFor(context.Background(), n, grain, func(w *Worker, lo, hi int) error {
				for i := lo; i < hi; i++ {
					if nodeOf[i] != w.Node() {
						offNode.Add(1)
					}
				}
				if lo >= slow.Lo && lo < slow.Hi {
					for t := time.Now(); time.Since(t) < time.Duration(hi-lo)*time.Microsecond; {
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	})
	st := p.Stats().Total
	t.Logf("%d cross-node steals of %d tasks, %d steals sent home, %d tasks sent home",
		st.StealsCrossNode, st.TasksStolenCrossNode, st.CrossNodeSentHome, st.SentHome)
	if offNode.Load() != 0 {
		t.Fatalf("%d indexes ran off their node", offNode.Load())
	}
	if st.StealsCrossNode != 0 || st.TasksStolenCrossNode != 0 {
		t.Errorf("no piece ran off its node, but Stats count %d cross-node steals of %d tasks",
			st.StealsCrossNode, st.TasksStolenCrossNode)
	}
	if st.CrossNodeSentHome == 0 {
		t.Error("the dry node sent no steal home: the test does not reach the case")
	}
	if st.SentHome < st.CrossNodeSentHome {
		t.Errorf("%d steals sent home, but only %d tasks sent home", st.CrossNodeSentHome, st.SentHome)
	}
}

var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// jsonKeys calls bad for every object key under v that is not snake_case.
func jsonKeys(v any, path string, bad func(path string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !snakeKey.MatchString(k) {
				bad(path + "." + k)
			}
			jsonKeys(e, path+"."+k, bad)
		}
	case []any:
		for i, e := range x {
			jsonKeys(e, fmt.Sprintf("%s[%d]", path, i), bad)
		}
	}
}

func TestStatsJSON(t *testing.T) {
	const tasks, panics = 100, 3
	var handled atomic.Int32
	p := newTestPool(t, WithSpec("2x1"), WithPanicHandler(func(any, []byte) { handled.Add(1) }))
	var wg sync.WaitGroup
	wg.Add(tasks)
	for i := range tasks {
		if err := p.Submit(context.Background(), func(*Worker) {
			defer wg.Done()
			if i%40 == 0 { // 0, 40, 80
				panic("stats")
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	within(t, hangBound, "the workload", wg.Wait)

	raw, err := json.Marshal(p.Stats())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var bad []string
	jsonKeys(doc, "", func(k string) { bad = append(bad, k) })
	if len(bad) > 0 {
		slices.Sort(bad)
		bad = slices.Compact(bad)
		t.Errorf("keys not in snake_case: %v", bad)
	}
	has := func(obj any, where string, keys ...string) {
		m, _ := obj.(map[string]any)
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s has no %q: %s", where, k, raw)
			}
		}
	}
	has(doc, "the stats", "submitted", "queued", "busy_workers", "total", "nodes", "workers")
	has(doc["total"], "total", "completed", "panicked", "tasks_run")
	nodes, _ := doc["nodes"].([]any)
	if len(nodes) != 2 {
		t.Fatalf("nodes: %s", raw)
	}
	for i, n := range nodes {
		has(n, fmt.Sprintf("nodes[%d]", i), "node", "submitted", "queued", "busy_workers", "completed", "panicked")
	}

	// Running and Queued are read at the call. Idle, the workers park.
	if !eventually(hangBound, func() bool { st := p.Stats(); return st.BusyWorkers == 0 && st.Queued == 0 }) {
		st := p.Stats()
		t.Errorf("idle pool: running %d, queued %d; want 0, 0", st.BusyWorkers, st.Queued)
	}
	// Hold both workers, and queue strict work behind node 0's.
	hold := make(chan struct{})
	var held sync.WaitGroup
	held.Add(2)
	for _, id := range p.Nodes() {
		if err := p.Node(id).Strict().Submit(context.Background(), func(*Worker) { held.Done(); <-hold }); err != nil {
			t.Fatal(err)
		}
	}
	within(t, hangBound, "holding both workers", held.Wait)
	for range 5 {
		if err := p.Node(p.Nodes()[0]).Strict().Submit(context.Background(), func(*Worker) {}); err != nil {
			t.Fatal(err)
		}
	}
	st := p.Stats()
	if st.BusyWorkers != 2 || st.Queued != 5 || st.Nodes[0].Queued != 5 || st.Nodes[1].Queued != 0 {
		t.Errorf("with both workers held and 5 tasks queued on node %d: running %d, queued %d (per node %d, %d); want 2, 5 (5, 0)",
			p.Nodes()[0], st.BusyWorkers, st.Queued, st.Nodes[0].Queued, st.Nodes[1].Queued)
	}
	close(hold)

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st = p.Stats()
	const all = tasks + 2 + 5
	if st.Submitted < all {
		t.Errorf("submitted %d, want at least %d", st.Submitted, all)
	}
	if st.Total.TasksRun != all || st.Total.Completed != st.Total.TasksRun {
		t.Errorf("after Close: tasks_run %d, completed %d; want %d, %d", st.Total.TasksRun, st.Total.Completed, all, all)
	}
	if st.Total.Panicked != panics || handled.Load() != panics {
		t.Errorf("after Close: panicked %d, handler called %d times; want %d", st.Total.Panicked, handled.Load(), panics)
	}
	var sub, done, pan uint64
	for _, n := range st.Nodes {
		sub += n.Submitted
		done += n.Completed
		pan += n.Panicked
	}
	if sub != st.Submitted || done != st.Total.Completed || pan != st.Total.Panicked {
		t.Errorf("per node sums %d, %d, %d differ from the totals %d, %d, %d",
			sub, done, pan, st.Submitted, st.Total.Completed, st.Total.Panicked)
	}
	if st.Queued != 0 {
		t.Errorf("after Close: queued %d, want 0", st.Queued)
	}
}

// TestStatsQueuedCountsWorkersQueues: Queued counts what waits on a
// worker that is in a task: tasks it spawned (its LIFO slot and run queue)
// and a Join's offered half, not only the shards, so that a pool whose
// workers are all blocked in tasks that spawned their work shows it.
func TestStatsQueuedCountsWorkersQueues(t *testing.T) {
	p := newTestPool(t, WithWorkers(1), WithBlockWatch(0))
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the pool's Close (cleanups run last first), if the test stops early
	var ran atomic.Int32
	child := func(*Worker) { ran.Add(1) }
	held := make(chan struct{})
	err := p.Submit(context.Background(), func(w *Worker) {
		for range 5 {
			w.Spawn(child) // the LIFO slot, then the run queue
		}
		_ = w.Join(func(*Worker) { close(held); <-release }, child) // the join slot
	})
	if err != nil {
		t.Fatal(err)
	}
	within(t, hangBound, "the task to hold its worker", func() { <-held })
	st := p.Stats()
	if st.Queued != 6 || st.Nodes[0].Queued != 6 || st.BusyWorkers != 1 {
		t.Errorf("one worker in a task that spawned 5 and offered a Join's half: queued %d (node %d), busy %d; want 6 (6), 1",
			st.Queued, st.Nodes[0].Queued, st.BusyWorkers)
	}
	releaseOnce()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Queued != 0 || ran.Load() != 6 {
		t.Errorf("after Close: queued %d, children run %d; want 0, 6", st.Queued, ran.Load())
	}
}

// After Close no worker runs a task, so Running is 0, as it is in an idle
// pool whose workers have parked. (Running is the workers neither parked
// nor searching; a worker that ends leaves the parked set, so an ended
// worker reads as running.)
func TestStatsRunningIsZeroAfterClose(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	for range 10 {
		if err := p.Submit(context.Background(), func(*Worker) {}); err != nil {
			t.Fatal(err)
		}
	}
	if !eventually(hangBound, func() bool { return p.Stats().BusyWorkers == 0 }) {
		t.Errorf("idle pool: running %d, want 0", p.Stats().BusyWorkers)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.BusyWorkers != 0 || st.Nodes[0].BusyWorkers != 0 || st.Nodes[1].BusyWorkers != 0 {
		t.Errorf("after Close: running %d (per node %d, %d), want 0: no worker is running a task",
			st.BusyWorkers, st.Nodes[0].BusyWorkers, st.Nodes[1].BusyWorkers)
	}
}

// Stats.Submitted matches TasksRun with loops called from inside tasks.
func statsSubmittedInnerLoop(t *testing.T) {
	for _, spec := range []string{"", "2x1"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, specOpts(spec)...)
			for range 20 {
				_ = p.Submit(context.Background(), func(w *Worker) {
					_ = w.Pool().ParallelFor(context.Background(), 10000, 10, func(w *Worker, lo, hi int) error { spinFor(time.Microsecond); return nil })
				})
			}
			p.Close()
			st := p.Stats()
			t.Logf("Submitted %d, TasksRun %d, Completed %d, Spawned %d, SentHome %d, Abandoned %d",
				st.Submitted, st.Total.TasksRun, st.Total.Completed, st.Total.Spawned, st.Total.SentHome, st.Abandoned)
			if st.Submitted != st.Total.TasksRun+st.Abandoned {
				t.Errorf("after Close: Submitted %d != TasksRun %d + Abandoned %d", st.Submitted, st.Total.TasksRun, st.Abandoned)
			}
		})
	}
}

// TestStatsAdversarial runs the adversarial cases of the counters, one subtest
// each: races and load meant to break what the tests above assert.
func TestStatsAdversarial(t *testing.T) {
	t.Run("SubmittedInnerLoop", statsSubmittedInnerLoop)
}
