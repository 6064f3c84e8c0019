package pool

import (
	"runtime/metrics"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/queue"
	"github.com/numapool/numapool/steal"
)

const (
	maxLIFORuns     = 3  // LIFO tasks in a row before the queue gets a turn
	initialInterval = 61 // fairness interval before tuning (Tokio, from Go)
	minInterval     = 2  // the tuned interval's bounds
	maxInterval     = 127
	targetLookEvery = 200 * time.Microsecond // of work between looks at the shard
	publishEvery    = 64                     // tasks between stats publications
)

// Worker is one worker: a goroutine locked to an OS thread bound to its
// CPUs (under pin.Goroutines, a goroutine locked to none), with its own
// run queue. A task receives the worker that runs it; the worker's
// methods may be called only from inside that task (the worker's own
// goroutine).
type Worker struct {
	// Set before the workers start and read by all of them.
	pool    *sched
	domain  *domain
	id      int
	cpu     int // the topology CPU the worker is placed on
	local   *queue.Local[item]
	stealer *queue.Stealer[item]
	wakeCh  chan struct{}
	th      *place.Thread // the worker's OS thread: where it is bound and why (internal/place)
	// capacity is the worker's CPU's capacity (kinds.go), in its
	// domain's while it is not retired.
	capacity uint64
	// alive counts the worker's goroutine until it ends for good (one at
	// a time: a goroutine that replaces one keeps the count); Resize waits
	// for a retired worker's before it starts another (resize.go).
	alive sync.WaitGroup

	// What other workers read and write: thieves, wakers, Stats. These
	// keep to lines of their own, away from the fields the owner alone
	// writes for every task (tick, sinceLook, the counters), which a
	// thief's every look at lifo or joinSlot would otherwise take from the
	// owner's cache.
	_ [cacheLine]byte
	// lifo holds the task spawned last; thieves may take it on their last
	// pass, so it is atomic.
	lifo atomic.Pointer[task]
	// joinSlot offers the b side of the outermost pending Join to thieves.
	joinSlot atomic.Pointer[task]
	// handle is the user's Pool while the worker is awake (hold), nil
	// while it is parked.
	handle  atomic.Pointer[Pool]
	leaving atomic.Bool // the worker has left its loop for good (Stats, Shutdown)
	// retire asks the worker to retire at its next task boundary
	// (resize.go); set and cleared under idle.mu.
	retire atomic.Bool
	// seat says who holds the worker's place in the scheduling while its
	// thread sleeps: the thread itself, or a caller from outside that
	// joined (join.go).
	seat seat
	// route is where a wake-up token goes while a caller holds the seat:
	// the caller's channel; nil, the worker's own (wakeCh).
	route atomic.Pointer[chan struct{}]
	// relay is the seat's threads while a task blocks (spare.go): its
	// holder, the threads in Block or waiting for the seat, its spares.
	relay relay
	pub   published // the counters for Stats, padded on both sides

	// Written by the owner only (owner's fields are atomic: others read
	// them to tell the worker's goroutine).
	lifoRuns int      // LIFO tasks run in a row
	c        Counters // published to pub
	owner    ownerID
	seek     seekState // finding the next task: the searching state, the random source, keep-offs
	fair     fairness  // when the next look starts at the node's shards
	recs     recycler  // task records to reuse
	obs      observing // labels and histograms
	out      caller    // a caller from outside on the worker's seat (join.go)
}

// seekState is a worker's state while it looks for its next task (owner
// only).
type seekState struct {
	searching bool // counted among the pool's searchers (idle.go)
	rng       steal.Rand
	items     []item // a buffer of items moving from a shard to the queue
	// pinnedFirst alternates which of the node's shards is read first.
	pinnedFirst bool
	fromWorker  bool              // the task being started was stolen from a worker
	keepOff     keepOff           // other domains this worker leaves alone for a while
	keepTimer   *time.Timer       // wakes the parked worker when a keep-off ends
	cross       crossSteal        // the last steal from another node, until its first task's fate counts it
	runnable    [1]metrics.Sample // for reading the pool's goruntime.Gauge
}

// fairness is a worker's fairness clock (owner only): every interval
// tasks the next look starts at the node's shards (lookShard); interval
// is tuned from the mean task time. The task clock is busy time since the
// last look, running only while the worker has tasks (started at the
// first task after an idle spell, stopped when it runs out).
type fairness struct {
	tick      uint32 // tasks run
	sinceLook uint32 // tasks run since the last look
	interval  uint32
	lookShard bool
	meanTask  float64 // EWMA of task duration, ns
	busy      time.Duration
	busySince time.Time
	clockOn   bool
}

func newWorker(p *sched, d *domain, id, cpu int, th *place.Thread) *Worker {
	l, s := queue.New[item]()
	interval := initialInterval
	if p.cfg.interval > 0 {
		interval = p.cfg.interval
	}
	w := &Worker{
		pool: p, domain: d, id: id, cpu: cpu, local: l, stealer: s, th: th,
		wakeCh: make(chan struct{}, 1),
		seek:   seekState{rng: steal.NewRand(uint64(id) + 1)},
		fair:   fairness{interval: uint32(interval)},
		recs:   recycler{forks: records{max: maxForkRecords}, args: records{max: maxArgTasks}},
	}
	w.seek.runnable[0].Name = "/sched/goroutines/runnable:goroutines"
	return w
}

// ID returns the worker's index in the pool (0..Workers()-1).
func (w *Worker) ID() int { return w.id }

// Node returns the OS ID of the worker's NUMA node (-1 for CPUs on no node).
func (w *Worker) Node() int { return w.domain.node.ID }

// CPU returns the CPU the worker is placed on (a synthetic CPU number in a
// synthetic topology).
func (w *Worker) CPU() int { return w.cpu }

// Pool returns the worker's pool.
func (w *Worker) Pool() *Pool {
	if p := w.handle.Load(); p != nil {
		return p
	}
	if p := w.pool.self.Value(); p != nil {
		return p
	}
	// The user's Pool was dropped (it is closing): nobody can compare
	// with it, so a new handle on the same pool serves.
	return &Pool{w.pool}
}

// hold keeps the user's Pool reachable while the worker is awake, so the
// cleanup that closes a dropped Pool cannot run while the pool is busy:
// only once every worker is parked and nothing else holds it.
func (w *Worker) hold() { w.handle.Store(w.pool.self.Value()) }

// main is the worker's goroutine: bind, loop, put the mask back, end.
// placed receives whether the placement held; nil for a goroutine that
// replaces one a task ended (replace).
//
// A goroutine that Resize starts for a retired worker (resize.go) is
// one New would have started, and finds the worker ended (owner.ended):
// it takes the worker back under its own goroutine.
func (w *Worker) main(placed chan<- error) {
	ended := false
	defer func() {
		if !ended {
			w.replace() // a task ended this goroutine with runtime.Goexit
		}
	}()
	w.owner.set()
	w.startLabels()
	err := w.th.Bind()
	if back := w.owner.ended.Load(); placed == nil || back {
		w.pool.byG.move(w, 0, w.owner.g.Load())
		if back {
			w.leaving.Store(false)
			w.relay.cur = nil // the retired goroutine's record: the new one's is made at its first Block
			w.relay.reopen()
			w.owner.ended.Store(false)
		}
	}
	if placed != nil {
		placed <- err
	}
	if placed != nil && w.pool.startsParked() {
		// Started by New registered as parked (idle.init): it sleeps
		// until the first work or Close wakes it.
		if w.sleepParked(time.Time{}) {
			w.loop()
		}
	} else {
		w.hold()
		w.loop()
	}
	ended = true
	w.endWait()
	w.end()
	w.alive.Done()
}

// loop is the worker's scheduler loop, until the pool ends: runUntil
// with a latch that is never set.
func (w *Worker) loop() { w.runUntil(nil) }

// runUntil is the scheduler loop: it runs tasks (next), searches for
// them, spins for the block time and parks, until l is set. The idle
// loop has no latch (nil) and returns when the pool ends; a task that
// waits for other work (latch.go) runs the same loop with the latch of
// what it waits for and returns only once that is done, whatever the
// pool's state: its task must go on, and what it waits for either runs
// somewhere or is dropped, which sets the latch too.
//
// Once a Shutdown gave up, the worker runs nothing more, not even the
// task it has just taken: the look at the pool's state comes between
// taking a task and running it, so that a task taken as the abort came
// is dropped and counted with the rest, rather than run after its
// siblings were dropped (a Group's task would then find its Group failed
// and skip its function, neither run nor dropped; one taken just before
// the abort, whose sibling is dropped before it starts, still does, and
// counts itself as dropped: groupTask.run). An idle worker drops
// its own queue and ends; a waiter drops what is queued anywhere
// (dropQueued), since the owners of those queues may themselves be
// waiting for it, and sleeps until its latch is set.
func (w *Worker) runUntil(l *latch) {
	p := w.pool
	own := w.obs.labels // the labels of the task that waits (labels.go); nil in the idle loop
	for !l.probe() {
		if w.relay.want.Load() != 0 && w.yield(l) {
			return // a spare handed the seat on (spare.go): the seat is not its to touch
		}
		if l == nil && w.retire.Load() && w.retireAwake() {
			return // retired (resize.go): the goroutine ends
		}
		it := w.next()
		if it.none() {
			w.stopClock()
			w.runUnder(own)
			it = w.search()
		}
		if it.none() && (w.seek.searching || l != nil) {
			it = w.spin(l)
		}
		if p.aborted() {
			if !it.none() {
				w.seek.fromWorker = false
				p.dropItem(it, true)
			}
			w.endSearch()
			w.stopClock()
			if l == nil {
				w.leaving.Store(true) // before its queue is dropped: Stats counts it out
				w.dropLocal(true)
				return
			}
			w.dropQueued()
			w.park(l)
			continue
		}
		if !it.none() {
			w.run(it)
			continue
		}
		if !w.park(l) {
			return
		}
	}
	w.endSearch()
	w.runUnder(own)
}

// next returns the next local task: every interval tasks one from the
// node's shards first (fairness), else the LIFO slot (at most
// maxLIFORuns in a row), after odd tasks a pinned task, the local queue,
// then the node's shards in turn (a pinned task, or a batch from the
// inject shard).
func (w *Worker) next() item {
	if w.fair.lookShard {
		w.fair.lookShard = false
		if it := w.fromOwnShards(1); !it.none() {
			return it
		}
	}
	// Load before Swap: most ticks find the slot empty, and a load costs
	// no locked instruction.
	if w.lifo.Load() != nil {
		if t := w.lifo.Swap(nil); t != nil {
			if w.lifoRuns < maxLIFORuns {
				w.lifoRuns++
				w.c.LIFOHits++
				return t.item()
			}
			w.push(t) // the slot had its turns: to the back of the queue
		}
	}
	w.lifoRuns = 0
	if w.fair.tick&1 != 0 {
		// Every other tick a pinned task goes before the local queue,
		// which a batch from the inject shard may have filled.
		if it := w.fromPinned(); !it.none() {
			return it
		}
	}
	if it, ok := w.local.Pop(); ok {
		return it
	}
	if it := w.fromOwnShards(0); !it.none() {
		return it
	}
	return w.ownOffer()
}

// ownOffer takes back the b side that the worker's outermost pending
// Join offers in its join slot, as a thief would. The slot is filled only
// while that Join's a runs on the worker's stack, so only a worker that
// waits inside a (runUntil) finds it here: with nothing else to do, it
// runs b itself rather than park with work offered that only others may
// take, and the Join, finding the offer gone, sees b done.
func (w *Worker) ownOffer() item {
	if jt := w.joinSlot.Load(); jt != nil && w.joinSlot.CompareAndSwap(jt, nil) {
		return jt.item()
	}
	return item{}
}

// fromOwnShards takes from the node's pinned and inject shards, each
// first on alternate calls, so that a stream of strict tasks does not
// starve the others, nor the reverse. n is as for fromShard.
func (w *Worker) fromOwnShards(n int) item {
	w.seek.pinnedFirst = !w.seek.pinnedFirst
	if w.seek.pinnedFirst {
		if it := w.fromPinned(); !it.none() {
			return it
		}
		return w.fromShard(w.domain, n)
	}
	if it := w.fromShard(w.domain, n); !it.none() {
		return it
	}
	return w.fromPinned()
}

// fromPinned takes one task from the domain's pinned shard. Pinned tasks
// never enter a run queue, where a worker of another node could steal
// them only to send them back, nor any buffer of one worker, where a
// blocked task could strand them: the domain's workers take them one at a
// time, which also spreads them evenly inside the node.
func (w *Worker) fromPinned() item {
	if w.domain.pinned.IsEmpty() {
		return item{}
	}
	it, ok := w.domain.pinned.Pop()
	if !ok {
		return item{}
	}
	if w.out.on {
		w.bindCaller()
	}
	w.c.InjectPulls++
	return it.taken()
}

// fromShard takes tasks from domain d's shard into the local queue and
// returns the first: n of them, or with n == 0 a fair share,
// min(len/workers + 1, free/2). They go as the shard held them: a plain
// task as its function, run without a record.
func (w *Worker) fromShard(d *domain, n int) item {
	if d.inject.IsEmpty() {
		return item{}
	}
	if n == 0 {
		share := len(d.workers) // the node's workers split its shard
		if d != w.domain {
			share++ // a helper from another node counts as one more of them
		}
		n = min(d.inject.Len()/share+1, w.local.Free()/2)
	}
	items := d.inject.PopN(w.seek.items[:0], max(n, 1))
	if len(items) == 0 {
		return item{}
	}
	if w.out.on {
		w.bindCaller()
	}
	if d == w.domain {
		w.c.InjectPulls++
	} else {
		w.stoleCross(uint64(len(items)), true)
		if trace.IsEnabled() {
			w.traceCross(d, uint64(len(items)), true)
		}
	}
	for i := range items {
		items[i] = items[i].taken()
	}
	w.local.PushBatch(items[1:])
	it := items[0]
	clear(items)
	w.seek.items = items
	return it
}

// search looks for work elsewhere, in victim order: the node's workers
// and shard, then (one searcher per node at a time) the other nodes. The
// second pass also takes a victim's LIFO slot when its queue is empty, so
// that a task spawned before a long one is not stranded.
func (w *Worker) search() item {
	p := w.pool
	if !w.seek.searching {
		if !p.idle.tryStartSearching(w.domain) {
			return item{}
		}
		w.seek.searching = true
	}
	var found item
	w.seek.keepOff.look()
	for pass := range 2 {
		visit := func(v steal.Victim) bool {
			if v.Domain != w.domain.index && w.leavesAlone(v.Domain) {
				return false
			}
			found = w.stealFrom(v, pass == 1)
			return !found.none()
		}
		if p.cfg.mode == steal.Flat {
			p.layout.Flat(w.id, &w.seek.rng, visit)
		} else if !p.layout.Local(w.id, &w.seek.rng, visit) && len(p.domains) > 1 &&
			w.domain.crossSearching.CompareAndSwap(false, true) {
			p.layout.Remote(w.id, &w.seek.rng, visit)
			w.domain.crossSearching.Store(false)
		}
		if !found.none() {
			return found // run ends the search
		}
	}
	return item{}
}

// leavesAlone reports whether the worker leaves another domain d's queues
// alone in this search: it keeps off d for a while (keepOff), or d has a
// searcher of its own, which will find d's work. Such a searcher is often
// a worker just woken for that work, whose goroutine waits for a
// processor or whose thread waits for its CPU: a thief that took the work
// meanwhile would run it off its node (TestSoftLocalityOutsideSubmitter
// counts such tasks).
func (w *Worker) leavesAlone(d int) bool {
	return w.seek.keepOff.holds(d) || w.pool.domains[d].searching.Load() > 0
}

func (w *Worker) stealFrom(v steal.Victim, lifo bool) item {
	p := w.pool
	if v.IsShard() {
		if v.Domain == w.domain.index {
			if it := w.fromPinned(); !it.none() {
				return it
			}
		}
		return w.fromShard(p.domains[v.Domain], 0)
	}
	vw := p.workers[v.Worker]
	it, moved := vw.stealer.StealInto(w.local)
	ok, n := moved > 0, uint64(moved)
	if !ok {
		if jt := vw.joinSlot.Load(); jt != nil && vw.joinSlot.CompareAndSwap(jt, nil) {
			it, ok, n = jt.item(), true, 1
		}
	}
	if !ok && lifo && vw.stealer.IsEmpty() {
		// A load first: a search passes every worker of the node, and a
		// swap would write each empty slot's line, taking it from its
		// owner's cache.
		if t := vw.lifo.Load(); t != nil && vw.lifo.CompareAndSwap(t, nil) {
			it, ok, n = t.item(), true, 1
		}
	}
	if !ok {
		return item{}
	}
	if w.out.on {
		w.bindCaller()
	}
	if v.Domain == w.domain.index {
		w.c.StealsInNode++
		w.c.TasksStolenInNode += n
	} else {
		w.stoleCross(n, false)
		if trace.IsEnabled() {
			w.traceCross(p.domains[v.Domain], n, false)
		}
	}
	w.seek.fromWorker = true // fork-join and spawned work: keep a searcher about
	return it
}

// endSearch leaves the searching state without having found work.
func (w *Worker) endSearch() {
	if !w.seek.searching {
		return
	}
	w.seek.searching = false
	if w.pool.idle.stopSearching(w.domain) {
		w.pool.wakeForPending(w.domain, nil)
	}
}

// run runs it on this worker, or sends it home if it must or should run
// on another node. A plain task queued as its function runs without a
// record, unless it runs away from its home, whose node may take it back
// (sendsHome queues a record).
func (w *Worker) run(it item) {
	t, away := w.taskOf(it)
	if away {
		return // sent home
	}
	w.foundWork()
	if !w.fair.clockOn {
		w.fair.busySince, w.fair.clockOn = time.Now(), true
	}
	w.c.TasksRun++
	if w.out.on && !w.relay.onSpr {
		w.c.CallerRuns++
	}
	switch {
	case t == nil && w.obs.labels == nil:
		w.call(it.fn)
	case t != nil && t.labels == w.obs.labels && t.at == 0:
		w.runTask(t)
	case w.out.on && w.out.ctx == nil && !w.relay.onSpr:
		// A Run's caller runs what it helps with under its own labels,
		// which nothing could put back after (join.go).
		w.runItem(it, t)
	default:
		// Labels to set or put back, or a sampled task (histogram.go).
		w.observed(it, t)
	}
	w.c.Completed++
	w.ranTask()
}

// runDropped is run's count taken back for the task it runs now, which
// found itself dropped rather than run (a Group's function skipped for a
// Shutdown's drop, groupTask.run) and is counted in Abandoned: Submitted
// stays TasksRun plus Abandoned. run counts TasksRun (and CallerRuns)
// before the task and Completed after it; only the owner reads w.c
// between, and publishes it after.
func (w *Worker) runDropped() {
	w.c.TasksRun--
	w.c.Completed-- // run adds it back as the task returns
	if w.out.on && !w.relay.onSpr {
		w.c.CallerRuns--
	}
	w.pool.abandoned.Add(1)
}

// runTask runs t's job and gives a plain record back to w's list.
func (w *Worker) runTask(t *task) {
	t.job.run(w)
	if t.plain {
		w.reuse(t)
	}
}

// runItem runs it: its task t, or its function where it has no record.
func (w *Worker) runItem(it item, t *task) {
	if t == nil {
		w.call(it.fn)
	} else {
		w.runTask(t)
	}
}

// taskOf returns the item's task record (nil for a plain task queued as its
// function) and whether it went home instead: a task that must or should
// run on another node (sendsHome; a plain one is given a record first,
// which sendsHome may queue).
func (w *Worker) taskOf(it item) (t *task, away bool) {
	t = it.t
	if t != nil {
		return t, t.home != noHome && w.sendsHome(t)
	}
	if it.home != noHome && it.home.domain() != w.domain.index {
		t = w.newTask(it.fn, it.home)
		return t, w.sendsHome(t)
	}
	return nil, false
}

// foundWork ends a search that found work (by stealing, or from the
// queues after a wake-up); the last searcher wakes another to keep
// looking. A task taken from another worker means tasks are making
// tasks: keep a searcher about to take the next ones. One taken from a
// shard with nothing else queued is a hand-off from outside: waking a
// worker for nothing would cost the hand-off a thread wake-up (and hold
// a processor the submitter may need).
func (w *Worker) foundWork() {
	fromWorker := w.seek.fromWorker
	w.seek.fromWorker = false
	if !w.seek.searching {
		return
	}
	w.seek.searching = false
	if w.pool.idle.stopSearching(w.domain) && (fromWorker || w.pool.queuedAnywhere()) {
		w.pool.idle.notify(w.domain.index)
	}
}

// ranTask does the per-task bookkeeping after a task: the fairness
// tuning (tune), publishing the counters for Stats, and every
// place.SpreadEvery tasks the worker's stop point (settle: its thread and
// where it runs).
func (w *Worker) ranTask() {
	w.fair.tick++
	if w.fair.sinceLook++; w.fair.sinceLook >= w.fair.interval {
		w.tune()
	}
	if w.c.TasksRun%publishEvery == 0 {
		w.publish()
	}
	if w.c.TasksRun%place.SpreadEvery == 0 { // a caller's thread is not the worker's
		w.settle()
	}
}

// push appends t to the back of the worker's queue, as its item: a
// plain record goes back to the worker's list at once (itemOf). When the
// queue is full, its older half goes to the node's inject shard.
func (w *Worker) push(t *task) {
	spilled := w.local.Push(w.itemOf(t))
	if spilled == nil {
		return
	}
	w.c.Overflows++
	w.domain.inject.Requeue(spilled...)
	clear(spilled)
}

// tune sets the fairness interval so that about targetLookEvery of work
// passes between looks at the shard (Tokio's self-tuning), from the mean
// time of the tasks run since the last look, and asks for a look. The
// clock counts tasks, not turns of the loop, and runs only while the
// worker has tasks, so neither searching nor sleeping reads as task time
// (Tokio's stats.rs measures batches of polls the same way).
func (w *Worker) tune() {
	now := time.Now()
	soft := len(w.pool.domains) > 1 // soft placement reads the domain's figures
	if soft {
		w.domain.busyAt.Store(w.pool.clock(now))
	}
	elapsed, tasks := w.fair.busy+now.Sub(w.fair.busySince), w.fair.sinceLook
	w.fair.busy, w.fair.busySince, w.fair.sinceLook = 0, now, 0
	w.fair.lookShard = true
	if tasks == 0 {
		return
	}
	mean := float64(elapsed.Nanoseconds()) / float64(tasks)
	if w.fair.meanTask == 0 {
		w.fair.meanTask = mean
	} else {
		w.fair.meanTask = 0.9*w.fair.meanTask + 0.1*mean
	}
	if soft {
		w.domain.taskNanos.Store(int64(mean)) // the latest: a node's tasks may change length at once
	}
	if w.pool.cfg.interval > 0 {
		return
	}
	n := uint32(float64(targetLookEvery.Nanoseconds()) / max(w.fair.meanTask, 1))
	w.fair.interval = min(max(n, minInterval), maxInterval)
}

// stopClock stops the task clock: the worker has run out of tasks.
func (w *Worker) stopClock() {
	if w.fair.clockOn {
		w.fair.busy += time.Since(w.fair.busySince)
		w.fair.clockOn = false
	}
}

// cacheLine is the padding between values that different workers write:
// 128 bytes covers the adjacent-line prefetcher of x86 and the 128-byte
// lines of some arm64 parts.
const cacheLine = 128

// padded is a T with a cache line of padding on each side, so that two
// padded values in a slice never share a line.
type padded[T any] struct {
	_ [cacheLine]byte
	v T
	_ [cacheLine]byte // the last value of a slice has a line of its own too
}

// The worker's thread (placement's Thread, internal/place). A worker's
// goroutine is locked to an OS thread bound to its CPUs (unless
// pin.Goroutines), and two things a task does could take that thread
// away:
//
//   - runtime.UnlockOSThread without a matching LockOSThread would unlock
//     the worker's goroutine, which would then run on whatever thread the
//     runtime gives it while its bound thread ran other goroutines. The
//     worker locks its thread many times over (place.LockSlack), so a
//     task's unpaired unlocks leave it locked; and at its stop points (a
//     wake-up, every place.SpreadEvery tasks: settle) it checks that it
//     still runs on its thread, and if a task unlocked it past the
//     slack, it locks and binds the thread it is on, puts the deserted
//     thread's mask back and counts it (Counters.Relocks).
//   - runtime.Goexit ends the worker's goroutine, and with it, since it
//     is locked, its thread. The waiters of the tasks on its stack are told
//     (panic.go); the worker then goes on in a new goroutine, which locks
//     and binds a new thread (replace) and keeps the worker's ID, queue,
//     LIFO slot and counters, and takes the join slot's offer into its
//     queue: the Join that offered it has ended and will not take it back.
//     Counted in Counters.Goexits.

// end is the worker's last act: publish, let a waker's aim finish, put
// the thread's mask back.
func (w *Worker) end() {
	defer w.pool.workerEnded() // after the mask is put back
	w.endSpares()
	w.publish()
	w.owner.ended.Store(true)
	if w.retire.Load() {
		// Retired (resize.go): its goroutine is no longer the worker's, and
		// the runtime may give its g to another.
		w.pool.byG.move(w, w.owner.g.Swap(0), 0)
	}
	w.th.End()
	// Return still locked, if locked: the runtime ends this thread with
	// the goroutine.
}

// retireAwake retires the worker at its loop's top, as a Resize asked
// (resize.go): it hands its LIFO slot and run queue to its node's inject
// shard, registers as retired, and re-checks as a parker does (rule 3 of
// idle.go), so that what it handed over is not left with every worker
// asleep. It reports false where its thread cannot retire now: a caller
// or a spare holds the seat, a task of the seat is in Block, or a Resize
// took the retirement back.
func (w *Worker) retireAwake() bool {
	if w.out.on || w.relay.onSpr || w.relay.busy.Load() != 0 {
		return false
	}
	w.handOver()
	ok, recheck, allParked := w.pool.idle.toRetired(w, w.seek.searching)
	if !ok {
		return false
	}
	w.seek.searching = false
	w.stopClock()
	w.handle.Store(nil)
	w.pool.beforeSleep(w.domain, recheck, allParked, nil)
	return true
}

// handOver moves the worker's LIFO task and run queue, in that order, to
// its node's inject shard, where the node's workers take them as they
// take submitted work. Owner only.
func (w *Worker) handOver() {
	moved := w.seek.items[:0]
	if t := w.lifo.Swap(nil); t != nil {
		moved = append(moved, w.itemOf(t))
	}
	for {
		it, ok := w.local.Pop()
		if !ok {
			break
		}
		moved = append(moved, it)
	}
	w.domain.inject.Requeue(moved...)
	clear(moved)
	w.seek.items = moved[:0]
}

// goexited is what a goroutine that a task's runtime.Goexit ends does
// for the seat it holds before another goroutine takes it on (replace,
// spare.goexit): the count, its search ended, the Join offer that no Join
// will take back queued, its counters published.
func (w *Worker) goexited() {
	w.c.Goexits++
	if w.seek.searching {
		w.endSearch()
	}
	if t := w.joinSlot.Swap(nil); t != nil {
		w.push(t)
	}
	w.publish()
}

// replace runs as a task's runtime.Goexit ends the worker's goroutine,
// after every deferred call of the tasks on its stack: it hands the
// worker on to a new goroutine (see above). Still the owner here.
func (w *Worker) replace() {
	w.goexited()
	w.relay.cur = nil // the new goroutine's record is made at its first Block
	w.pool.byG.move(w, w.owner.g.Swap(0), 0)
	w.th.Desert()
	go w.main(nil)
	// This goroutine ends now; locked, it takes its thread with it.
}

// settle is what a worker does at its stop points, after a wake-up and
// every place.SpreadEvery tasks: it checks its thread, takes up a
// re-plan, then checks its CPU (place's spreading).
func (w *Worker) settle() {
	if w.out.on || w.relay.onSpr {
		return // the caller's or spare's thread is not the worker's (join.go, spare.go)
	}
	if relocked, err := w.th.KeepThread(); relocked {
		if err != nil {
			w.pool.noteDegraded(err)
		}
		w.c.Relocks++
	}
	if w.th.Follow() {
		w.c.Replans++
	}
	if w.th.Spread() {
		w.c.Spreads++
	}
}
