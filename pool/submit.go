package pool

import (
	"context"
	"fmt"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/queue"
)

// Submission: how work enters the pool's queues. Every submission, a
// Group's functions and a loop's node blocks enter one way (enqueue),
// which sees where the call comes from: from outside, to a node's shard
// (push), under the bound if there is one; from a task, through spawn
// (into its own worker's queues) or spawnTo (into a domain's shard),
// past the bound. A task that must run in another domain goes there
// through sendHome. Each counts the task and wakes a worker for it when
// nobody searches (idle.notify), so no path forgets either.

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
	mustPool(p, "Submit")
	return p.submit(ctx, nil, fn, noHome, waitRoom)
}

// TrySubmit is Submit that returns ErrFull instead of waiting for room.
func (p *Pool) TrySubmit(fn func(*Worker)) error {
	mustPool(p, "TrySubmit")
	return p.submit(context.Background(), nil, fn, noHome, tryRoom)
}

// Node is one NUMA node of a pool as a place to send work: p.Node(id).
// It has the pool's submission methods, and is a Target for Async and
// Run.
//
// The preference is soft by default: the task is queued in the node's
// shard and runs on the node's workers; another node's idle workers take
// it only when the node lags: none of its workers has made progress for
// 10ms, or it has more queued than its workers run in 20ms (soft.go).
// Strict() keeps it on the node: it waits in the node's pinned shard,
// which other nodes' workers do not read.
//
// A Node for an ID the pool has no domain for returns an error
// wrapping ErrUnknownNode, which names the pool's nodes, from every
// method that sends work.
// A Node is a small value; make one per call or keep it.
type Node struct {
	p      *Pool   // held, so that a kept Node keeps its pool open
	d      *domain // nil for an unknown node
	id     int     // the OS ID it was made for
	strict bool
	err    error
}

// Node returns the node with the given OS ID. Worker has no Node method
// (Worker.Node is the worker's own node ID): from inside a task use
// w.Pool().Node(id).
func (p *Pool) Node(id int) Node {
	mustPool(p, "Node")
	d, err := p.domainOf(id)
	return Node{p: p, d: d, id: id, err: err}
}

// Strict returns the node with the preference made hard: work sent to it
// runs only on its workers. It holds for the task sent, not for what that
// task starts: a Spawn or Group.Go it makes may be stolen by another
// node's idle workers like any other (a loop's pieces stay on their
// nodes unless WithCrossNodeLoops).
func (n Node) Strict() Node {
	n.strict = true
	return n
}

// ID returns the OS ID the node was made for (-1 for the domain of CPUs
// on no node), also for a node the pool does not have.
func (n Node) ID() int { return n.id }

// Submit queues fn on the node, as Pool.Submit does on the pool: with
// WithShardBound it waits while the node's queue is full, until ctx is
// done, and it returns ErrClosed once intake has closed. From one of the
// pool's tasks fn goes to the node's shard past the bound.
func (n Node) Submit(ctx context.Context, fn func(*Worker)) error {
	mustNode(n, "Node.Submit")
	return n.submit(ctx, fn, waitRoom)
}

// TrySubmit is Submit that returns ErrFull instead of waiting for room.
func (n Node) TrySubmit(fn func(*Worker)) error {
	mustNode(n, "Node.TrySubmit")
	return n.submit(context.Background(), fn, tryRoom)
}

func (n Node) submit(ctx context.Context, fn func(*Worker), r room) error {
	if fn == nil {
		panic("pool: Node.Submit of a nil function")
	}
	if n.err != nil {
		return n.err
	}
	return n.p.submit(ctx, n.d, fn, n.taskHome(), r)
}

// home is the task's home for the node: its domain if strict, else a
// preference for it when the pool has other nodes.
func (n Node) taskHome() home {
	if n.strict {
		return strictHome(n.d.index)
	}
	if len(n.p.domains) > 1 {
		return preferHome(n.d.index)
	}
	return noHome
}

func (p *sched) domainOf(node int) (*domain, error) {
	for _, d := range p.domains {
		if d.node.ID == node {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%w: %d (the pool's nodes: %v)", ErrUnknownNode, node, p.nodes())
}

// nextDomain picks the node for work for the whole pool from outside it.
// The work goes where a worker is awake to take it, else where waking one
// costs least, and a stream of submissions still spreads over the
// machine:
//
//   - round robin, weighted by the nodes' workers, picks a node; a node
//     with a worker awake takes the work (a burst spreads this way);
//   - if every worker of that node sleeps and another node has a searcher
//     and nothing queued, that node takes it: its searcher takes it
//     within a microsecond or so, where waking a sleeper's thread takes
//     tens of microseconds (and once a task waits in the searcher's shard,
//     the next submissions go round robin again and wake the sleeping
//     nodes);
//   - if nobody searches, a sleeper must be woken: one of the node of the
//     CPU the caller runs on (callerDomain). The caller is about to wait
//     for the result or to go on with what it was doing on that node, and
//     a woken worker bound to its node's CPUs can take the CPU the caller
//     leaves, at once, where one bound to another node's CPUs waits for
//     an idle CPU to wake up or for a busy one's thread to yield it; the
//     work's data, just written by the caller, is in that node's caches.
func (p *sched) nextDomain() *domain {
	if len(p.domains) == 1 {
		return p.domains[0]
	}
	d := p.domains[p.order[p.rr.Add(1)%uint64(len(p.order))]]
	if int(d.sleeping.Load()) < len(d.workers) {
		return d
	}
	if p.idle.searching.Load() == 0 {
		if h := p.callerDomain(); h != nil {
			return h
		}
		return d
	}
	for _, o := range p.domains {
		if o.searching.Load() > 0 && o.inject.IsEmpty() {
			return o
		}
	}
	return d
}

// callerDomain returns a domain with a sleeper whose CPUs hold the one
// the calling thread runs on, nil if none or where the CPU cannot be read.
// Where several do (synthetic nodes may share OS CPUs), the one whose
// worker parked last: its thread is the likeliest to wake where the
// caller runs. It reads the caller's CPU (pin.CurrentCPU), only on the way
// to a wake-up.
func (p *sched) callerDomain() *domain {
	cpu, _, err := pin.CurrentCPU()
	if err != nil || cpu < 0 || cpu >= len(p.cpuDomains) {
		return nil
	}
	var first *domain
	last := int(p.idle.lastParked.Load())
	for _, d := range p.cpuDomains[cpu] {
		if o := p.domains[d]; o.sleeping.Load() > 0 {
			if d == last {
				return o
			}
			if first == nil {
				first = o
			}
		}
	}
	return first
}

// submit queues fn for domain d (nil: any node) with the given home,
// from outside the pool or from one of its tasks (see Pool.Submit).
func (p *sched) submit(ctx context.Context, d *domain, fn func(*Worker), home home, r room) error {
	if fn == nil {
		panic("pool: Submit of a nil function")
	}
	w := p.workerOf()
	if w != nil && p.aborted() {
		return ErrClosed // Shutdown gave up: nothing new runs
	}
	it := item{fn: fn, home: home}
	if s := p.labelsOf(ctx); s != nil { // nil: from a task, the calling task's, as Spawn (inherit)
		if w != nil {
			it = w.newTask(fn, home).item()
		} else {
			it = it.recorded()
		}
		it.t.labels = s
	}
	return p.enqueue(ctx, w, d, it, inLIFO, r)
}

// room is what work queued from outside does about its node's bound
// (WithShardBound).
type room int

const (
	waitRoom room = iota // wait for a place (Submit, Run, a Group's Go)
	tryRoom              // ErrFull at once without one (TrySubmit)
	noRoom               // take none: a loop's node blocks, which the caller waits for anyway
)

// enqueue is the one way work enters the pool: item it, for domain d
// (nil: none asked for), from w, the worker whose task calls (nil: from
// outside the pool).
//
// From a task, the work goes to w itself when d is nil (at says where:
// its LIFO slot, as Spawn, or the back of its queue), else to d's shard;
// the bound does not apply, since only the pool's workers make room and w
// is one of them, and a task still running when intake closes may still
// queue work, since Close waits for what it starts.
//
// From outside, it goes to d's shard for its home (d nil: nextDomain
// picks), taking a place under the bound as r says, and wakes a worker
// for it; once intake has closed it is refused with ErrClosed.
func (p *sched) enqueue(ctx context.Context, w *Worker, d *domain, it item, at where, r room) error {
	if w != nil {
		w.enqueue(d, it, at)
		return nil
	}
	return p.push(ctx, d, it, r)
}

// enqueue is the pool's enqueue from the task running on w.
func (w *Worker) enqueue(d *domain, it item, at where) {
	t := it.t
	if t == nil {
		t = w.newTask(it.fn, it.home)
	}
	if d == nil {
		w.spawn(t, at)
	} else {
		w.spawnTo(d, t)
	}
}

// push is the pool's enqueue from outside: it queues it in d's shard (d
// nil: nextDomain picks) after taking a place under the bound as r says,
// and fails with ErrClosed once intake has closed. A task that holds a
// place is queued as its record, which carries the place, and so is one
// sampled for the histograms, which carries its submit time.
func (p *sched) push(ctx context.Context, d *domain, it item, r room) error {
	if p.state.Load() != running {
		return ErrClosed // a fast path: the shard's Push decides
	}
	if d == nil {
		d = p.nextDomain()
	}
	if d.places != nil && r != noRoom {
		select {
		case d.places <- struct{}{}:
		default:
			if r == tryRoom {
				return ErrFull
			}
			ctx = orBackground(ctx)
			select {
			case d.places <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			case <-p.intake:
				return ErrClosed
			}
		}
		it = it.recorded()
		it.t.placeIn = d
	}
	if err := d.shardOf(it.home).Push(it); err != nil {
		if it.t != nil {
			it.t.release()
		}
		return ErrClosed
	}
	if it.home.strict() {
		p.idle.notifyOwn(d.index)
	} else {
		p.idle.notify(d.index) // soft too: if d lags, another node helps
	}
	return nil
}

// shardOf is the shard of d for a task with that home: pinned if it
// must stay.
func (d *domain) shardOf(h home) *queue.InjectShard[item] {
	if h.strict() {
		return d.pinned
	}
	return d.inject
}

// inShards is the number of tasks in d's shards.
func (d *domain) inShards() int { return d.inject.Len() + d.pinned.Len() }

// queue: from one of the pool's tasks, the calling worker's LIFO slot
// (as Spawn: run next unless an idle worker takes it); from outside, a
// node's shard as Submit, waiting for room under WithShardBound.
func (p *Pool) queue(t *task) error {
	return p.enqueue(context.Background(), p.workerOf(), nil, t.item(), inLIFO, waitRoom)
}

func (p *Pool) poolOf() *Pool { return p }

// queue: the node's shard (pinned if strict). From one of the pool's
// tasks the bound does not apply, as for every task queued from inside:
// only the pool's own workers could make room, and the caller is one.
func (n Node) queue(t *task) error {
	if n.err != nil {
		return n.err
	}
	t.home = n.taskHome()
	return n.p.enqueue(context.Background(), n.p.workerOf(), n.d, t.item(), inLIFO, waitRoom)
}

func (n Node) poolOf() *Pool { return n.p }

func (w *Worker) queue(t *task) error {
	w.owner.check("Spawn")
	w.spawn(t, inLIFO)
	return nil
}

func (w *Worker) poolOf() *Pool { return w.Pool() }

// Spawn queues fn on this worker: it goes to the worker's LIFO slot and
// runs next, unless another idle worker steals it; the slot's previous
// task moves to the back of the worker's queue, where idle workers of the
// node steal from. Call it only from a task running on w.
func (w *Worker) Spawn(fn func(*Worker)) {
	mustWorker(w, "Spawn")
	if fn == nil {
		panic("pool: Spawn of a nil function")
	}
	w.owner.check("Spawn")
	w.spawn(w.newTask(fn, noHome), inLIFO)
}

// where is the place in the worker's own queues that spawn puts a task.
type where int

const (
	// inLIFO: the LIFO slot, to run next on this worker unless an idle
	// worker takes it first; the slot's previous task moves to the back
	// of the queue (Spawn, Async and Run from a task).
	inLIFO where = iota
	// atBack: the back of the queue, which thieves take from first, for
	// work the worker does not mean to run next (Group.Go, the upper
	// half of a loop piece).
	atBack
)

// spawn queues t, made by the task running on w, in w's own queues.
func (w *Worker) spawn(t *task, at where) {
	w.inherit(t)
	w.sample(t)
	if at == inLIFO {
		t = w.lifo.Swap(t) // the previous task, if any, goes to the back
	}
	if t != nil {
		w.push(t)
	}
	w.spawned(w.domain)
}

// spawnTo queues t, made by the task running on w, in domain d's shard:
// pinned if t must stay in d. The shard's bound does not apply: only the
// pool's own workers make room, and w is one of them.
func (w *Worker) spawnTo(d *domain, t *task) {
	w.inherit(t)
	w.sample(t)
	w.c.Spawned++
	w.queueIn(d, t)
}

// spawned counts a task w made for domain d's workers and wakes one of
// them if nobody searches.
func (w *Worker) spawned(d *domain) {
	w.c.Spawned++
	w.pool.idle.notify(d.index)
}

// sendHome queues t, which must or should run in domain d, in d's shard
// and wakes a worker of d: a strict task that w got, or a soft one whose
// node keeps up (remade false), or the rest of a loop piece that w took
// while d is still busy with it, remade as a new task (counted as spawned
// too, since the piece w took completes here).
func (w *Worker) sendHome(d *domain, t *task, remade bool) {
	if remade {
		w.c.Spawned++
	}
	w.c.SentHome++
	w.sentHome(remade)
	w.queueIn(d, t)
}

// queueIn queues t, from the task running on w, in d's shard for its home
// and wakes a worker for it: only one of d's own if t must run in d
// (strict) or should (soft, sent home because d keeps up).
func (w *Worker) queueIn(d *domain, t *task) {
	h := t.home // itemOf may give t back for reuse
	d.shardOf(h).Requeue(w.itemOf(t))
	if h != noHome {
		w.pool.idle.notifyOwn(d.index)
	} else {
		w.pool.idle.notify(d.index)
	}
}

// SpawnWith queues fn(w, x) as a task of w's, as w.Spawn(func(w
// *pool.Worker) { fn(w, x) }) would, but without the closure: with fn a
// function value made before (a top-level function, or a closure made
// once, not per call), it allocates nothing once the worker has run
// tasks of the same argument type, whose records it reuses. A
// closure per task costs an allocation, and a recursion that spawns a
// million tasks then spends much of its time in the garbage collector,
// whose phases also take processors from the pool's workers. A panic in
// fn goes to the pool's panic handler, as Spawn's does. Call it only from
// a task running on w.
func SpawnWith[X any](w *Worker, fn func(*Worker, X), x X) {
	mustWorker(w, "SpawnWith")
	if fn == nil {
		panic("pool: SpawnWith of a nil function")
	}
	w.owner.check("SpawnWith")
	t, ok := recordOf[*argTask[X]](&w.recs.args)
	if !ok {
		t = &argTask[X]{task: task{home: noHome}}
		t.job = t
	}
	t.fn, t.x = fn, x
	w.spawn(&t.task, inLIFO)
}

// argTask is a task of SpawnWith: fn and its argument in a record of its
// own, which the worker that runs it keeps for its next SpawnWith of the
// same type.
type argTask[X any] struct {
	task
	fn func(*Worker, X)
	x  X
}

// run takes fn and x out of the record and gives it back to w's list
// before calling fn: no queue or slot refers to a task that is running,
// and fn's own spawns of the same type then reuse it at once. Worker.run
// reads only the record's plain flag afterwards, which is never written
// after the record is made.
func (t *argTask[X]) run(w *Worker) {
	fn, x := t.fn, t.x
	var zero X
	t.fn, t.x = nil, zero
	w.recs.args.keep(t)
	w.call(func(w *Worker) { fn(w, x) })
}

func (t *argTask[X]) drop(error) {}
