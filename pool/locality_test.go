package pool

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numapool/numapool/steal"
)

// A balanced SubmitTo load on a synthetic 2x2 machine: hierarchical
// stealing keeps work in its node, flat stealing does not.
func TestLocalityHierarchicalVersusFlat(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 20
	}
	run := func(mode steal.Mode) Counters {
		p := newTestPool(t, WithSpec("2x2"), WithSteal(mode))
		nodes := p.Nodes()
		// Leaves sleep rather than spin: the 4 synthetic workers share 2
		// real CPUs, and a spinning leaf would keep an idle worker's
		// thread off the CPU for a whole OS time slice.
		leaf := func(*Worker) { time.Sleep(20 * time.Microsecond) }
		// Rounds of one root per node, each spawning 100 leaves into its
		// worker's queue (no overflow): the node's other worker is idle
		// and steals them. Both nodes are equally loaded; crossing nodes
		// is needed only when one finishes its round first.
		for range rounds {
			var wg sync.WaitGroup
			for _, node := range nodes {
				wg.Add(1)
				root := func(w *Worker) {
					defer wg.Done()
					for range 100 {
						w.Spawn(leaf)
					}
				}
				if err := p.SubmitTo(node, root); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		return p.Stats().Total
	}
	h, f := run(steal.Hierarchical), run(steal.Flat)
	t.Logf("tasks stolen: hierarchical %d in-node, %d cross-node (%d/%d steals); flat %d in-node, %d cross-node (%d/%d steals)",
		h.TasksStolenInNode, h.TasksStolenCrossNode, h.StealsInNode, h.StealsCrossNode,
		f.TasksStolenInNode, f.TasksStolenCrossNode, f.StealsInNode, f.StealsCrossNode)
	hTotal := h.TasksStolenInNode + h.TasksStolenCrossNode
	fTotal := f.TasksStolenInNode + f.TasksStolenCrossNode
	if hTotal < 50 || fTotal < 50 {
		t.Skipf("too little stealing to compare (%d and %d tasks stolen)", hTotal, fTotal)
	}
	// Hierarchical: most stealing stays in the node; flat: victims are
	// drawn from all workers, two of three in the other node. A steal
	// moves half a queue, so one tail-end steal can move many tasks:
	// judge by tasks moved or by steal events, whichever is steadier.
	hShare := float64(h.TasksStolenCrossNode) / float64(hTotal)
	fShare := float64(f.TasksStolenCrossNode) / float64(fTotal)
	hLocal := hShare <= 0.35 || h.StealsCrossNode*2 <= h.StealsInNode
	fSpread := fShare >= 1.5*hShare || f.StealsCrossNode*3 >= f.StealsCrossNode+f.StealsInNode
	if !hLocal || !fSpread {
		t.Errorf("cross-node share of stolen tasks: hierarchical %.2f, flat %.2f; steals cross/in: hierarchical %d/%d, flat %d/%d",
			hShare, fShare, h.StealsCrossNode, h.StealsInNode, f.StealsCrossNode, f.StealsInNode)
	}
}

func threads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// Close ends the workers' threads: no extra thread is left behind.
func TestCloseLeavesNoThreads(t *testing.T) {
	before := threads()
	if before < 0 {
		t.Skip("no /proc/self/status")
	}
	p := newTestPool(t, WithSpec("4x2"))
	during := threads()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	// The runtime may start a thread or two of its own meanwhile; eight
	// worker threads left behind would show.
	for threads() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := threads(); after > before+2 {
		t.Errorf("threads: %d before, %d with 8 workers, %d after Close", before, during, after)
	}
}
