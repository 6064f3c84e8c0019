package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/numapool/numapool/pool/internal/goruntime"
	"github.com/numapool/numapool/pool/internal/observe"
	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/pool/internal/settings"
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
	// ErrUnknownNode: a node ID the pool has no domain for
	// (Pool.Node's methods, Async and Run on such a Node), or that is none of the memory nodes this process may
	// allocate from (AllocOnNode); the error names the node and the nodes
	// there are.
	ErrUnknownNode = place.ErrUnknownNode
	// ErrTooManyWorkers: New was asked for more workers locked to threads
	// than the process may start threads for (the Go runtime's
	// debug.SetMaxThreads, a cgroup's pids.max, RLIMIT_NPROC); the error
	// names the count, the room and the limit.
	ErrTooManyWorkers = place.ErrTooManyWorkers
	// ErrInsideTask: Close or Shutdown was called from one of the pool's
	// own tasks, which cannot wait for the pool to drain (it would wait
	// for itself). Intake is closed and the pool drains on its own; call
	// Close from outside to wait for it.
	ErrInsideTask = errors.New("pool: Close from inside one of the pool's tasks cannot wait for the pool (it would wait for itself): intake is closed; call Close from outside to wait")
)

// domain is the pool's part on one NUMA node (OpenMP's numa_domains): the
// node's workers, its inject and pinned shards, and their counts. Code
// calls its position in sched.domains the domain index (d.index), and the
// kernel's number of the node the node ID (d.node.ID); Explain, Stats and
// the API speak only of node IDs.
type domain struct {
	index   int                      // position in Pool.domains
	node    topology.Node            // the node, with its allowed CPUs
	inject  *queue.InjectShard[item] // work for the node that other nodes may take
	pinned  *queue.InjectShard[item] // work that must run on the node
	workers []*Worker
	dist    []int // distance to each domain, by index
	// size is how many of workers are not retired (resize.go), and
	// capacity the sum of their CPU capacities (kinds.go): a loop's share
	// of the domain. Both change under idle.mu.
	size     atomic.Int32
	capacity atomic.Uint64

	// places holds one token per task queued in inject or pinned under the bound;
	// nil when unbounded.
	places chan struct{}
	// crossSearching is set while one of the domain's workers searches
	// other nodes: at most one does at a time.
	crossSearching atomic.Bool
	searching      atomic.Int32 // the domain's workers searching
	sleeping       atomic.Int32 // the domain's workers parked
	_              [64]byte     // off the line notify reads on every spawn
	// busyAt is when a worker of the domain last showed it keeps up: it
	// ran a stretch of tasks, or woke for work (soft.go).
	busyAt    atomic.Int64 // sched.clock
	taskNanos atomic.Int64 // a worker's mean task time, as last tuned
	spares    atomic.Int32 // the domain's live spare threads (spare.go)
}

// standInsOf is domain d's side of the watch.
func (p *sched) standInsOf(d *domain) *nodeStandIns { return &p.standIns[d.index] }

// nodeStandIns is a domain's side of the watch, apart from the domain so
// that its hot fields keep their cache lines: reserve is how many of its
// workers may stand in beyond Resize's share (set under resizeMu), now how
// many do, and the counts for Stats.
type nodeStandIns struct {
	reserve atomic.Int32
	now     atomic.Int32
	started atomic.Uint64
	refused atomic.Uint64
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
	self     weak.Pointer[Pool] // the user's Pool, while it is reachable
	cfg      config
	topo     *topology.Topology
	domains  []*domain
	workers  []*Worker
	layout   *steal.Layout
	idle     idle
	runnable goruntime.Gauge // whether goroutines wait for a processor (internal/goruntime)
	stash    stash           // task records to reuse (task.go)
	labels   observe.Cache   // the label sets of tasks (labels.go)
	byG      owners          // the workers by their goroutine (owner.go)
	// The callers from outside on workers' seats (join.go), for workerOf.
	callers   [maxCallers]atomic.Pointer[Worker]
	nCallers  atomic.Int32
	callersHi atomic.Int32 // callers[callersHi:] were never used
	// threadsLeft is how many more threads the process could start at New
	// beyond the workers' (place.Plan.ThreadsLeft): the pool's live
	// spares never outnumber it (spare.go). spares counts them.
	threadsLeft int64
	spares      atomic.Int64
	resizeMu    sync.Mutex // one Resize, or one change of stand-ins, at a time (resize.go)
	stuck       stuckWatch // whether a node's workers are all blocked with work queued (stuck.go)
	// blockedCallers holds the goroutines of callers in Worker.Block
	// (spare.go), which hold no seat meanwhile, for inTaskNow.
	blockedCallers sync.Map
	order          []int   // Submit's round robin over domains, weighted by size
	cpuDomains     [][]int // per OS CPU, the domains whose CPUs hold it (callerDomain)
	// onlyDomain: one domain, whose CPUs held every CPU the process had at
	// New, so a caller runs on one of them without asking (joinDomain).
	onlyDomain bool
	rr         atomic.Uint64
	degraded   []string // what of the plan did not hold; under degradedMu once started
	notes      []string // what a setting chose (the CPU kind), for Explain
	degradedMu sync.Mutex
	started    time.Time     // the pool's clock starts (clock)
	placer     *place.Placer // where the workers' threads run, and the machine as the monitor last saw it

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
	sweep     sweep        // a Shutdown's drop of the queues while tasks still run
	claim     *place.Claim // the CPUs the workers are placed on, given back when the last one ends

	// base is each domain's share of the running workers, as New started
	// them or the last Resize set it; standIns, each domain's reserve and
	// stand-ins (standin.go). Both change under resizeMu (resize.go).
	base     []int
	standIns []nodeStandIns
	blocked  blockWatch // the watch that starts stand-ins (standin.go)
}

// New starts a pool. Without options it discovers this machine, makes one
// domain per NUMA node that has CPUs this process may use, starts
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
	rd, held := place.FirstReading(cfg.machine) // held: the monitor runs, and stays until the last worker ends
	pl, err := place.NewPlan(cfg.planRequest(rd.PC.Usable(), !held))
	if err != nil {
		if held {
			place.ReleaseMonitor()
		}
		return nil, err
	}
	p := &sched{cfg: cfg, topo: pl.Topo, degraded: pl.Degraded, notes: pl.Notes, claim: pl.Claim, started: time.Now(), threadsLeft: int64(min(pl.ThreadsLeft, math.MaxInt32)),
		intake: make(chan struct{}), done: make(chan struct{})}
	p.placer = place.NewPlacer(pl, rd, place.Options{Binding: cfg.binding, Awake: p.awake, Share: p.runningByShare, Watch: cfg.watch, Source: cfg.machine, Started: p.started})
	var nodeWorkers [][]int
	for gi, gp := range pl.Nodes {
		d := &domain{index: gi, node: gp.Node, inject: queue.NewInjectShard[item](), pinned: queue.NewInjectShard[item](), dist: gp.Dist}
		d.inject.SampleEvery(sampleEvery, p.stamped)
		d.pinned.SampleEvery(sampleEvery, p.stamped)
		if cfg.shardBound > 0 {
			d.places = make(chan struct{}, cfg.shardBound)
		}
		var ids []int
		for _, cpu := range gp.CPUs {
			w := newWorker(p, d, len(p.workers), cpu, p.placer.Thread(len(p.workers)))
			w.capacity = place.Capacity(pl.Topo, cpu)
			d.workers = append(d.workers, w)
			d.size.Add(1)
			d.capacity.Add(w.capacity)
			ids = append(ids, w.id)
			p.workers = append(p.workers, w)
		}
		nodeWorkers = append(nodeWorkers, ids)
		p.domains = append(p.domains, d)
	}
	p.layout, err = steal.NewLayout(nodeWorkers, func(a, b int) int { return p.domains[a].dist[b] })
	if err != nil {
		// nodeWorkers lists each worker once, by the index it was made
		// with: a refusal is a bug here, not the caller's error.
		panic("pool: the domains' workers do not make a layout: " + err.Error())
	}
	p.order = weightedOrder(p.domains)
	p.cpuDomains = cpuDomains(pl.Topo, p.domains)
	p.onlyDomain = len(p.domains) == 1 && holdsAll(p.cpuDomains, rd.PC.Usable())
	p.idle.init(p)

	// Start the workers; each reports whether its placement held.
	pool := &Pool{p}
	p.self = weak.Make(pool) // before the workers start: they read it (hold)
	starting := p.startingWorkers(pl.Start)
	p.initBlockWatch()
	errs := make(chan error, len(starting))
	p.live.Store(int32(len(starting)))
	p.placer.OnLook = p.look
	p.placer.Watch(held) // before the workers start: the last to end lets go of the monitor
	for _, w := range starting {
		w.alive.Add(1)
		go w.main(errs)
	}
	var failed []error
	for range starting {
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
	p.startBlockWatch()
	settings.WarnOnce(stderr, cfg.envWarnings)
	if cfg.display {
		p.placer.Display(stderr)
	}
	// Dropped without Close: close intake; the workers run what is queued
	// and end. s does not refer to pool, so pool can be collected.
	runtime.AddCleanup(pool, func(s *sched) { s.beginClose() }, p)
	return pool, nil
}

// startingWorkers returns the workers New starts: all, or where the plan
// placed more than start (WithMaxWorkers), start of them spread over the
// nodes as Resize spreads them, at least one per node; the others begin
// retired (resize.go).
func (p *sched) startingWorkers(start int) []*Worker {
	if start >= len(p.workers) {
		p.setBase(shares(len(p.workers), p.domains))
		return p.workers
	}
	var out []*Worker
	p.setBase(shares(max(start, len(p.domains)), p.domains))
	for i, n := range p.base {
		for k, w := range p.domains[i].workers {
			if k < n {
				out = append(out, w)
				continue
			}
			w.retire.Store(true)
			w.owner.ended.Store(true) // no goroutine: one Resize starts takes it on (Worker.main)
			p.idle.retireAtStart(w)
		}
	}
	return out
}

// look is what the pool does at each of the machine monitor's looks:
// take GOMAXPROCS as read for the search limit (idle.go), and the stuck
// watch (stuck.go).
func (p *sched) look(now time.Time) {
	if m := p.placer.Machine(); m != nil {
		p.idle.procs.Store(int32(m.Read.Procs))
	}
	p.lookStuck(now)
}

// setBase makes base each domain's share of the running workers (Resize,
// resize.go), and the rest of its workers its reserve for stand-ins
// (standin.go), whose count it keeps within that reserve. p.resizeMu and
// idle.mu must be held, or the pool not yet started.
func (p *sched) setBase(base []int) {
	p.base = base
	if p.standIns == nil {
		p.standIns = make([]nodeStandIns, len(p.domains))
	}
	for i, d := range p.domains {
		reserve := len(d.workers) - base[i]
		p.standInsOf(d).reserve.Store(int32(reserve))
		if int(p.standInsOf(d).now.Load()) > reserve {
			p.standInsOf(d).now.Store(int32(reserve))
		}
	}
	p.idle.kick() // the block watch rests while no node has a worker in reserve
}

// hasReserve reports whether a node has a worker in reserve.
func (p *sched) hasReserve() bool {
	for _, d := range p.domains {
		if p.standInsOf(d).reserve.Load() > 0 {
			return true
		}
	}
	return false
}

// runningByShare is how many workers run by Resize's shares: those not
// retired, less those standing in for blocked ones (standin.go), which
// take the CPUs the blocked ones leave.
func (p *sched) runningByShare() int {
	n := int(p.idle.n.Load())
	if p.standIns != nil {
		for _, d := range p.domains {
			n -= int(p.standInsOf(d).now.Load())
		}
	}
	return n
}

// awake reports whether worker id is awake: on a CPU, not parked.
func (p *sched) awake(id int) bool { return p.workers[id].handle.Load() != nil }

// cpuDomains maps each OS CPU of the domains to the domains whose CPUs
// hold it: one, except where synthetic nodes share OS CPUs.
func cpuDomains(t *topology.Topology, domains []*domain) [][]int {
	var by [][]int
	for _, d := range domains {
		for _, c := range d.node.CPUs.List() {
			os := place.OSCPU(t, c)
			if os < 0 {
				continue
			}
			for len(by) <= os {
				by = append(by, nil)
			}
			if !slices.Contains(by[os], d.index) {
				by[os] = append(by[os], d.index)
			}
		}
	}
	return by
}

// holdsAll reports whether every OS CPU of cpus is some domain's.
func holdsAll(byCPU [][]int, cpus topology.CPUSet) bool {
	for _, c := range cpus.List() {
		if c >= len(byCPU) || len(byCPU[c]) == 0 {
			return false
		}
	}
	return !cpus.IsEmpty()
}

// weightedOrder lists domain indexes so that each appears as often as it
// has workers, spread out (smooth weighted round robin).
func weightedOrder(domains []*domain) []int {
	total := 0
	for _, d := range domains {
		total += len(d.workers)
	}
	cur := make([]int, len(domains))
	order := make([]int, 0, total)
	for range total {
		best := 0
		for i, d := range domains {
			cur[i] += len(d.workers)
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		order = append(order, best)
	}
	return order
}

// shares apportions n workers over the domains in proportion to their
// workers: at least one each, at most all of a domain's, the remainders
// to the largest fractions (ties to the first domain). n is at least
// len(domains) and at most their workers.
func shares(n int, domains []*domain) []int {
	total := 0
	for _, d := range domains {
		total += len(d.workers)
	}
	out := make([]int, len(domains))
	frac := make([]int, len(domains))
	given := 0
	for i, d := range domains {
		out[i] = max(1, n*len(d.workers)/total)
		frac[i] = n * len(d.workers) % total
		given += out[i]
	}
	for given < n { // the largest remainders first
		best := -1
		for i, d := range domains {
			if out[i] < len(d.workers) && (best < 0 || frac[i] > frac[best]) {
				best = i
			}
		}
		out[best]++
		frac[best] = -1
		given++
	}
	for given > n { // the minimum of one gave too many: take from the largest
		best := 0
		for i := range domains {
			if out[i] > out[best] {
				best = i
			}
		}
		out[best]--
		given--
	}
	return out
}

// Workers returns the number of workers New placed: worker IDs run from
// 0 to Workers()-1. Size says how many of them run (Resize,
// WithMaxWorkers).
func (p *Pool) Workers() int {
	mustPool(p, "Workers")
	return len(p.workers)
}

// Nodes returns the OS IDs of the nodes that have domains (-1 for
// allowed CPUs on no node), in domain order.
func (p *Pool) Nodes() []int {
	mustPool(p, "Nodes")
	return p.nodes()
}

func (p *sched) nodes() []int {
	out := make([]int, len(p.domains))
	for i, d := range p.domains {
		out[i] = d.node.ID
	}
	return out
}

// orBackground is ctx, or context.Background for a nil ctx, which every
// method that takes a context accepts (as Group always did): a nil ctx
// read by a worker would otherwise end the process.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// clock is t as the pool's clock: nanoseconds since the pool started, on
// the monotonic clock.
func (p *sched) clock(t time.Time) int64 { return int64(t.Sub(p.started)) }
