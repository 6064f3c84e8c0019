package pool

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numapool/numapool/queue"
	"github.com/numapool/numapool/steal"
)

// A balanced SubmitTo load on a synthetic 2x2 machine: hierarchical
// stealing keeps work in its node, flat stealing does not. Rounds run
// until each mode has made enough steals for the shares to mean
// something.
func TestLocalityHierarchicalVersusFlat(t *testing.T) {
	if queue.Capacity < 100 {
		t.Skipf("run queues of %d slots overflow into the shards, which any node drains: the test needs 100 leaves to fit", queue.Capacity)
	}
	const wantSteals = 60
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
		deadline := time.Now().Add(15 * time.Second)
		for round := 0; ; round++ {
			var wg sync.WaitGroup
			for _, node := range nodes {
				wg.Add(1)
				root := func(w *Worker) {
					defer wg.Done()
					for range 100 {
						w.Spawn(leaf)
					}
				}
				if err := p.Node(node).Submit(context.Background(), root); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			if round%10 == 9 {
				st := p.Stats().Total
				if st.StealsInNode+st.StealsCrossNode >= wantSteals || time.Now().After(deadline) {
					break
				}
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		return p.Stats().Total
	}
	h, f := run(steal.Hierarchical), run(steal.Flat)
	hSteals, fSteals := h.StealsInNode+h.StealsCrossNode, f.StealsInNode+f.StealsCrossNode
	t.Logf("steals in-node/cross-node: hierarchical %d/%d (tasks %d/%d), flat %d/%d (tasks %d/%d)",
		h.StealsInNode, h.StealsCrossNode, h.TasksStolenInNode, h.TasksStolenCrossNode,
		f.StealsInNode, f.StealsCrossNode, f.TasksStolenInNode, f.TasksStolenCrossNode)
	if hSteals < 30 || fSteals < 15 {
		t.Skipf("too little stealing in 15 s to compare (%d and %d steals)", hSteals, fSteals)
	}
	// Flat draws victims from all workers, about half of the busy ones in
	// the other node; hierarchical crosses only when a node ran dry at
	// the end of a round. Alone, hierarchical measured 0.12-0.20 here and
	// flat 0.55-0.70; with the other packages' tests beside it (go test
	// ./...), nodes finish their rounds unevenly and hierarchical reached
	// 0.53 (flat 0.68).
	hShare := float64(h.StealsCrossNode) / float64(hSteals)
	fShare := float64(f.StealsCrossNode) / float64(fSteals)
	if hShare > 0.6 || fShare < 0.25 || fShare-hShare < 0.1 {
		t.Errorf("cross-node share of steals: hierarchical %.2f, flat %.2f; want hierarchical <= 0.6, flat >= 0.25 and 0.1 above hierarchical",
			hShare, fShare)
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

// Close ends the workers' threads: none of them is left behind. (The
// thread count alone cannot tell: the runtime keeps idle threads it
// started meanwhile.)
func TestCloseLeavesNoThreads(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc/self/task")
	}
	p := newTestPool(t, WithSpec("4x2"))
	var tids []int
	for _, w := range p.workers {
		tids = append(tids, int(w.tid.Load())) // set before the worker reported to New
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	left := func() (alive []int) {
		for _, tid := range tids {
			if tid == os.Getpid() {
				// The main thread cannot exit: the runtime parks it for
				// good once a goroutine locked to it ends (its mask was
				// put back first).
				continue
			}
			if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err == nil {
				alive = append(alive, tid)
			}
		}
		return alive
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(left()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive := left(); len(alive) > 0 {
		t.Errorf("worker threads %v of %v still alive 5s after Close", alive, tids)
	}
}
