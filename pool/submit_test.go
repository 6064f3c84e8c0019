package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/queue"
	"github.com/numapool/numapool/steal"
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
		if n.ID() != 42 {
			t.Errorf("Node(42): ID %d, want 42, the ID it was made for", n.ID())
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
			maxShard.Store(int64(w.domain.inject.Len()))
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
	p := newTestPool(t, WithWorkers(1), WithMachineWatch(0)) // see newTestPool
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

// Strict submissions run only on their node.
func TestSubmitToStrictStaysOnNode(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"), WithSteal(steal.Flat))
	defer p.Close()
	var wrong atomic.Int32
	var wg sync.WaitGroup
	for i := range 2000 {
		node := p.Nodes()[i%2]
		wg.Add(1)
		if err := p.Node(node).Strict().Submit(context.Background(), func(w *Worker) {
			defer wg.Done()
			if w.Node() != node {
				wrong.Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d strict tasks ran on another node", n)
	}
}

// Strict tasks for one node while the other node idles: the idle node's
// workers never get them (no cross-node steal, nothing sent home), so a
// dry node does not churn a busy node's strict work.
func TestStrictTasksAreNotStolen(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	node := p.Nodes()[0]
	var ran, wrong atomic.Int32
	var wg sync.WaitGroup
	for range 2000 {
		wg.Add(1)
		if err := p.Node(node).Strict().Submit(context.Background(), func(w *Worker) {
			defer wg.Done()
			ran.Add(1)
			if w.Node() != node {
				wrong.Add(1)
			}
			for start := time.Now(); time.Since(start) < 5*time.Microsecond; {
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	_ = p.Close()
	st := p.Stats().Total
	if ran.Load() != 2000 || wrong.Load() != 0 {
		t.Errorf("%d tasks ran, %d on the wrong node", ran.Load(), wrong.Load())
	}
	if st.StealsCrossNode != 0 || st.SentHome != 0 {
		t.Errorf("strict work of node %d: %d cross-node steals, %d tasks sent home", node, st.StealsCrossNode, st.SentHome)
	}
}

// Rounds of strict tasks that spawn work, on every node: a node's strict
// task must wake that node's workers even when the last searcher to park
// is another node's (a lost wake-up hangs here).
func TestStrictBurstsNoLostWakeups(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	for _, spec := range []string{"2x1", "2x2", "4x1"} {
		t.Run(spec, func(t *testing.T) {
			p := newTestPool(t, WithSpec(spec))
			defer p.Close()
			var wg sync.WaitGroup
			var ran atomic.Int64
			for range rounds {
				for _, node := range p.Nodes() {
					wg.Add(1)
					if err := p.Node(node).Strict().Submit(context.Background(), func(w *Worker) {
						defer wg.Done()
						for range 4 {
							w.Spawn(func(*Worker) { ran.Add(1) })
						}
					}); err != nil {
						t.Fatal(err)
					}
				}
				wg.Wait()
			}
			_ = p.Close()
			if want := int64(rounds * len(p.Nodes()) * 4); ran.Load() != want {
				t.Errorf("%d spawned tasks ran, want %d", ran.Load(), want)
			}
		})
	}
}

// A worker whose node has strict and soft work queued takes from both:
// a stream of strict tasks does not hold the soft ones back.
func TestPinnedAndInjectShardsAlternate(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	node := p.Nodes()[0]
	gate := make(chan struct{})
	if err := p.Node(node).Strict().Submit(context.Background(), func(*Worker) { <-gate }); err != nil {
		t.Fatal(err)
	}
	var order []bool // true: strict; written by the one worker only
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(2)
		_ = p.Node(node).Strict().Submit(context.Background(), func(*Worker) { order = append(order, true); wg.Done() })
		_ = p.Node(node).Submit(context.Background(), func(*Worker) { order = append(order, false); wg.Done() })
	}
	close(gate)
	wg.Wait()
	soft := 0
	for _, strict := range order[:50] {
		if !strict {
			soft++
		}
	}
	if soft < 10 || soft > 40 {
		t.Errorf("of the first 50 tasks run, %d were soft and %d strict: one shard starved the other", soft, 50-soft)
	}
}

// Strict tasks that block until all of them have started: each needs its
// own worker, so none may be held behind another (a worker that took
// several pinned tasks at once would strand the rest).
func TestBlockingStrictTasksEachGetAWorker(t *testing.T) {
	for _, spec := range []string{"1x2", "2x2"} {
		p := newTestPool(t, WithSpec(spec))
		var started sync.WaitGroup
		all := make(chan struct{})
		for _, node := range p.Nodes() {
			for range p.Workers() / len(p.Nodes()) {
				started.Add(1)
				if err := p.Node(node).Strict().Submit(context.Background(), func(*Worker) { started.Done(); <-all }); err != nil {
					t.Fatal(err)
				}
			}
		}
		done := make(chan struct{})
		go func() { started.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: blocking strict tasks did not all start within 10 s", spec)
		}
		close(all)
		_ = p.Close()
	}
}

func TestBoundedShard(t *testing.T) {
	p := newTestPool(t, WithWorkers(1), WithShardBound(4))
	block := make(chan struct{})
	started := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { close(started); <-block })
	<-started
	full := 0
	for range 10 {
		if err := p.TrySubmit(func(*Worker) {}); errors.Is(err, ErrFull) {
			full++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if full != 6 {
		t.Errorf("%d of 10 TrySubmits were refused, want 6 (bound 4)", full)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := p.Submit(ctx, func(*Worker) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SubmitCtx on a full shard: %v", err)
	}
	close(block)
	if err := p.Submit(context.Background(), func(*Worker) {}); err != nil { // waits for room
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// A burst of submissions from outside an idle pool spreads over its
// nodes: whole-pool work goes where a worker searches only while the
// node picked in turn sleeps entirely, so the burst wakes both nodes and
// each runs a fair share and receives some of it in its shard.
func TestOutsideBurstSpreadsOverNodes(t *testing.T) {
	for _, spec := range []string{"2x1", "2x2"} {
		t.Run(spec, func(t *testing.T) {
			p := newTestPool(t, WithSpec(spec))
			defer p.Close()
			const n = 2000
			ran := make([]atomic.Int64, 2)
			var wg sync.WaitGroup
			wg.Add(n)
			for range n {
				if err := p.Submit(context.Background(), func(w *Worker) {
					defer wg.Done()
					for start := time.Now(); time.Since(start) < 20*time.Microsecond; {
					}
					ran[w.domain.index].Add(1)
				}); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			st := p.Stats()
			t.Logf("ran %d and %d; queued on the nodes %d and %d", ran[0].Load(), ran[1].Load(), st.Nodes[0].Submitted, st.Nodes[1].Submitted)
			for i := range ran {
				// Shares, not halves: on a machine busy with other work a
				// node's workers may get less CPU than the other's.
				if got := ran[i].Load(); got < n/20 {
					t.Errorf("node %d ran %d of %d tasks; want at least %d", p.Nodes()[i], got, n, n/20)
				}
				if got := st.Nodes[i].Submitted; got < n/4 {
					t.Errorf("node %d's shard received %d of the %d tasks; want at least %d", p.Nodes()[i], got, n, n/4)
				}
			}
		})
	}
}

// Whole-pool work from outside a pool with every worker asleep wakes a
// worker of the node of the caller's CPU: the caller is about to wait, so
// that worker can take its CPU at once, where one bound to the other
// node's CPU waits for it to wake from idle (round robin alone sent every
// other such hand-off there). The caller's thread is bound to each node's
// CPU in turn, and each Run waits for the pool to be asleep first.
func TestOutsideWorkWakesTheCallersNode(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs: 2x1 puts its nodes on two of them")
	}
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	asleep := func() bool {
		for _, d := range p.domains {
			if int(d.sleeping.Load()) < len(d.workers) {
				return false
			}
		}
		return true
	}
	const calls = 20
	wrong := 0
	for i := range calls {
		d := p.domains[i%2]
		os := d.workers[0].th.Bound()
		th, err := pin.Lock(os)
		if err != nil {
			t.Skipf("cannot bind the caller to node %d's CPUs %s: %v", d.node.ID, os, err)
		}
		if !eventually(5*time.Second, asleep) {
			t.Fatal("the pool's workers did not all park within 5 s")
		}
		node, err := Run(p, func(w *Worker) (int, error) { return w.Node(), nil })
		if err := th.Restore(); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if node != d.node.ID {
			wrong++
			t.Logf("call %d, from OS CPUs %s (node %d), ran on node %d", i, os, d.node.ID, node)
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d hand-offs to a sleeping pool ran on the node the caller was not on", wrong, calls)
	}
}
