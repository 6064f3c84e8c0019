package pool

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/queue"
)

func TestNodeSubmitForms(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	nodes := p.Nodes()
	var wrong, ran atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for i := range 400 {
		id := nodes[i%2]
		n := p.Node(id)
		if n.ID() != id || n.err != nil {
			t.Fatalf("Node(%d): ID %d, err %v", id, n.ID(), n.err)
		}
		strict := i%4 >= 2
		if strict {
			n = n.Strict()
		}
		fn := func(w *Worker) {
			defer wg.Done()
			ran.Add(1)
			if strict && w.Node() != id {
				wrong.Add(1)
			}
		}
		wg.Add(1)
		var err error
		switch i % 5 {
		case 0:
			err = n.Submit(context.Background(), fn)
		case 1:
			err = n.TrySubmit(fn)
		case 2:
			err = n.Submit(ctx, fn)
		case 3:
			if strict {
				err = p.Node(id).Strict().Submit(context.Background(), fn)
			} else {
				err = p.Node(id).Submit(context.Background(), fn)
			}
		default:
			err = n.Submit(context.Background(), fn)
		}
		if err != nil {
			wg.Done()
			t.Errorf("submission %d: %v", i, err)
		}
	}
	within(t, hangBound, "node submissions", wg.Wait)
	if ran.Load() != 400 || wrong.Load() != 0 {
		t.Errorf("%d of 400 ran; %d strict tasks ran off their node", ran.Load(), wrong.Load())
	}
}

func TestNodeUnknown(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	fn := func(*Worker) { t.Error("a task for an unknown node ran") }
	ctx := context.Background()
	for _, n := range []Node{p.Node(42), p.Node(42).Strict()} {
		if n.ID() != -1 {
			t.Errorf("Node(42): ID %d, want -1", n.ID())
		}
		for name, err := range map[string]error{
			"Submit":    n.Submit(context.Background(), fn),
			"TrySubmit": n.TrySubmit(fn),
			"SubmitCtx": n.Submit(ctx, fn),
		} {
			if !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
				t.Errorf("Node(42).%s = %v, want ErrUnknownNode naming node 42", name, err)
			}
		}
	}
	for name, err := range map[string]error{
		"SubmitTo":       p.Node(42).Submit(context.Background(), fn),
		"SubmitToStrict": p.Node(42).Strict().Submit(context.Background(), fn),
	} {
		if !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
			t.Errorf("%s(42) = %v, want ErrUnknownNode naming node 42", name, err)
		}
	}
}

// A node's bound is its own: with node 0's worker held and its queue
// full, TrySubmit returns ErrFull, SubmitCtx returns ctx's error, soft or
// strict; node 1 still takes work.
func TestNodeFull(t *testing.T) {
	const bound = 4
	p := newTestPool(t, WithSpec("2x1"), WithShardBound(bound))
	nodes := p.Nodes()
	n0 := p.Node(nodes[0])
	hold := make(chan struct{})
	started := make(chan struct{})
	if err := n0.Strict().Submit(context.Background(), func(*Worker) { close(started); <-hold }); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, hangBound, "the holding task")
	var ran atomic.Int64
	for i := range bound {
		if err := n0.Strict().TrySubmit(func(*Worker) { ran.Add(1) }); err != nil {
			t.Fatalf("filling node %d: TrySubmit %d = %v", nodes[0], i, err)
		}
	}
	for name, n := range map[string]Node{"soft": n0, "strict": n0.Strict()} {
		if err := n.TrySubmit(func(*Worker) {}); !errors.Is(err, ErrFull) {
			t.Errorf("%s TrySubmit on a full node = %v, want ErrFull", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		within(t, hangBound, "SubmitCtx on a full node", func() {
			if err := n.Submit(ctx, func(*Worker) {}); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s SubmitCtx on a full node = %v, want context.DeadlineExceeded", name, err)
			}
		})
		cancel()
		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		if err := n.Submit(cctx, func(*Worker) {}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s SubmitCtx(cancelled) on a full node = %v, want context.Canceled", name, err)
		}
	}
	// The other node is not full.
	done := make(chan struct{})
	if err := p.Node(nodes[1]).Strict().TrySubmit(func(*Worker) { close(done) }); err != nil {
		t.Errorf("TrySubmit on node %d while node %d is full = %v", nodes[1], nodes[0], err)
	} else {
		waitClosed(t, done, hangBound, "the other node's task")
	}
	close(hold)
	within(t, hangBound, "Submit waiting for room", func() {
		if err := n0.Submit(context.Background(), func(*Worker) { ran.Add(1) }); err != nil {
			t.Errorf("Submit after room = %v", err)
		}
	})
	within(t, hangBound, "Close", func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	if ran.Load() != bound+1 {
		t.Errorf("%d of %d queued tasks ran", ran.Load(), bound+1)
	}
}

// With WithShardBound, Submit / Async / Pool.Join from inside a task do
// not wait for room (only the workers make it): a tree of tasks that each
// submit children completes instead of deadlocking the pool.
func submitBoundedSubmitFromInside(t *testing.T) {
	for _, how := range []string{"Submit", "RunJoin", "AsyncWait"} {
		t.Run(how, func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2), WithShardBound(1))
			var ran atomic.Int64
			var wg sync.WaitGroup
			var rec func(depth int) func(*Worker)
			rec = func(depth int) func(*Worker) {
				return func(w *Worker) {
					defer wg.Done()
					ran.Add(1)
					if depth == 0 {
						return
					}
					switch how {
					case "Submit":
						for range 2 {
							wg.Add(1)
							if err := w.Pool().Submit(context.Background(), rec(depth-1)); err != nil {
								wg.Done()
							}
						}
					case "RunJoin":
						wg.Add(2)
						_, _ = Run(w.Pool(), func(w *Worker) (struct{}, error) { return struct{}{}, w.Join(rec(depth-1), rec(depth-1)) })
					case "AsyncWait":
						wg.Add(2)
						f1 := Async(w.Pool(), func(w *Worker) (int, error) { rec(depth - 1)(w); return 0, nil })
						f2 := Async(w.Pool(), func(w *Worker) (int, error) { rec(depth - 1)(w); return 0, nil })
						f1.Wait()
						f2.Wait()
					}
				}
			}
			wg.Add(1)
			if err := p.Submit(context.Background(), rec(8)); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
				t.Logf("completed: %d tasks", ran.Load())
			case <-time.After(3 * time.Second):
				t.Errorf("deadlock: %d of %d tasks ran in 3s; every worker is blocked in a bounded push from inside a task", ran.Load(), 1<<9-1)
			}
			within(t, 5*time.Second, "Close", func() { p.Close() })
		})
	}
}

// Tasks taken from a shard as function items (the backlog) spawn more
// tasks from inside, submit to other nodes from inside (no place taken)
// and to strict nodes; then Close. Exactly once, nothing abandoned.
func submitBacklogItemsSpawnFromInside(t *testing.T) {
	for iter := range 12 {
		spec := backlogSpecs[iter%len(backlogSpecs)]
		opts := specOpts(spec)
		if iter%2 == 0 {
			opts = append(opts, WithShardBound(1+iter%5))
		}
		p := newTestPool(t, opts...)
		l := newLedger(1 << 17)
		nodes := p.Nodes()
		var inner func(id, depth int) func(*Worker)
		inner = func(id, depth int) func(*Worker) {
			return func(w *Worker) {
				l.ran(id)
				if depth == 0 {
					return
				}
				for k := range 3 {
					c := l.id()
					if c < 0 {
						return
					}
					fn := inner(c, depth-1)
					var err error
					switch k {
					case 0:
						w.Spawn(fn)
					case 1:
						err = w.Pool().Node(nodes[(id+k)%len(nodes)]).Submit(context.Background(), fn)
					case 2:
						err = w.Pool().Node(nodes[(id+k)%len(nodes)]).Strict().Submit(context.Background(), fn)
					}
					if err == nil {
						l.accepted[c].Store(true)
					}
				}
			}
		}
		var maxShard atomic.Int64
		root := l.id()
		l.accepted[root].Store(true)
		err := p.Submit(context.Background(), func(w *Worker) {
			l.ran(root)
			// Build a backlog of function items, each of which spawns.
			for range 3*backlog + 100 {
				c := l.id()
				if c < 0 {
					return
				}
				l.accepted[c].Store(true)
				w.Spawn(inner(c, 2))
			}
			maxShard.Store(int64(w.group.inject.Len()))
		})
		if err != nil {
			t.Fatal(err)
		}
		within(t, 15*time.Second, "Close", func() {
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		acc, ran, notRun, stray := l.tally()
		if iter == 0 {
			t.Logf("shard length after the root's spawns: %d (backlog %d), accepted %d", maxShard.Load(), backlog, acc)
		}
		if l.dbl.Load() != 0 || notRun != 0 || stray != 0 || p.Stats().Abandoned != 0 {
			t.Fatalf("iter %d (%s): accepted %d ran %d notRun %d stray %d double %d (%v) abandoned %d",
				iter, specName(spec), acc, ran, notRun, stray, l.dbl.Load(), l.dblIDs, p.Stats().Abandoned)
		}
	}
}

// Every task made by every spawn path runs exactly once while the
// records of plain tasks are reused: Spawn (with bursts past the run
// queue's capacity), Group.Go, Async on the worker, a node and the pool,
// strict Run on another node, Submit and SubmitTo from a task, Join and
// ParallelFor. The accounting holds too: every task submitted or spawned
// was started once (Submitted == TasksRun after Close).
func submitSpawnPathsExactlyOnce(t *testing.T) {
	n := 12000
	if testing.Short() {
		n = 3000
	}
	for _, spec := range reuseSpecs {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, reuseOpts(spec)...)
			var pr problems
			tr := newReuseTree(n, &pr)
			for range 4 {
				if i, ok := tr.issue(); ok {
					if err := p.Submit(context.Background(), tr.task(i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			within(t, hangBound, "the task tree", tr.wg.Wait)
			within(t, hangBound, "Close", func() { _ = p.Close() })
			pr.report(t)
			if missing := tr.checkOnce(t); missing != tr.refused.Load() {
				t.Errorf("%d tasks never ran, %d refused", missing, tr.refused.Load())
			}
			if got := tr.issuedN(); got != int64(n) {
				t.Errorf("%d tasks issued, want %d", got, n)
			}
			st := p.Stats()
			t.Logf("Submitted %d, TasksRun %d, Spawned %d, Overflows %d, LIFOHits %d, SentHome %d, Abandoned %d",
				st.Submitted, st.Total.TasksRun, st.Total.Spawned, st.Total.Overflows, st.Total.LIFOHits, st.Total.SentHome, st.Abandoned)
			if st.Submitted != st.Total.TasksRun || st.Abandoned != 0 {
				t.Errorf("after Close: Submitted %d, TasksRun %d, Abandoned %d", st.Submitted, st.Total.TasksRun, st.Abandoned)
			}
			if spec == "1w" && st.Total.Overflows == 0 {
				t.Errorf("one worker spawned bursts of %d without an overflow", queue.Capacity+40)
			}
		})
	}
}

// TestSubmitAdversarial runs the adversarial cases of submission and spawning, one subtest
// each: races and load meant to break what the tests above assert.
func TestSubmitAdversarial(t *testing.T) {
	t.Run("BoundedSubmitFromInside", submitBoundedSubmitFromInside)
	t.Run("BacklogItemsSpawnFromInside", submitBacklogItemsSpawnFromInside)
	t.Run("SpawnPathsExactlyOnce", submitSpawnPathsExactlyOnce)
}
