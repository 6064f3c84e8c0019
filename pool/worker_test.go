package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/queue"
	"github.com/numapool/numapool/steal"
)

// Spawned tasks go to the LIFO slot in every build: the race detector
// must see the code that runs in production.
func TestLIFOSlotUsedUnderRace(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	var ran atomic.Int32
	done := make(chan struct{})
	if err := p.Submit(context.Background(), func(w *Worker) {
		var chain func(k int) func(*Worker)
		chain = func(k int) func(*Worker) {
			return func(w *Worker) {
				ran.Add(1)
				if k == 0 {
					close(done)
					return
				}
				w.Spawn(chain(k - 1))
			}
		}
		w.Spawn(chain(20))
	}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, done, hangBound, "a chain of 21 spawned tasks")
	within(t, hangBound, "Close", func() { _ = p.Close() })
	if st := p.Stats().Total; st.LIFOHits == 0 {
		t.Errorf("21 tasks each spawned by the one before on one worker, LIFOHits = 0 (spawned %d, run %d): the LIFO slot is not used",
			st.Spawned, st.TasksRun)
	}
}

// Tasks put in the LIFO slot of a worker that never gets back to it
// (its task spins until they ran) are taken by thieves on their last
// pass, racing further spawns into the slot: each runs exactly once, none
// is stranded (after Tokio's lifo_bit_race).
func TestLIFOSlotStolenOnLastPass(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: the spinning task holds it, and each steal waits for a preemption")
	}
	for _, spec := range []string{"", "2x2"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, specOpts(spec)...)
			if p.Workers() < 2 {
				t.Skip("one worker: nobody to steal")
			}
			const perRound = 4
			runs := make([]atomic.Int32, rounds*perRound)
			stranded := make(chan string, 1)
			done := make(chan struct{})
			if err := p.Submit(context.Background(), func(w *Worker) {
				defer close(done)
				for r := range rounds {
					// A burst: each spawn displaces the last into the queue;
					// the newest stays in the slot.
					for k := range perRound {
						id := r*perRound + k
						w.Spawn(func(*Worker) { runs[id].Add(1) })
					}
					deadline := time.Now().Add(hangBound / 2)
					for k := range perRound {
						for runs[r*perRound+k].Load() == 0 {
							if time.Now().After(deadline) {
								stranded <- fmt.Sprintf("round %d: task %d stranded in the queue or LIFO slot of a busy worker", r, k)
								return
							}
						}
					}
				}
			}); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, done, hangBound, "the spawning task")
			select {
			case msg := <-stranded:
				t.Fatal(msg)
			default:
			}
			within(t, hangBound, "Close", func() { _ = p.Close() })
			for id := range runs {
				if n := runs[id].Load(); n != 1 {
					t.Fatalf("task %d ran %d times", id, n)
				}
			}
		})
	}
}

// The fairness interval is tuned from the time per task: a worker that
// turns its loop without running tasks (waiting in Join for a stolen b)
// has run no task, so the interval keeps its initial value.
func TestTuningCountsTasks(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer func() { within(t, hangBound, "Close", func() { _ = p.Close() }) }()
	type result struct {
		before, after uint32
		stolen        bool
	}
	res := make(chan result, 1)
	if err := p.Submit(context.Background(), func(w *Worker) {
		before := w.fair.interval
		bStarted := make(chan struct{})
		stolen := false
		_ = w.Join(func(*Worker) {
			select {
			case <-bStarted:
				stolen = true
			case <-time.After(hangBound / 2):
			}
		}, func(*Worker) {
			close(bStarted)
			time.Sleep(20 * time.Millisecond) // the joiner waits in runUntil meanwhile
		})
		res <- result{before, w.fair.interval, stolen}
	}); err != nil {
		t.Fatal(err)
	}
	var r result
	within(t, hangBound, "a Join whose b is stolen", func() { r = <-res })
	if !r.stolen {
		t.Fatal("Join's b was not taken by the other worker")
	}
	if r.after != initialInterval {
		t.Errorf("one task run, yet the fairness interval went from %d to %d (initial %d): the tuning counts loop turns, not tasks",
			r.before, r.after, initialInterval)
	}
}

// The tuning measures time spent running tasks: time parked between
// bursts of tiny tasks does not count, so the interval stays high (many
// tiny tasks fit in 200µs) all through each burst, also right after the
// worker wakes.
func TestTuningIgnoresParkedTime(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer func() { within(t, hangBound, "Close", func() { _ = p.Close() }) }()
	const perBurst, bursts, warmup = 200, 12, 2
	type burst struct {
		last, lowest uint32 // the interval seen by the last task, and the lowest seen by any
		took         time.Duration
	}
	lowest := uint32(1 << 31)
	var last burst
	for b := range bursts {
		res := make(chan burst, 1)
		if err := p.Submit(context.Background(), func(w *Worker) {
			start := time.Now()
			left, low := perBurst, w.fair.interval // only this worker touches them
			for range perBurst {
				w.Spawn(func(w *Worker) {
					low = min(low, w.fair.interval)
					if left--; left == 0 {
						res <- burst{w.fair.interval, low, time.Since(start)}
					}
				})
			}
		}); err != nil {
			t.Fatal(err)
		}
		within(t, hangBound, fmt.Sprintf("burst %d", b), func() { last = <-res })
		if b >= warmup {
			lowest = min(lowest, last.lowest)
		}
		if b < bursts-1 {
			time.Sleep(20 * time.Millisecond) // idle: the worker parks
		}
	}
	perTask := last.took / perBurst
	expect := min(max(int(targetLookEvery/max(perTask, 1)), 2), 127)
	// The spawning task itself is one long task in each burst, the mean
	// moves by a tenth per look, and on a loaded machine a thread taken
	// off its CPU mid-burst reads as task time: allow a dip to an eighth.
	// Parked time counted as task time pulls the interval down to 2 or 3.
	want := min(64, expect/8)
	if want < 4 {
		t.Skipf("tasks take %v each here: too slow to tell the tuning's inputs apart", perTask)
	}
	if int(last.last) < want || int(lowest) < want {
		t.Errorf("bursts of %d tasks of ~%v with 20ms parked between: the fairness interval is %d at the end of the last burst and fell to %d after a park; want >= %d (about %d tasks fit in %v)",
			perBurst, perTask, last.last, lowest, want, expect, targetLookEvery)
	}
	t.Logf("interval %d at the end, %d at the lowest, %v per task", last.last, lowest, perTask)
}

// A task in the LIFO slot is not stranded behind the long task that
// spawned it: an idle worker takes it on its last pass.
func TestLIFOTaskNotStranded(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	result := make(chan error, 1)
	_ = p.Submit(context.Background(), func(w *Worker) {
		ran := make(chan struct{})
		w.Spawn(func(*Worker) { close(ran) })
		// Keep this worker busy until the child has run elsewhere.
		select {
		case <-ran:
			result <- nil
		case <-time.After(10 * time.Second):
			result <- errors.New("the spawned task was stranded in the LIFO slot of a busy worker")
		}
	})
	if err := <-result; err != nil {
		t.Fatal(err)
	}
}

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
