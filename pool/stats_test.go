package pool

import (
	"context"
	"fmt"
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
	within(t, hangBound, "the loops and Close", func() {
		for range 5 {
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
