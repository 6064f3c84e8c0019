package pool

// Adversarial tests of record reuse and chunk claiming: plain task
// records that the worker that ran them makes new tasks from, and that
// move between workers through the pool's stash (task.go); Join records
// that a worker offers again while a thief may hold a stale pointer
// (forkjoin.go); MapReduce's helpers that claim chunks from each node's
// cursor (reduce.go); and the spawn paths every task made inside a task
// takes (spawn.go).
//
// Every task and every chunk carries an index and counts its runs. A
// record reused while a queue, LIFO slot or shard still held it would
// show as one index run twice and another never; so would a chunk
// claimed twice. Each index runs exactly once, or, after a Shutdown gave
// up, is counted in Stats.Abandoned. Every wait is bounded (hangBound),
// so a hang fails the test instead of stalling the binary. Run them with
// -race, and with -tags numapool_smallqueue, whose 4-slot run queues
// overflow to the shards after a few spawns.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/queue"
)

// reuseSpecs are the layouts the tests run on: one worker, this machine,
// and synthetic pools of several nodes.
var reuseSpecs = []string{"1w", "", "2x1", "2x2", "4x1"}

// reuseOpts returns the options of a layout of reuseSpecs.
func reuseOpts(spec string, opts ...Option) []Option {
	if spec == "1w" {
		return append(opts, WithWorkers(1))
	}
	return specOpts(spec, opts...)
}

// problems collects what tasks find wrong: a task must not call t.Errorf,
// which panics once a test that gave up on a hang has returned.
type problems struct {
	mu   sync.Mutex
	list []string
}

func (pr *problems) add(format string, args ...any) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if len(pr.list) < 20 {
		pr.list = append(pr.list, fmt.Sprintf(format, args...))
	}
}

// report fails t with what was collected.
func (pr *problems) report(t *testing.T) {
	t.Helper()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, s := range pr.list {
		t.Error(s)
	}
}

// ---------------------------------------------------------------------
// Task records and the spawn paths.

// reuseTree is a tree of numbered tasks. Each task counts its run and
// makes children through one of the ways a task makes tasks, chosen by
// its index, until n indexes are issued.
type reuseTree struct {
	runs   []atomic.Int32
	issued atomic.Int64
	// refused counts indexes whose task the pool refused (a submission
	// from a task after intake closed): they never run.
	refused atomic.Int64
	// abandoned counts indexes whose waiter was told the task was
	// dropped (a Join's b, a Future); plain tasks are counted only in
	// Stats.Abandoned.
	abandoned atomic.Int64
	wg        sync.WaitGroup // one per issued index, done at its first run's end
	pr        *problems
	// exact leaves out the ways whose tasks a Shutdown can give up
	// uncounted: a stopped loop gives up the rest of its range, and a
	// failed Group skips its functions that have not begun.
	exact bool
	// burstEvery: every burstEvery-th spawning task spawns more children
	// than a run queue holds.
	burstEvery int
}

func newReuseTree(n int, pr *problems) *reuseTree {
	return &reuseTree{runs: make([]atomic.Int32, n), pr: pr, burstEvery: 45}
}

// issue hands out the next index, or false once all are out.
func (tr *reuseTree) issue() (int, bool) {
	i := tr.issued.Add(1) - 1
	if i >= int64(len(tr.runs)) {
		return 0, false
	}
	tr.wg.Add(1)
	return int(i), true
}

// issuedN is how many indexes were handed out.
func (tr *reuseTree) issuedN() int64 { return min(tr.issued.Load(), int64(len(tr.runs))) }

// forget takes back an index whose task was refused.
func (tr *reuseTree) forget() {
	tr.refused.Add(1)
	tr.wg.Done()
}

// task returns the function of index i.
func (tr *reuseTree) task(i int) func(*Worker) {
	return func(w *Worker) {
		n := tr.runs[i].Add(1)
		if n > 1 {
			tr.pr.add("task %d ran %d times", i, n)
			return
		}
		tr.children(w, i)
		tr.wg.Done()
	}
}

// children makes index i's children, each way of making a task in turn.
func (tr *reuseTree) children(w *Worker, i int) {
	p := w.Pool()
	nodes := p.Nodes()
	node := nodes[(i/11)%len(nodes)]
	child := func() (func(*Worker), bool) {
		c, ok := tr.issue()
		if !ok {
			return nil, false
		}
		return tr.task(c), true
	}
	switch i % 11 {
	case 0, 1: // Spawn: the LIFO slot, the previous one to the back of the queue
		k := 3
		if tr.burstEvery > 0 && i%tr.burstEvery == 0 {
			k = queue.Capacity + 40 // past the run queue: overflow to the shard
		}
		for range k {
			if fn, ok := child(); ok {
				w.Spawn(fn)
			}
		}
	case 2: // Group.Go: the back of the queue; Wait helps
		if tr.exact {
			break
		}
		g := w.Pool().Group(context.Background())
		for range 3 {
			if fn, ok := child(); ok {
				g.Go(func(w *Worker) error { fn(w); return nil })
			}
		}
		if err := g.Wait(); err != nil {
			tr.dropped(err, "Group.Wait")
		}
	case 3: // Async on the worker: the LIFO slot; Wait helps
		if fn, ok := child(); ok {
			f := Async(w, func(w *Worker) (int, error) { fn(w); return 0, nil })
			if _, err := f.Wait(); err != nil {
				tr.dropped(err, "Async(w).Wait")
				tr.abandoned.Add(1)
			}
		}
	case 4: // Run on a node, strict: its pinned shard, often another node's
		if fn, ok := child(); ok {
			if _, err := Run(p.Node(node).Strict(), func(w *Worker) (int, error) {
				if w.Node() != node {
					tr.pr.add("strict Run for node %d ran on node %d", node, w.Node())
				}
				fn(w)
				return 0, nil
			}); err != nil {
				tr.dropped(err, "Run(Node.Strict)")
				tr.abandoned.Add(1)
			}
		}
	case 5: // Submit from a task: a plain record made by submit, soft or strict
		for k := range 2 {
			if fn, ok := child(); ok {
				var err error
				if k == 0 {
					err = p.Node(node).Strict().Submit(context.Background(), fn)
				} else {
					err = p.Node(node).Submit(context.Background(), fn)
				}
				if err != nil {
					tr.forget()
				}
			}
		}
	case 6: // Join: b in the join slot, a here; nested Joins in the children
		fa, okA := child()
		fb, okB := child()
		switch {
		case okA && okB:
			if err := w.Join(fa, fb); err != nil {
				tr.dropped(err, "Join")
				tr.abandoned.Add(1)
			}
		case okA:
			fa(w)
		}
	case 7: // a loop: pieces split to the back of the queue, sent home, bitten
		if tr.exact {
			break
		}
		var fns []func(*Worker)
		for range 6 {
			if fn, ok := child(); ok {
				fns = append(fns, fn)
			}
		}
		if err := w.Pool().ParallelFor(context.Background(), len(fns), 1, func(w *Worker, lo, hi int) error {
			for j := lo; j < hi; j++ {
				fns[j](w)
			}
			return nil
		}); err != nil {
			tr.pr.add("ParallelFor: %v", err)
		}
	case 8: // Pool.Submit from a task: a plain record in some node's shard
		if fn, ok := child(); ok {
			if err := p.Submit(context.Background(), fn); err != nil {
				tr.forget()
			}
		}
	case 9: // Async on a node, soft, waited for
		if fn, ok := child(); ok {
			f := Async(p.Node(node), func(w *Worker) (int, error) { fn(w); return 0, nil })
			if _, err := f.Wait(); err != nil {
				tr.dropped(err, "Async(Node).Wait")
				tr.abandoned.Add(1)
			}
		}
	case 10: // Async on the pool from a task (the LIFO slot), not waited for
		for range 2 {
			if fn, ok := child(); ok {
				f := Async(p, func(w *Worker) (int, error) { fn(w); return 0, nil })
				_ = f
			}
		}
	}
}

// dropped checks an error a waiter got for a child: only a Shutdown that
// gave up may make one.
func (tr *reuseTree) dropped(err error, what string) {
	if !errors.Is(err, ErrAbandoned) {
		tr.pr.add("%s: %v, want nil or ErrAbandoned", what, err)
	}
}

// checkOnce fails t at an index that ran more than once and reports how
// many never ran.
func (tr *reuseTree) checkOnce(t *testing.T) (missing int64) {
	t.Helper()
	for i := range tr.issuedN() {
		switch n := tr.runs[i].Load(); n {
		case 0:
			missing++
		case 1:
		default:
			t.Fatalf("task %d ran %d times", i, n)
		}
	}
	return missing
}

// Every task made by every spawn path runs exactly once while the
// records of plain tasks are reused: Spawn (with bursts past the run
// queue's capacity), Group.Go, Async on the worker, a node and the pool,
// strict Run on another node, Submit and SubmitTo from a task, Join and
// ParallelFor. The accounting holds too: every task submitted or spawned
// was started once (Submitted == TasksRun after Close).
func TestHardReuseSpawnPathsExactlyOnce(t *testing.T) {
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

// Records pass between workers through the stash while several producers
// spawn at once: each wave, every worker makes a fan of tasks that the
// others steal and run, so records made on one worker are reused on
// another, and full batches are given and taken concurrently. Each task
// runs exactly once per wave.
func TestHardReuseStashConcurrentProducers(t *testing.T) {
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

// Shutdowns with tiny deadlines race task trees that reuse records:
// every index runs at most once, and every index that did not run was
// refused or is counted in Stats.Abandoned, exactly (each index is one
// task: a plain record, a Future, a Join's b or a Group's task). Bursts
// past the run queue's capacity overflow to the shards while the pool
// aborts.
func TestHardReuseAbortAccounting(t *testing.T) {
	iters := 40
	if testing.Short() {
		iters = 10
	}
	budget := time.Now().Add(4 * time.Second)
	for iter := 0; iter < iters && time.Now().Before(budget); iter++ {
		spec := reuseSpecs[iter%len(reuseSpecs)]
		rng := rand.New(rand.NewPCG(uint64(iter), 11))
		p := newTestPool(t, reuseOpts(spec)...)
		var pr problems
		tr := newReuseTree(1<<16, &pr)
		tr.exact = true
		tr.burstEvery = 9
		stop := make(chan struct{})
		var clients sync.WaitGroup
		for range 2 {
			clients.Add(1)
			go func() {
				defer clients.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					i, ok := tr.issue()
					if !ok {
						return
					}
					if err := p.Submit(context.Background(), tr.task(i)); err != nil {
						tr.forget()
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		var exits sync.WaitGroup
		var ns [3]int
		var errs [3]error
		for e := range 3 {
			exits.Add(1)
			go func() {
				defer exits.Done()
				if e == 2 {
					errs[e] = p.Close()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng2i(e, iter))*100*time.Microsecond)
				defer cancel()
				ns[e], errs[e] = p.Shutdown(ctx)
			}()
		}
		within(t, hangBound, "exits", exits.Wait)
		close(stop)
		within(t, hangBound, "clients", clients.Wait)
		pr.report(t)
		missing := tr.checkOnce(t)
		st := p.Stats()
		if want := missing - tr.refused.Load(); int64(st.Abandoned) != want {
			t.Errorf("iter %d (%s): %d issued, %d never ran, %d refused: %d dropped, Stats.Abandoned %d (waiters told %d); exits %v %v",
				iter, specName(spec), tr.issuedN(), missing, tr.refused.Load(), want, st.Abandoned, tr.abandoned.Load(), ns, errs)
		}
		if st.Submitted != st.Total.TasksRun+st.Abandoned {
			t.Errorf("iter %d (%s): Submitted %d != TasksRun %d + Abandoned %d",
				iter, specName(spec), st.Submitted, st.Total.TasksRun, st.Abandoned)
		}
		for e := range 2 {
			// A Shutdown that gave up with tasks still running counted
			// what was dropped until it returned.
			if ns[e] > int(st.Abandoned) || ns[e] != int(st.Abandoned) && !gaveUpEarly(errs[e]) {
				t.Errorf("iter %d: Shutdown %d returned %d, %v; Stats.Abandoned %d", iter, e, ns[e], errs[e], st.Abandoned)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// ---------------------------------------------------------------------
// Join records.

// panicValues lists the values of the *PanicErrors in err, which may be
// a join of errors.
func panicValues(err error) []any {
	if err == nil {
		return nil
	}
	if pe, ok := err.(*PanicError); ok {
		return []any{pe.Value}
	}
	var out []any
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, panicValues(e)...)
		}
	}
	return out
}

// Nested Joins reuse their records while thieves run the b sides: a side
// waits (Group.Wait, a loop) so that its worker runs other tasks, whose
// Joins take records of their own while the outer b runs elsewhere; some
// sides panic. Every a and b runs exactly once, and each Join returns
// exactly the panics of its own two sides: a thief with a stale record,
// or a record reused before its b finished, would run a b twice, skip
// one, or hand a Join another's outcome.
func TestHardReuseJoinNestedPanics(t *testing.T) {
	for _, spec := range []string{"1w", "", "2x2", "4x1"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, reuseOpts(spec)...)
			defer p.Close()
			const n = 1 << 13
			var runs [n]atomic.Int32
			var next atomic.Int64
			var pr problems
			var join func(w *Worker, depth int)
			side := func(id int, depth int, panics bool) func(*Worker) {
				return func(w *Worker) {
					if got := runs[id].Add(1); got != 1 {
						pr.add("side %d ran %d times", id, got)
					}
					if depth > 0 {
						switch id % 3 {
						case 0:
							join(w, depth-1)
						case 1: // wait inside a: the worker helps with other Joins
							g := w.Pool().Group(context.Background())
							for range 2 {
								g.Go(func(w *Worker) error { join(w, depth-1); return nil })
							}
							if err := g.Wait(); err != nil {
								pr.add("group: %v", err)
							}
						case 2:
							if err := w.Pool().ParallelFor(context.Background(), 2, 1, func(w *Worker, _, _ int) error { join(w, depth-1); return nil }); err != nil {
								pr.add("loop: %v", err)
							}
						}
					} else {
						spinFor(time.Duration(id%4) * time.Microsecond)
					}
					if panics {
						panic(id)
					}
				}
			}
			join = func(w *Worker, depth int) {
				a, b := int(next.Add(2)-2), 0
				b = a + 1
				if b >= n {
					return
				}
				pa, pb := a%7 == 3, b%5 == 2
				err := w.Join(side(a, depth, pa), side(b, depth, pb))
				got := panicValues(err)
				var want []any
				if pa {
					want = append(want, a)
				}
				if pb {
					want = append(want, b)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					pr.add("Join(%d, %d) = %v: panics %v, want %v", a, b, err, got, want)
				}
			}
			rounds := 0
			within(t, hangBound, "Joins", func() {
				for next.Load() < n-64 {
					rounds++
					if err := p.ParallelFor(context.Background(), 4, 1, func(w *Worker, _, _ int) error { join(w, 5); return nil }); err != nil {
						pr.add("outer loop: %v", err)
					}
				}
			})
			pr.report(t)
			used := int(min(next.Load(), n))
			for id := range used &^ 1 {
				if got := runs[id].Load(); got != 1 {
					t.Fatalf("side %d ran %d times (of %d sides in %d rounds)", id, got, used, rounds)
				}
			}
			st := p.Stats()
			t.Logf("%d sides in %d rounds; steals in node %d, cross node %d, panicked %d",
				used, rounds, st.Total.StealsInNode, st.Total.StealsCrossNode, st.Total.Panicked)
		})
	}
}

// ---------------------------------------------------------------------
// MapReduce's chunk claiming.

// chunkCheck is one MapReduce call's record: how often each index was
// mapped, and how many maps are running.
type chunkCheck struct {
	n, grain int
	mapped   []atomic.Int32
	running  atomic.Int32
	nodeOf   []atomic.Int32 // the group index that mapped each chunk, +1
	pr       *problems
}

func newChunkCheck(n, grain int, pr *problems) *chunkCheck {
	g := grain
	if g <= 0 {
		g = 1
	}
	return &chunkCheck{n: n, grain: grain, mapped: make([]atomic.Int32, n), nodeOf: make([]atomic.Int32, (n+g-1)/g), pr: pr}
}

// mapper maps [lo, hi) to the list of its one chunk index, after
// checking the chunk's bounds, and calls each (if not nil) first.
func (c *chunkCheck) mapper(each func(w *Worker, lo, hi int) error) func(w *Worker, lo, hi int) ([]int, error) {
	return func(w *Worker, lo, hi int) ([]int, error) {
		c.running.Add(1)
		defer c.running.Add(-1)
		if c.grain > 0 {
			if lo%c.grain != 0 || hi != min(lo+c.grain, c.n) {
				c.pr.add("n %d grain %d: chunk [%d, %d)", c.n, c.grain, lo, hi)
			}
			c.nodeOf[lo/c.grain].Store(int32(w.group.index) + 1)
		}
		for i := lo; i < hi; i++ {
			if got := c.mapped[i].Add(1); got != 1 {
				c.pr.add("n %d grain %d: index %d mapped %d times", c.n, c.grain, i, got)
			}
		}
		if each != nil {
			if err := each(w, lo, hi); err != nil {
				return nil, err
			}
		}
		return []int{lo}, nil
	}
}

// combineLists appends b to a: the result lists the chunks in the order
// combine met them.
func combineLists(a, b []int) []int { return append(a, b...) }

// check verifies a MapReduce that returned res, err with no error
// expected: every index mapped once, chunks combined in order, no map
// still running.
func (c *chunkCheck) check(res []int, err error, how string) {
	if r := c.running.Load(); r != 0 {
		c.pr.add("%s: MapReduce(n %d, grain %d) returned with %d maps running", how, c.n, c.grain, r)
	}
	if err != nil {
		c.pr.add("%s: MapReduce(n %d, grain %d) = %v", how, c.n, c.grain, err)
		return
	}
	for i := range c.mapped {
		if got := c.mapped[i].Load(); got != 1 {
			c.pr.add("%s: MapReduce(n %d, grain %d): index %d mapped %d times", how, c.n, c.grain, i, got)
			return
		}
	}
	if c.grain <= 0 {
		return
	}
	chunks := (c.n + c.grain - 1) / c.grain
	if len(res) != chunks {
		c.pr.add("%s: MapReduce(n %d, grain %d) combined %d chunks, want %d", how, c.n, c.grain, len(res), chunks)
		return
	}
	for k, lo := range res {
		if lo != k*c.grain {
			c.pr.add("%s: MapReduce(n %d, grain %d): chunk %d of the result starts at %d", how, c.n, c.grain, k, lo)
			return
		}
	}
}

// Every index is mapped exactly once and the chunks combine in order,
// for tiny and large grains, n not a multiple of grain, on one worker and
// on several nodes, with and without WithCrossNodeLoops, from outside the
// pool and from inside a task (which helps), and with several calls at
// once.
func TestHardReuseMapReduceChunksOnce(t *testing.T) {
	type size struct{ n, grain int }
	sizes := []size{{1, 1}, {2, 1}, {3, 2}, {5, 3}, {7, 100}, {64, 64}, {1003, 1}, {1003, 7},
		{1003, 1002}, {1003, 1003}, {1003, 1004}, {1003, 0}, {100_003, 997}}
	onEachLayout(t, reuseSpecs, func(t *testing.T, p *Pool, _ bool) {
		var pr problems
		ctx := context.Background()
		within(t, hangBound, "MapReduce calls", func() {
			for _, sz := range sizes {
				// From outside.
				c := newChunkCheck(sz.n, sz.grain, &pr)
				res, err := MapReduce(ctx, p, sz.n, sz.grain, c.mapper(nil), combineLists)
				c.check(res, err, "outside")
				// From inside a task.
				c = newChunkCheck(sz.n, sz.grain, &pr)
				r, err := Run(p, func(w *Worker) ([]int, error) {
					res, err := MapReduce(ctx, w.Pool(), sz.n, sz.grain, c.mapper(nil), combineLists)
					c.check(res, err, "inside")
					return res, nil
				})
				if err != nil || len(r) == 0 {
					pr.add("Run around MapReduce = %d chunks, %v", len(r), err)
				}
			}
			// Several at once, from outside and inside.
			var wg sync.WaitGroup
			for k := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sz := sizes[6+k%6]
					c := newChunkCheck(sz.n, sz.grain, &pr)
					if k%2 == 0 {
						res, err := MapReduce(ctx, p, sz.n, sz.grain, c.mapper(nil), combineLists)
						c.check(res, err, "concurrent outside")
						return
					}
					_, _ = Run(p, func(w *Worker) (int, error) {
						res, err := MapReduce(ctx, w.Pool(), sz.n, sz.grain, c.mapper(nil), combineLists)
						c.check(res, err, "concurrent inside")
						return 0, nil
					})
				}()
			}
			wg.Wait()
		})
		pr.report(t)
	})
}

// A node whose chunks are slow is helped by the other node's helpers once
// its block has waited crossNodeAfter under WithCrossNodeLoops, never without; each
// chunk is still mapped once. Node 0's 200 chunks take at least 4 ms
// even on two workers (twice crossNodeAfter: a node that finishes sooner
// has no reason to cross), node 1's at least 20 ms, so node 0's helpers
// reach node 1's block after crossNodeAfter with most of it left. With
// other packages' tests running beside it, node 0's threads were once
// kept off the CPUs until node 1 was done: a run that never crosses is
// repeated, up to three runs.
func TestHardReuseMapReduceCrossNodeClaims(t *testing.T) {
	onEachLayout(t, []string{"2x1", "2x2"}, func(t *testing.T, p *Pool, strict bool) {
		const n = 400
		blocks := p.Split(n)
		slow := func(_ *Worker, lo, _ int) error {
			if lo >= blocks[1].Lo {
				spinFor(200 * time.Microsecond)
			} else {
				spinFor(40 * time.Microsecond)
			}
			return nil
		}
		for run := 1; ; run++ {
			var pr problems
			c := newChunkCheck(n, 1, &pr)
			within(t, hangBound, "MapReduce", func() {
				res, err := MapReduce(context.Background(), p, n, 1, c.mapper(slow), combineLists)
				c.check(res, err, "slow node")
			})
			pr.report(t)
			crossed := 0
			for k := blocks[1].Lo; k < blocks[1].Hi; k++ {
				if c.nodeOf[k].Load() == 1 { // group 0, +1
					crossed++
				}
			}
			t.Logf("run %d: %d of node 1's %d chunks mapped by node 0", run, crossed, blocks[1].Hi-blocks[1].Lo)
			switch {
			case strict && crossed != 0:
				t.Fatalf("without WithCrossNodeLoops: %d of node 1's chunks mapped by node 0", crossed)
			case strict && run < 3:
				continue // strict: every run must stay put
			case !strict && crossed == 0 && run < 3:
				continue
			case !strict && crossed == 0:
				t.Errorf("node 0 never helped node 1's slow block after crossNodeAfter, in %d runs", run)
			}
			return
		}
	})
}

// A failing map (an error, a panic, a cancelled ctx) stops MapReduce,
// which returns that error with the zero T only once no map is running;
// no index is mapped twice; and the pool is whole afterwards: the next
// MapReduce maps everything. From outside and from inside a task, on
// every layout.
func TestHardReuseMapReduceFailures(t *testing.T) {
	errMap := errors.New("map failed")
	for _, spec := range reuseSpecs {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, reuseOpts(spec)...)
			defer p.Close()
			var pr problems
			call := func(inside bool, ctx context.Context, n, grain int, m func(*Worker, int, int) ([]int, error)) ([]int, error) {
				if !inside {
					return MapReduce(ctx, p, n, grain, m, combineLists)
				}
				var res []int
				var err error
				if _, rerr := Run(p, func(w *Worker) (int, error) {
					res, err = MapReduce(ctx, w.Pool(), n, grain, m, combineLists)
					return 0, nil
				}); rerr != nil {
					pr.add("Run: %v", rerr)
				}
				return res, err
			}
			within(t, hangBound, "MapReduce calls", func() {
				for _, inside := range []bool{false, true} {
					for _, fail := range []string{"error", "panic", "cancel", "cancelled"} {
						for _, grain := range []int{1, 5} {
							const n = 2003
							how := fmt.Sprintf("inside %v, %s, grain %d", inside, fail, grain)
							c := newChunkCheck(n, grain, &pr)
							ctx, cancel := context.WithCancel(context.Background())
							if fail == "cancelled" {
								cancel()
							}
							bad := 3 * n / 5 / grain * grain
							res, err := call(inside, ctx, n, grain, c.mapper(func(w *Worker, lo, hi int) error {
								spinFor(2 * time.Microsecond)
								if lo != bad {
									return nil
								}
								switch fail {
								case "error":
									return errMap
								case "panic":
									panic(errMap)
								case "cancel":
									cancel()
								}
								return nil
							}))
							cancel()
							if r := c.running.Load(); r != 0 {
								pr.add("%s: returned with %d maps running", how, r)
							}
							if res != nil {
								pr.add("%s: result %d chunks, want the zero value", how, len(res))
							}
							var pe *PanicError
							switch {
							case fail == "error" && !errors.Is(err, errMap),
								fail == "panic" && (!errors.As(err, &pe) || !errors.Is(err, errMap)),
								(fail == "cancel" || fail == "cancelled") && !errors.Is(err, context.Canceled):
								pr.add("%s: err %v", how, err)
							}
							if fail == "cancelled" {
								for i := range c.mapped {
									if c.mapped[i].Load() != 0 {
										pr.add("%s: index %d mapped with ctx cancelled before the call", how, i)
										break
									}
								}
							}
							// The pool is whole: the next call maps everything.
							c = newChunkCheck(n, grain, &pr)
							res, err = call(inside, context.Background(), n, grain, c.mapper(nil))
							c.check(res, err, how+", next call")
						}
					}
				}
			})
			pr.report(t)
		})
	}
}

// MapReduce inside a map: each outer chunk runs a MapReduce of its own
// on the pool (pass w.Pool()), some of them a third level, from several
// callers at once. Every index of every level is mapped exactly once and
// each result is right.
func TestHardReuseMapReduceNested(t *testing.T) {
	onEachLayout(t, reuseSpecs, func(t *testing.T, p *Pool, _ bool) {
		const outer, inner, third = 48, 37, 5
		var pr problems
		ctx := context.Background()
		sum := func(a, b int) int { return a + b }
		var wg sync.WaitGroup
		for caller := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var hits [outer * inner * third]atomic.Int32
				got, err := MapReduce(ctx, p, outer, 1+caller, func(w *Worker, lo, hi int) (int, error) {
					total := 0
					for j := lo; j < hi; j++ {
						v, err := MapReduce(ctx, w.Pool(), inner, 1+j%4, func(w *Worker, lo, hi int) (int, error) {
							s := 0
							for k := lo; k < hi; k++ {
								base := (j*inner + k) * third
								if k%3 != 0 {
									hits[base].Add(1)
									s++
									continue
								}
								v, err := MapReduce(ctx, w.Pool(), third, 2, func(_ *Worker, lo, hi int) (int, error) {
									for m := lo; m < hi; m++ {
										hits[base+m].Add(1)
									}
									return hi - lo, nil
								}, sum)
								if err != nil {
									return 0, err
								}
								s += v
							}
							return s, nil
						}, sum)
						if err != nil {
							return 0, err
						}
						total += v
					}
					return total, nil
				}, sum)
				want := 0
				for j := range outer {
					for k := range inner {
						base := (j*inner + k) * third
						span := 1
						if k%3 == 0 {
							span = third
						}
						want += span
						for m := range span {
							if h := hits[base+m].Load(); h != 1 {
								pr.add("caller %d: index %d/%d/%d mapped %d times", caller, j, k, m, h)
							}
						}
					}
				}
				if err != nil || got != want {
					pr.add("caller %d: nested MapReduce = %d, %v; want %d", caller, got, err, want)
				}
			}()
		}
		within(t, hangBound, "nested MapReduce", wg.Wait)
		pr.report(t)
	})
}

// Shutdown (from outside, with tiny deadlines) and Close (from inside a
// map) during MapReduce calls made from outside and from inside tasks:
// every call returns; one that returns nil mapped every index once with
// the right result; one that fails says why (ErrAbandoned or ErrClosed)
// and mapped no index twice; none returns with a map still running.
func TestHardReuseMapReduceShutdown(t *testing.T) {
	iters := 30
	if testing.Short() {
		iters = 8
	}
	specs := []string{"1w", "2x1", "2x2", "4x1", ""}
	budget := time.Now().Add(4 * time.Second)
	for iter := 0; iter < iters && time.Now().Before(budget); iter++ {
		spec := specs[iter%len(specs)]
		var opts []Option
		if iter%3 != 1 {
			opts = append(opts, WithCrossNodeLoops())
		}
		p := newTestPool(t, reuseOpts(spec, opts...)...)
		var pr problems
		var ok, failed atomic.Int64
		verify := func(c *chunkCheck, res []int, err error, how string) {
			if err == nil {
				ok.Add(1)
				c.check(res, err, how)
				return
			}
			failed.Add(1)
			if r := c.running.Load(); r != 0 {
				pr.add("%s: returned %v with %d maps running", how, err, r)
			}
			if !errors.Is(err, ErrAbandoned) && !errors.Is(err, ErrClosed) {
				pr.add("%s: err %v, want nil, ErrAbandoned or ErrClosed", how, err)
			}
			for i := range c.mapped {
				if got := c.mapped[i].Load(); got > 1 {
					pr.add("%s: index %d mapped %d times", how, i, got)
				}
			}
		}
		const n, grain = 600, 3
		closeAt := int64(-1)
		if iter%2 == 1 {
			closeAt = int64(20 + iter*7) // a map closes intake from inside
		}
		var maps atomic.Int64
		each := func(w *Worker, lo, hi int) error {
			spinFor(3 * time.Microsecond)
			if maps.Add(1) == closeAt {
				if err := w.Pool().Close(); !errors.Is(err, ErrInsideTask) {
					pr.add("Close from a map = %v, want ErrInsideTask", err)
				}
			}
			return nil
		}
		stop := make(chan struct{})
		var callers sync.WaitGroup
		for k := range 3 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					c := newChunkCheck(n, grain, &pr)
					if k == 0 {
						res, err := MapReduce(context.Background(), p, n, grain, c.mapper(each), combineLists)
						verify(c, res, err, "outside")
						if errors.Is(err, ErrClosed) {
							return
						}
						continue
					}
					fin := make(chan struct{})
					err := p.Submit(context.Background(), func(w *Worker) {
						defer close(fin)
						res, err := MapReduce(context.Background(), w.Pool(), n, grain, c.mapper(each), combineLists)
						verify(c, res, err, "inside")
					})
					if err != nil {
						return
					}
					select {
					case <-fin:
					case <-p.done:
						// Every worker has ended: the task ran (fin is
						// closed) or the Shutdown dropped it before it
						// started.
						if !isDone(fin) {
							return
						}
					case <-time.After(hangBound):
						pr.add("iter %d: MapReduce inside a task did not return", iter)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(iter%4) * 500 * time.Microsecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iter%3)*200*time.Microsecond)
		within(t, hangBound, "Shutdown", func() { _, _ = p.Shutdown(ctx) })
		cancel()
		close(stop)
		within(t, hangBound, "MapReduce callers", callers.Wait)
		pr.report(t)
		if t.Failed() {
			t.Fatalf("iter %d (%s): %d calls returned nil, %d failed", iter, specName(spec), ok.Load(), failed.Load())
		}
	}
}

// A grain of math.MaxInt (or any grain within n of it) asks for one
// chunk, [0, n). Counted as (n + grain - 1) / grain the chunks overflowed
// there: with grain math.MaxInt the count came out 0, no helper was made,
// and MapReduce blocked for ever; with math.MaxInt - 5 it came out -1 and
// make panicked in the caller. MapReduce now clamps grain to n and counts
// 1 + (n-1)/grain.
func TestHardReuseMapReduceHugeGrain(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	for _, grain := range []int{math.MaxInt / 2, math.MaxInt - 5, math.MaxInt} {
		var got int
		var err error
		var r any
		within(t, time.Second, fmt.Sprintf("MapReduce(n 10, grain %d)", grain), func() {
			r = recovered(func() {
				got, err = MapReduce(context.Background(), p, 10, grain, func(_ *Worker, lo, hi int) (int, error) {
					return hi - lo, nil
				}, func(a, b int) int { return a + b })
			})
		})
		if r != nil || got != 10 || err != nil {
			t.Errorf("MapReduce(n 10, grain %d) = %d, %v (panic: %v); want 10, nil", grain, got, err, r)
		}
	}
}

// nestedPanicEnv selects the child process of
// TestHardReuseJoinUnwoundByPlainPanic.
const nestedPanicEnv = "NUMAPOOL_TEST_NESTED_PLAIN_PANIC"

// nestedPanicValue is what the plain task panics with.
const nestedPanicValue = "numapool-nested-plain-task-panic"

// A plain task's panic, with no panic handler, must end the process, as
// an unrecovered panic in a goroutine does. The test runs that in a child
// process and expects it to die of the panic.
//
// It once did not: a worker waiting inside a task (runUntil) runs other
// tasks nested on its stack, so a panic raised again from Worker.call
// unwound through runUntil and every frame under it up to the nearest
// catch, which turned it into a *PanicError of an unrelated task; the
// process lived on. Here that frame is Worker.Join waiting for its b,
// which a thief is still running: Join's deferred joinDone put its
// joinTask back on the worker's list while the thief held it, the
// worker's next Join offered the same record, the thief's late
// done.Store(true) landed on it, and that Join returned before its own b
// had run. taskPanicked now reports the panic and exits instead of
// panicking through the caller's frames, and Join gives its record back
// only once b is done.
func TestHardReuseJoinUnwoundByPlainPanic(t *testing.T) {
	if os.Getenv(nestedPanicEnv) == "1" {
		nestedPlainPanicChild()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHardReuseJoinUnwoundByPlainPanic$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nestedPanicEnv+"=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("child process hung:\n%s", out)
	}
	if err != nil && strings.Contains(string(out), "panic: "+nestedPanicValue) {
		return // the process died of the plain task's panic, as documented
	}
	var saw []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "child: ") || strings.Contains(line, "DATA RACE") {
			saw = append(saw, line)
		}
	}
	t.Errorf("a plain task that panicked with no handler, run by a worker helping inside a Join, did not end the process (child: %v):\n%s",
		err, strings.Join(saw, "\n"))
}

// nestedPlainPanicChild is the child process's scenario, on a pool of two
// workers W1 and W2 with no panic handler. It prints what it saw; every
// wait is bounded.
func nestedPlainPanicChild() {
	p, err := newPool([]Option{WithWorkers(2), WithoutEnv()}, func(string) (string, bool) { return "", false })
	if err != nil {
		fmt.Println("child: New:", err)
		return
	}
	defer p.Close()
	say := func(format string, args ...any) { fmt.Printf("child: "+format+"\n", args...) }
	waitFor := func(what string, cond func() bool) bool {
		for deadline := time.Now().Add(2 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				say("gave up waiting for %s", what)
				return false
			}
			time.Sleep(10 * time.Microsecond)
		}
		return true
	}
	var bStarted, bDone, b2Started, b2Done atomic.Bool
	releaseB, releaseB2 := make(chan struct{}), make(chan struct{})
	block := func(ch chan struct{}) {
		select {
		case <-ch:
		case <-time.After(2 * time.Second):
		}
	}
	finished := make(chan struct{})
	err = p.Submit(context.Background(), func(w *Worker) {
		defer close(finished)
		// Join 1, on W1: W2 steals b and blocks in it; a spawns the
		// panicking plain task into W1's LIFO slot, which W1 runs while
		// it helps, waiting for b.
		_, err1 := Run(w, func(w *Worker) (int, error) {
			return 0, w.Join(func(w *Worker) {
				if waitFor("b to be stolen", bStarted.Load) {
					w.Spawn(func(*Worker) { panic(nestedPanicValue) })
				}
			}, func(*Worker) {
				bStarted.Store(true)
				block(releaseB)
				bDone.Store(true)
			})
		})
		say("the process lives on; Join 1 returned %v while its b was still running: %v", err1, !bDone.Load())
		// Join 2 on W1 reuses the record: W2 finishes the old b (marking
		// the record done), then steals b2 and blocks in it.
		err2 := w.Join(func(w *Worker) {
			close(releaseB)
			waitFor("the old b to end", bDone.Load)
			waitFor("b2 to be stolen", b2Started.Load)
		}, func(*Worker) {
			b2Started.Store(true)
			block(releaseB2)
			b2Done.Store(true)
		})
		say("Join 2 returned %v before its b had run to the end: %v", err2, !b2Done.Load())
		close(releaseB2)
	})
	if err != nil {
		say("Submit: %v", err)
		return
	}
	select {
	case <-finished:
	case <-time.After(4 * time.Second):
		say("the root task did not finish")
	}
}

// onEachLayout runs body on a pool of each layout in specs (see
// reuseSpecs), with and without WithCrossNodeLoops, each as a subtest.
func onEachLayout(t *testing.T, specs []string, body func(t *testing.T, p *Pool, strict bool)) {
	for _, spec := range specs {
		for _, strict := range []bool{false, true} {
			name := specName(spec)
			var opts []Option
			if strict {
				name += "/strict"
			} else {
				opts = append(opts, WithCrossNodeLoops())
			}
			t.Run(name, func(t *testing.T) {
				p := newTestPool(t, reuseOpts(spec, opts...)...)
				defer p.Close()
				body(t, p, strict)
			})
		}
	}
}
