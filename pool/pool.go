package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/numapool/numapool/queue"
	"github.com/numapool/numapool/steal"
	"github.com/numapool/numapool/topology"
)

// Errors callers branch on.
var (
	// ErrClosed: the pool no longer accepts work.
	ErrClosed = errors.New("pool: closed")
	// ErrFull: the node's bounded queue is full (TrySubmit).
	ErrFull = errors.New("pool: node queue full")
	// ErrUnknownNode: a node ID the pool has no worker group for
	// (Pool.Node's methods, Async and Run on such a Node), or that is none of the memory nodes this process may
	// allocate from (AllocOnNode); the error names the node and the nodes
	// there are.
	ErrUnknownNode = errors.New("pool: no worker group for node")
	// ErrTooManyWorkers: New was asked for more workers locked to threads
	// than the process may start threads for (the Go runtime's
	// debug.SetMaxThreads, a cgroup's pids.max, RLIMIT_NPROC); the error
	// names the count, the room and the limit (threads.go).
	ErrTooManyWorkers = errors.New("pool: more workers than threads the process may start")
	// ErrInsideTask: Close or Shutdown was called from one of the pool's
	// own tasks, which cannot wait for the pool to drain (it would wait
	// for itself). Intake is closed and the pool drains on its own; call
	// Close from outside to wait for it.
	ErrInsideTask = errors.New("pool: Close from inside one of the pool's tasks cannot wait for the pool (it would wait for itself): intake is closed; call Close from outside to wait")
)

// group is the worker group of one NUMA node.
type group struct {
	index   int                      // position in Pool.groups
	node    topology.Node            // the node, with its allowed CPUs
	inject  *queue.InjectShard[item] // work for the node that other nodes may take
	pinned  *queue.InjectShard[item] // work that must run on the node
	workers []*Worker
	dist    []int // distance to each group, by index

	// places holds one token per task queued in inject or pinned under the bound;
	// nil when unbounded.
	places chan struct{}
	// crossSearching is set while one of the group's workers searches
	// other nodes: at most one does at a time.
	crossSearching atomic.Bool
	searching      atomic.Int32 // the group's workers searching
	sleeping       atomic.Int32 // the group's workers parked
	_              [64]byte     // off the line notify reads on every spawn
	// busyAt is when a worker of the group last showed it keeps up: it
	// ran a stretch of tasks, or woke for work (soft.go).
	busyAt    atomic.Int64 // sched.clock
	taskNanos atomic.Int64 // a worker's mean task time, as last tuned
}

// Pool is a NUMA-aware worker pool. Its methods may be called from any
// goroutine.
//
// A Pool that becomes unreachable without Close is closed for you: its
// queued work still runs, then its workers (and their locked threads)
// end. Close it yourself to wait for that, or to see an error.
type Pool struct {
	*sched
}

// sched is the pool itself. Workers hold it, not the Pool the user holds,
// so that the Pool can become unreachable while the workers run.
type sched struct {
	self       weak.Pointer[Pool] // the user's Pool, while it is reachable
	cfg        config
	topo       *topology.Topology
	groups     []*group
	workers    []*Worker
	layout     *steal.Layout
	idle       idle
	runnable   runnableGauge // whether goroutines wait for a processor (runnable.go)
	stash      stash         // task records to reuse (task.go)
	byG        owners        // the workers by their goroutine (owner.go)
	order      []int         // Submit's round robin over groups, weighted by size
	rr         atomic.Uint64
	degraded   []string // what of the plan did not hold; under degradedMu once started
	degradedMu sync.Mutex
	started    time.Time // the pool's clock starts (clock)

	// The life cycle (lifecycle.go).
	state     atomic.Int32 // running, closing, drained, aborting
	closeOnce sync.Once
	abortOnce sync.Once
	cause     error         // why work is dropped; set before aborting is stored
	deadline  atomic.Int64  // the earliest Shutdown deadline, Unix ns; 0: none
	intake    chan struct{} // closed when intake closes
	live      atomic.Int32  // workers not yet ended
	done      chan struct{} // closed by the last worker to end
	abandoned atomic.Int64
	sweep     sweep  // a Shutdown's drop of the queues while tasks still run
	claim     *claim // the CPUs the workers are placed on, given back when the last one ends
}

// New starts a pool. Without options it discovers this machine, makes one
// worker group per NUMA node that has CPUs this process may use, starts
// min(allowed CPUs, GOMAXPROCS) workers spread over the nodes in
// proportion to their CPUs, binds each to its node's CPUs
// (numa_domains) and steals hierarchically. The NUMAPOOL_* environment
// variables set defaults that options override.
func New(opts ...Option) (*Pool, error) {
	return newPool(opts, nil)
}

func newPool(opts []Option, lookup func(string) (string, bool)) (*Pool, error) {
	cfg, err := newConfig(opts, lookup)
	if err != nil {
		return nil, err
	}
	pl, err := makePlan(cfg)
	if err != nil {
		return nil, err
	}
	p := &sched{cfg: cfg, topo: pl.topo, degraded: pl.degraded, claim: pl.claim, started: time.Now(),
		intake: make(chan struct{}), done: make(chan struct{})}
	var nodeWorkers [][]int
	for gi, gp := range pl.groups {
		g := &group{index: gi, node: gp.node, inject: queue.NewInjectShard[item](), pinned: queue.NewInjectShard[item](), dist: gp.distRow}
		if cfg.shardBound > 0 {
			g.places = make(chan struct{}, cfg.shardBound)
		}
		var ids []int
		for _, cpu := range gp.cpus {
			w := newWorker(p, g, len(p.workers), cpu)
			g.workers = append(g.workers, w)
			ids = append(ids, w.id)
			p.workers = append(p.workers, w)
		}
		nodeWorkers = append(nodeWorkers, ids)
		p.groups = append(p.groups, g)
	}
	p.layout, err = steal.NewLayout(nodeWorkers, func(a, b int) int { return p.groups[a].dist[b] })
	if err != nil {
		p.claim.release()
		return nil, err
	}
	p.order = weightedOrder(p.groups)
	p.idle.init(p)

	// Start the workers; each reports whether its placement held.
	pool := &Pool{p}
	p.self = weak.Make(pool) // before the workers start: they read it (hold)
	errs := make(chan error, len(p.workers))
	p.live.Store(int32(len(p.workers)))
	for _, w := range p.workers {
		go w.main(errs)
	}
	var failed []error
	for range p.workers {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	p.byG.init(p.workers)
	if len(failed) > 0 {
		if cfg.required {
			p.stop()
			return nil, fmt.Errorf("pool: placement refused (WithRequiredPlacement): %w", errors.Join(failed...))
		}
		for _, err := range failed {
			p.degraded = append(p.degraded, err.Error())
		}
	}
	warnOnce(stderr, cfg.envWarnings)
	if cfg.display {
		p.displayAffinity(stderr)
	}
	// Dropped without Close: close intake; the workers run what is queued
	// and end. s does not refer to pool, so pool can be collected.
	runtime.AddCleanup(pool, func(s *sched) { s.beginClose() }, p)
	return pool, nil
}

// weightedOrder lists group indexes so that each appears as often as it
// has workers, spread out (smooth weighted round robin).
func weightedOrder(groups []*group) []int {
	total := 0
	for _, g := range groups {
		total += len(g.workers)
	}
	cur := make([]int, len(groups))
	order := make([]int, 0, total)
	for range total {
		best := 0
		for i, g := range groups {
			cur[i] += len(g.workers)
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		order = append(order, best)
	}
	return order
}

// Workers returns the number of workers.
func (p *Pool) Workers() int { return len(p.workers) }

// Nodes returns the OS IDs of the nodes that have worker groups (-1 for
// allowed CPUs on no node), in group order.
func (p *Pool) Nodes() []int { return p.nodes() }

func (p *sched) nodes() []int {
	out := make([]int, len(p.groups))
	for i, g := range p.groups {
		out[i] = g.node.ID
	}
	return out
}

// Submit queues fn to run on some worker, and returns ErrClosed once
// intake has closed. ctx is the work's context: with WithShardBound,
// Submit waits while the node's queue is full, until ctx is done (it then
// returns ctx.Err()); a nil ctx is context.Background.
//
// From outside the pool the node is chosen round robin, weighted by the
// number of workers of each node, so that a stream of submissions spreads
// over the machine, and tasks submitted to one node start roughly in the
// order of the calls (each node's shard is a FIFO, from which workers
// take batches). From one of the pool's tasks, fn goes to the calling
// worker's LIFO slot, as Worker.Spawn, where the node's idle workers
// steal it first: the bound does not apply (only the workers make room,
// and the caller is one), and a task still running when intake closes
// may still submit, since Close waits for what it starts (until a
// Shutdown gives up, after which Submit returns ErrClosed everywhere).
func (p *Pool) Submit(ctx context.Context, fn func(*Worker)) error {
	return p.submit(ctx, nil, fn, noHome, true)
}

// TrySubmit is Submit that returns ErrFull instead of waiting for room.
func (p *Pool) TrySubmit(fn func(*Worker)) error {
	return p.submit(context.Background(), nil, fn, noHome, false)
}

func (p *sched) groupOf(node int) (*group, error) {
	for _, g := range p.groups {
		if g.node.ID == node {
			return g, nil
		}
	}
	return nil, fmt.Errorf("%w: %d (the pool's nodes: %v)", ErrUnknownNode, node, p.nodes())
}

// nextGroup picks the node for work for the whole pool from outside it:
// round robin, weighted by the nodes' workers, so that a stream of
// submissions spreads over the machine; but when every worker of that
// node sleeps while another node has a searcher and nothing queued, that
// node, whose searcher takes the work within a microsecond or so where a
// sleeper's thread would take a wake-up (tens of microseconds). A burst
// still spreads: once a task waits in the searcher's shard, the next
// submissions go round robin again, and wake the sleeping nodes.
func (p *sched) nextGroup() *group {
	if len(p.order) == 1 {
		return p.groups[0]
	}
	g := p.groups[p.order[p.rr.Add(1)%uint64(len(p.order))]]
	if int(g.sleeping.Load()) < len(g.workers) || p.idle.searching.Load() == 0 {
		return g
	}
	for _, o := range p.groups {
		if o.searching.Load() > 0 && o.inject.IsEmpty() {
			return o
		}
	}
	return g
}

// submit queues fn for group g (nil: any node) with the given home,
// from outside the pool or from one of its tasks (see Pool.Submit).
func (p *sched) submit(ctx context.Context, g *group, fn func(*Worker), home int32, wait bool) error {
	if fn == nil {
		panic("pool: Submit of a nil function")
	}
	if w := p.workerOf(); w != nil {
		if p.aborted() {
			return ErrClosed // Shutdown gave up: nothing new runs
		}
		w.queueFrom(g, w.newTask(fn, home))
		return nil
	}
	ctx = orBackground(ctx)
	if p.state.Load() != running {
		return ErrClosed // a fast path: the shard's Push decides
	}
	if g == nil {
		g = p.nextGroup()
	}
	return p.push(ctx, g, item{fn: fn, home: home}, wait)
}

// push queues it, accepted from outside the pool or from a task, in g's
// shard: it takes a place under the bound first (waiting for one if
// wait), and fails with ErrClosed once intake has closed. A waiting push
// from one of the pool's own tasks takes no place: only the workers make
// room, and a worker waiting for room would wait for itself. A task that
// holds a place is queued as its record, which carries the place.
func (p *sched) push(ctx context.Context, g *group, it item, wait bool) error {
	if g.places != nil && !(wait && p.workerOf() != nil) {
		select {
		case g.places <- struct{}{}:
		default:
			if !wait {
				return ErrFull
			}
			select {
			case g.places <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			case <-p.intake:
				return ErrClosed
			}
		}
		if it.t == nil {
			it.t = &task{job: fnJob(it.fn), home: it.home, plain: true}
			it.fn = nil
		}
		it.t.placeIn = g
	}
	if err := g.shardOf(it.home).Push(it); err != nil {
		if it.t != nil {
			it.t.release()
		}
		return ErrClosed
	}
	if it.home >= 0 {
		p.idle.notifyOwn(g.index)
	} else {
		p.idle.notify(g.index) // soft too: if g lags, another node helps
	}
	return nil
}

// shardOf is the shard of g for a task with that home: pinned if it
// must stay.
func (g *group) shardOf(home int32) *queue.InjectShard[item] {
	if home >= 0 {
		return g.pinned
	}
	return g.inject
}

// queued is the number of tasks in g's shards.
func (g *group) queued() int { return g.inject.Len() + g.pinned.Len() }

// orBackground is ctx, or context.Background for a nil ctx, which every
// method that takes a context accepts (as Group always did): a nil ctx
// read by a worker would otherwise end the process.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
