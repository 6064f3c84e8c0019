package pool

// Adversarial tests of shards that hold plain tasks as functions (item,
// task.go) beside records: backlogs far past the backlog threshold, with
// every plain submission form, bounded and unbounded pools, panics, and
// Shutdowns racing a Close. Every task has an id and counts its runs.

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/queue"
)

// ledger gives each plain task an id and counts its runs.
type ledger struct {
	runs     []atomic.Int32
	accepted []atomic.Bool
	next     atomic.Int64
	dbl      atomic.Int64
	dblMu    sync.Mutex
	dblIDs   []int
}

func newLedger(n int) *ledger {
	return &ledger{runs: make([]atomic.Int32, n), accepted: make([]atomic.Bool, n)}
}

// id reserves an id, or -1 when the ledger is full.
func (l *ledger) id() int {
	i := l.next.Add(1) - 1
	if i >= int64(len(l.runs)) {
		return -1
	}
	return int(i)
}

func (l *ledger) ran(i int) {
	if l.runs[i].Add(1) != 1 {
		l.dbl.Add(1)
		l.dblMu.Lock()
		if len(l.dblIDs) < 10 {
			l.dblIDs = append(l.dblIDs, i)
		}
		l.dblMu.Unlock()
	}
}

// tally returns accepted, ran (distinct), not run, ran-but-not-accepted.
func (l *ledger) tally() (acc, ran, notRun, stray int64) {
	n := min(l.next.Load(), int64(len(l.runs)))
	for i := range n {
		r := l.runs[i].Load()
		a := l.accepted[i].Load()
		switch {
		case a && r > 0:
			acc++
			ran++
		case a:
			acc++
			notRun++
		case r > 0:
			stray++
		}
	}
	return
}

// ledgerTree returns a plain task that records its run and spawns two
// children at each of depth levels, and fanout at level 2: enough to
// overflow the run queue well past backlog, so that the node's shard
// holds function items (task.go).
func ledgerTree(l *ledger, id, depth, fanout int, panicky func() bool) func(*Worker) {
	return func(w *Worker) {
		l.ran(id)
		if depth > 0 {
			n := 2
			if depth == 2 {
				n = fanout
			}
			for range n {
				c := l.id()
				if c < 0 {
					break
				}
				l.accepted[c].Store(true) // Spawn always accepts
				w.Spawn(ledgerTree(l, c, depth-1, fanout, panicky))
			}
		}
		if panicky != nil && panicky() {
			panic("ledger tree")
		}
	}
}

var backlogSpecs = []string{"", "2x2", "4x1", "2x1"}

// submitPlain submits fn from outside the pool in one of five ways, by
// kind: Submit, SubmitTo node, SubmitToStrict node, TrySubmit, or a
// strict SubmitCtx that gives up after 200µs.
func submitPlain(p *Pool, kind, node int, fn func(*Worker)) error {
	switch kind {
	case 0:
		return p.Submit(context.Background(), fn)
	case 1:
		return p.Node(node).Submit(context.Background(), fn)
	case 2:
		return p.Node(node).Strict().Submit(context.Background(), fn)
	case 3:
		return p.TrySubmit(fn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Microsecond)
	defer cancel()
	return p.Node(node).Strict().Submit(ctx, fn)
}

// backlog is a long backlog in a node's shard: many times what a
// worker's queue holds.
const backlog = 4 * queue.Capacity

// Huge Spawn backlogs (far beyond backlog) with outside submissions of
// every plain kind, while Shutdowns with tiny deadlines and a Close race:
// every accepted task runs at most once, and the ones that did not run
// are exactly the abandoned count.
func TestHardBacklogAbortAccounting(t *testing.T) {
	t.Logf("queue.Capacity=%d backlog=%d", queue.Capacity, backlog)
	iters := 24
	for iter := range iters {
		spec := backlogSpecs[iter%len(backlogSpecs)]
		rng := rand.New(rand.NewPCG(uint64(iter), 99))
		opts := specOpts(spec)
		if iter%3 != 0 {
			opts = append(opts, WithShardBound(1+rng.IntN(8)))
		}
		if (iter/4)%3 == 1 {
			opts = append(opts, WithBinding(pin.Goroutines)) // each spec twice
		}
		var panics atomic.Int64
		var panicky func() bool
		if iter%4 == 1 {
			opts = append(opts, WithPanicHandler(func(any, []byte) { panics.Add(1) }))
			var k atomic.Int64
			panicky = func() bool { return k.Add(1)%997 == 0 }
		}
		p := newTestPool(t, opts...)
		l := newLedger(1 << 17)
		fanout := 3*backlog + rng.IntN(backlog)
		nodes := p.Nodes()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if i%16 == 15 {
						time.Sleep(50 * time.Microsecond)
					}
					select {
					case <-stop:
						return
					default:
					}
					id := l.id()
					if id < 0 {
						return
					}
					depth := (i + c) % 3
					fn := ledgerTree(l, id, depth, fanout, panicky)
					err := submitPlain(p, (c+i)%5, nodes[i%len(nodes)], fn)
					if err == nil {
						l.accepted[id].Store(true)
						continue
					}
					if errors.Is(err, ErrClosed) {
						return
					}
				}
			}()
		}
		pause := time.Duration(1000+rng.IntN(15000)) * time.Microsecond
		if iter%2 == 1 {
			pause *= 4
		}
		time.Sleep(pause)
		var exits sync.WaitGroup
		var ns [4]int
		var errs [4]error
		for e := range 4 {
			exits.Add(1)
			d := time.Duration(rng.IntN(6)) * 100 * time.Microsecond
			go func() {
				defer exits.Done()
				if e == 3 {
					errs[e] = p.Close()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				ns[e], errs[e] = p.Shutdown(ctx)
			}()
		}
		within(t, 10*time.Second, "exits", func() { exits.Wait() })
		close(stop)
		within(t, 10*time.Second, "clients", func() { wg.Wait() })
		abandoned := int64(p.Stats().Abandoned)
		acc, ran, notRun, stray := l.tally()
		if l.dbl.Load() != 0 {
			t.Fatalf("iter %d (%s): %d double runs, ids %v", iter, specName(spec), l.dbl.Load(), l.dblIDs)
		}
		if stray != 0 {
			t.Errorf("iter %d: %d tasks ran whose submission failed", iter, stray)
		}
		if notRun != abandoned {
			t.Errorf("iter %d (%s): accepted %d ran %d not run %d, but abandoned %d; exits %v %v",
				iter, specName(spec), acc, ran, notRun, abandoned, ns, errs)
		}
		for e := range 3 {
			// A Shutdown that gave up with tasks still running counted
			// what was dropped until it returned.
			if ns[e] > int(abandoned) || ns[e] != int(abandoned) && !gaveUpEarly(errs[e]) {
				t.Errorf("iter %d: Shutdown %d returned %d, %v; Stats %d", iter, e, ns[e], errs[e], abandoned)
			}
		}
		if testing.Verbose() && iter%6 == 0 {
			t.Logf("iter %d (%s): accepted %d ran %d abandoned %d panics %d", iter, specName(spec), acc, ran, abandoned, panics.Load())
		}
	}
}

// The same backlogs drained by Close alone: every accepted task runs
// exactly once and nothing is abandoned. Bounded records and function
// items interleave in one shard.
func TestHardBacklogDrain(t *testing.T) {
	for iter := range 16 {
		spec := backlogSpecs[iter%len(backlogSpecs)]
		opts := specOpts(spec, WithShardBound(1+iter%8))
		if (iter/4)%2 == 1 {
			opts = append(opts, WithBinding(pin.Goroutines))
		}
		p := newTestPool(t, opts...)
		l := newLedger(1 << 17)
		fanout := 2*backlog + 7
		nodes := p.Nodes()
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 60 {
					id := l.id()
					if id < 0 {
						return
					}
					fn := ledgerTree(l, id, (i+c)%3, fanout, nil)
					err := submitPlain(p, (c+i)%4, nodes[i%len(nodes)], fn)
					if err == nil {
						l.accepted[id].Store(true)
					}
				}
			}()
		}
		within(t, 10*time.Second, "clients", func() { wg.Wait() })
		within(t, 10*time.Second, "Close", func() {
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		acc, ran, notRun, stray := l.tally()
		if l.dbl.Load() != 0 || notRun != 0 || stray != 0 || p.Stats().Abandoned != 0 {
			t.Fatalf("iter %d (%s): accepted %d ran %d notRun %d stray %d double %d (%v) abandoned %d",
				iter, specName(spec), acc, ran, notRun, stray, l.dbl.Load(), l.dblIDs, p.Stats().Abandoned)
		}
	}
}

// Tasks taken from a shard as function items (the backlog) spawn more
// tasks from inside, submit to other nodes from inside (no place taken)
// and to strict nodes; then Close. Exactly once, nothing abandoned.
func TestHardBacklogItemsSpawnFromInside(t *testing.T) {
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
