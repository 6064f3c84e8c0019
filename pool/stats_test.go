package pool

import (
	"fmt"
	"sync/atomic"
	"testing"
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
				stop := watchdog(t, hangBound, "the fan-out and Close")
				for range roots {
					if err := p.Submit(func(w *Worker) { tree(w, depth) }); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				stop()
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
