package pool

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// The idle protocol: how workers search for work, sleep and are woken
// (Tokio's idle.rs, with NUMA-aware waking), and why no wake-up is lost.
//
// The rules:
//
//  1. At most half the workers search at once, or half of GOMAXPROCS
//     where that is fewer (tryStartSearching). A
//     searcher that finds work and was the last one searching wakes
//     another, if tasks are making tasks (Worker.run, foundWork), so
//     work keeps spreading. Without the limit every idle worker would
//     spin on the same victims.
//  2. A task made available (pushed to a shard, a run queue, a LIFO or
//     join slot) is followed by notify, which wakes a sleeper only when
//     nobody searches that will find the task: no searcher of the
//     task's domain, and no searcher at all when the domain has no sleeper
//     to wake. A woken worker starts out searching, so a burst of
//     submissions wakes one worker, not a crowd. The one exception is a
//     loop queued from outside (wakeMore): it wakes as many of the node's
//     sleepers as its block can occupy, since the first one splits it at
//     once. Extra wake-ups only add searchers; they never lose a task.
//  3. A worker registers as parked (toParked) before it sleeps, and then
//     takes one decision on whether it may sleep (beforeSleep): if
//     nobody searches, it looks at every queue once more (wakeForPending)
//     and wakes a worker for what it finds. That is the last searcher,
//     or a worker refused a search (rule 1) whose searchers have all
//     stopped since: a searcher that stops to run a task it found does
//     not re-check, so a worker that parks without searching must, or a
//     task stored meanwhile by a worker that then blocks (Join's b while
//     its a waits on a channel) would be left with every other worker
//     asleep. A worker that keeps off a node for a while (a loop piece
//     or a soft task it sent home) looks at that node's queues only after
//     the keep-off, a few milliseconds at most: it wakes by itself then
//     (Worker.sleep), and meanwhile wakes one of that node's own sleepers
//     for its shard's work.
//  4. Waking is idempotent: a worker's token channel holds one wake-up,
//     so a wake-up sent before the worker blocks on it is not lost.
//
// Why no task is left queued with every worker asleep. Rules 2 and 3 are
// the two halves of a Dekker-style handshake. The submitting side first
// stores the task (an atomic store or read-modify-write: the shard's
// length, the ring's tail, the slot's pointer) and then loads the
// counters (searching, unparked, sleeping). The parking side first
// stores the counters (unparked drops in toParked, then searching if it
// searched), loads searching, and if that is zero loads every queue's
// emptiness (wakeForPending). Go's sync/atomic operations are
// sequentially consistent (the Go memory model), so in their single
// total order one side's loads come after the other side's stores:
// either notify sees the worker parked and no searcher and wakes someone
// under mu, or the parker's re-check sees the task and wakes someone.
// When either side sees a searcher instead, the searching count is not
// yet zero in that order, and the worker that brings it to zero
// re-checks after the task was stored: by rule 3 if it parks, and in
// foundWork (queuedAnywhere) if it stopped because it found a task. (A parker
// that keeps off the task's domain wakes one of the domain's sleepers for
// it or looks again when the keep-off ends: the task waits at most that
// long.) A plain (non-atomic) flag on either side would break this: the
// two loads could both miss.
//
// Rule 4 covers the window between toParked and the receive on the
// token channel. The sleepers' lists change only under mu; notify reads
// the counters without it first, as a fast path, and again under it.
//
// Waiters. A worker waiting inside a task (runUntil, latch.go) parks as
// an idle worker does: toParked, the re-check of rule 3, a sleeper that
// notify may wake for work. So the handshake above holds for it as it
// stands, and a task queued while it sleeps is not left. What it adds is
// a second reason to wake, its latch, with a handshake of its own in one
// word (latch.go): the waiter marks the latch sleeping after toParked and
// before it blocks; the completer sets it and, if it was sleeping, takes
// the waiter off the sleepers' lists under mu (wakeWaiter), counted
// unparked but not searching, since it goes back to its task, and sends
// it a token (rule 4). Whichever of notify and wakeWaiter comes first
// takes the waiter off; the other finds it gone and leaves it, and the
// waiter takes on the count of the one that did (woken). A parked waiter
// is marked waiting (nWaiting): it has a task on its stack, so the pool
// is not quiet (drainIfQuiet), and it does not end with the pool. Tests:
// TestWaitersParkAndWake (waiters of every kind, nested, park and wake),
// TestJoinWaiterCostsNoCPU (a parked joiner costs no CPU).
//
// Tests: TestNoLostWakeups and TestStrictBurstsNoLostWakeups (100 000
// hand-offs each to a pool that parks between them, under -race and with
// 4-slot queues in CI), TestIdleCPU (a parked pool costs no CPU).
//
// The worker states. Below, S is idle.searching, dS the worker's domain's
// searching, U idle.unparked and dZ the domain's sleeping; each change is
// one atomic add, made in the order written. Parked and timed park are
// one state: a worker that keeps off a node (keepOff) parks timed, and
// Worker.sleep also wakes it when the first keep-off ends.
//
//	         (1)
//	       +------+
//	       v      |
//	      running-+-----------(2)-----------> searching <---+
//	      | ^ ^ ^                             | |           |
//	      | | | +-------------(4)-------------+ |           |
//	      | | |                                (5)          |
//	      | | |                                 v           |
//	      | | +-------------(6)-------------- spinning      |
//	      | |                                   |           |
//	     (3)|                                  (7)         (8)
//	      | |                                   v           |
//	      +-|-------------------------------> parked -------+
//	        |                                 timed park
//	        |                                   |    |
//	        +----------------(9)----------------+    +-(10)---> ends
//
//	(1)  next finds a task of its own (LIFO slot, run queue, the node's
//	     shards): no counter changes.
//	(2)  next finds nothing and tryStartSearching admits the worker: S+1,
//	     then dS+1; it looks at the other workers and the shards (search).
//	(3)  next finds nothing and tryStartSearching refuses (half the
//	     workers search): toParked without a search, dZ+1 then U-1; if S
//	     is then 0 it re-checks every queue (wakeForPending).
//	(4)  search finds a task; run ends the search (stopSearching): dS-1,
//	     then S-1; the one that brings S to 0 wakes another (notify) if
//	     tasks are making tasks or more work is queued.
//	(5)  search finds nothing: spin repeats next and search for the block
//	     time; no counter changes, the worker still counts in S and dS.
//	(6)  a look finds a task: as (4).
//	(7)  the block time ends, the searcher gives way (goruntime.Crowding) or the
//	     pool closes: toParked after a search, dZ+1, U-1, dS-1, then S-1;
//	     the one that brings S to 0 re-checks every queue.
//	(8)  notify or wakeMore takes the worker that parked last off the
//	     sleepers (unparkLocked, under idle.mu): dZ-1, S+1, dS+1, then
//	     U+1, and sends its token: the worker wakes searching.
//	(9)  the keep-off of a timed park ends, or Close wakes every worker to
//	     look once more: unparkSelf, dZ-1 then U+1 (unless (8) took it
//	     first: then it wakes searching). A stale token leaves it parked.
//	(10) the pool is drained or aborting: unparkSelf, and the worker ends.
//
// A worker started by New begins parked (idle.init), unless the pool
// never sleeps (WithBlockTime(-1)): U starts at 0 and each domain's dZ at
// its worker count.
//
// Waiting inside a task. A task that waits for work it handed out (Join
// whose b was taken, Group.Wait, Future.Wait, a loop's pieces) makes its
// worker a waiting one:
//
//	running a task --(a) it waits--> the states above, with an exit
//	      ^                                        |
//	      +---------(b) what it waits for is done--+
//
// A waiting worker runs the loop of an idle one, with the same counters,
// and looks at its condition between tasks and, once registered parked,
// before it sleeps. It sleeps through the same protocol (toParked, the
// re-check, the token) and is woken by whoever completes what it waits
// for (the thief that ran b, the Group's last function, the future's
// completer, the loop's last piece), which takes it off the sleepers
// (dZ-1, U+1) without counting it as searching: it goes back to its
// task. A search it leaves because the condition holds ends as in (4),
// without a task. It never takes (10): a task is on its stack, and the
// worker ends only once that task returns.
//
// The invariant dS <= S. notifyFrom's per-node fast path returns when
// the task's domain has a searcher (dS != 0) without reading S. By the
// handshake above that is safe only if S is nonzero too at that point of
// the total order: then the worker that brings S to 0 does so after the
// task was stored, and re-checks. The update order keeps every domain's
// dS, and their sum, at most S at every point: S is incremented first
// and decremented last. tryStartSearching and unparkLocked add to S
// before dS; stopSearching and toParked take from dS before S. So a load
// that sees dS != 0 comes before that searcher's S-1, while S > 0. What
// a reader can see in between, and why it is harmless:
//   - S+1 made, dS+1 not yet (a search starting, a worker being woken):
//     notifyFrom sees dS == 0 and reads on. With a sleeper in the domain
//     it may wake it, a wake-up more than needed, which only adds a
//     searcher (rule 2); without one it returns on S != 0, and whoever
//     brings S to 0 later re-checks.
//   - dS-1 made, S-1 not yet (a search ending, a searcher parking): the
//     same two cases. The S-1 that follows comes after the task was
//     stored, and if it brings S to 0 its maker re-checks (toParked's
//     recheck, run's queuedAnywhere).
//   - dS and S are two loads, and either may change between them: dS ==
//     0 then S == 0 leads only to the locked path, which at worst wakes a
//     sleeper for nothing.
//
// The decrement order is the one the handshake cannot do without. Were S
// taken first, a searcher A of domain d could take S from 2 to 1 while B,
// of another domain, brought it to 0 and re-checked before the task was
// stored; notify would then see A's dS == 1 and return, and A, not the
// last, would park without a re-check, leaving the task with every
// worker asleep. The increment order keeps the invariant while a search
// starts: a starter counts in dS only once it counts in S.
type idle struct {
	p *sched
	// The counters notify reads on every spawn and submission, written at
	// each wake-up and park: off the lines of the fields before them and
	// of mu.
	_         [64]byte
	searching atomic.Int32 // workers searching
	unparked  atomic.Int32 // workers not parked
	// lastParked is the domain of the worker that parked last (written
	// under mu, read without it by callerDomain).
	lastParked atomic.Int32
	n          atomic.Int32 // workers not retired (resize.go); changes under mu
	// procs is GOMAXPROCS as the machine monitor last read it: searchers
	// beyond half of it would only wait for a processor (tryStartSearching).
	procs atomic.Int32
	// watchKick hears from the first worker to wake after every worker
	// parked, and from a Resize that put workers in reserve: the block watch
	// (standin.go) rests until then. nil: no watch.
	watchKick chan struct{}
	_         [64]byte

	mu       sync.Mutex
	sleepers [][]*Worker // per domain, a stack of parked workers
	parked   []bool      // per worker
	// Per worker, while parked: it waits inside a task (latch.go), so a
	// task is on its stack and the pool is not quiet (drainIfQuiet).
	waiting  []bool
	nWaiting int // parked workers with waiting set
	// Per worker, once taken off the lists: notify took it, counting it
	// as searching (else it counts as awake and not searching).
	searchWake []bool
	// Per worker: retired by Resize (resize.go), counted parked, on no
	// sleepers' list, with no thread.
	retired []bool
}

// init makes p's idle state. Where p.startsParked, every worker is
// registered as parked, on its domain's stack with the domain's first
// worker on top: nothing can be queued before New returns, so a worker
// starts as one that parked with nothing left to re-check (rule 3), and
// sleeps once it is bound. The first work wakes one (notify), Close every
// one (wakeAll), and a token sent before the worker sleeps waits in its
// channel (rule 4). Otherwise every worker starts unparked and searches.
func (il *idle) init(p *sched) {
	il.p = p
	il.n.Store(int32(len(p.workers)))
	il.procs.Store(int32(runtime.GOMAXPROCS(0)))
	il.sleepers = make([][]*Worker, len(p.domains))
	il.parked = make([]bool, len(p.workers))
	il.waiting = make([]bool, len(p.workers))
	il.searchWake = make([]bool, len(p.workers))
	il.retired = make([]bool, len(p.workers))
	if !p.startsParked() {
		il.unparked.Store(il.n.Load())
		return
	}
	for i, d := range p.domains {
		s := make([]*Worker, len(d.workers))
		for k, w := range d.workers {
			s[len(s)-1-k] = w // a stack: the domain's first worker wakes first
			il.parked[w.id] = true
		}
		il.sleepers[i] = s
		d.sleeping.Store(int32(len(s)))
	}
}

// startsParked reports whether New starts the workers parked: unless the
// pool's workers never sleep (the active policy), whose idle workers
// search from the start.
func (p *sched) startsParked() bool { return p.cfg.spinFor() >= 0 }

// tryStartSearching admits a worker to search unless half the workers
// already do, or half of GOMAXPROCS where that is fewer: the Go runtime
// runs at most GOMAXPROCS of the workers' threads at once, and keeps its
// own spinning threads to half of its busy processors for the same
// reason (proc.go); a pool of more workers than processors would
// otherwise have most of them scanning every queue in turn. The check
// and the increment are not one step, so now and then one more searcher
// gets in: the limit is an optimisation, not an invariant.
func (il *idle) tryStartSearching(d *domain) bool {
	if 2*il.searching.Load() >= min(il.n.Load(), il.procs.Load()) {
		return false
	}
	il.searching.Add(1)
	d.searching.Add(1)
	return true
}

// stopSearching ends a search; it reports whether the caller was the last
// searcher.
func (il *idle) stopSearching(d *domain) bool {
	d.searching.Add(-1)
	return il.searching.Add(-1) == 0
}

// notify wakes a parked worker for new work in domain d, unless a worker
// is searching that will find it: one of d's own, or, when d has no
// sleeper to wake, any. A searcher of another node would take the work
// across nodes, so it does not stop d's sleepers from being woken.
func (il *idle) notify(d int) { il.notifyFrom(d, il.p.layout.Nearest(d)) }

// notifyOwn is notify for work that only d's workers may run (pinned) or
// should (a soft task sent home): it wakes none of another domain's, which
// would leave the work alone and park again. If none of d's workers
// sleeps, they are all awake and get to it (rule 3).
func (il *idle) notifyOwn(d int) {
	if il.p.domains[d].sleeping.Load() != 0 {
		il.notifyFrom(d, il.p.layout.Nearest(d)[:1]) // d itself
	}
}

// notifyFrom is notify waking a sleeper of the first of domains that has
// one.
func (il *idle) notifyFrom(d int, domains []int) {
	grp := il.p.domains[d]
	if grp.searching.Load() != 0 || il.unparked.Load() >= il.n.Load() {
		return
	}
	if il.searching.Load() != 0 && grp.sleeping.Load() == 0 {
		return
	}
	il.mu.Lock()
	if grp.searching.Load() != 0 || il.unparked.Load() >= il.n.Load() ||
		(il.searching.Load() != 0 && len(il.sleepers[d]) == 0) {
		il.mu.Unlock()
		return
	}
	var w *Worker
	for _, o := range domains {
		if w = il.unparkLocked(o); w != nil {
			break
		}
	}
	il.mu.Unlock()
	if w == nil {
		return
	}
	// The waker runs on: keep w off its CPU. Not a seat a caller holds
	// (join.go): the wake-up goes to the caller, and the thread it would
	// aim sleeps on.
	if waker := il.p.workerOf(); waker != nil && waker != w && w.route.Load() == nil && w.relay.busy.Load() == 0 {
		w.th.Aim(waker.th)
	}
	w.wake()
}

// wakeMore wakes up to n parked workers of domain d, each counted as
// searching, whatever else searches: for a loop's block queued from
// outside, whose halves the first worker to take it offers at once. A
// worker woken by a worker waits for a processor (its goroutine is
// readied on the waker's, whose thread runs on), so waking the node's
// workers from the caller starts them side by side instead of one after
// another.
func (il *idle) wakeMore(d, n int) {
	for ; n > 0 && il.p.domains[d].sleeping.Load() > 0; n-- {
		il.mu.Lock()
		w := il.unparkLocked(d)
		il.mu.Unlock()
		if w == nil {
			return
		}
		w.wake()
	}
}

// unparkLocked takes the worker that parked last in domain d off the
// sleepers' lists, counted as searching and unparked, and returns it for
// the caller to wake; nil if none of d's workers sleeps. The woken worker
// starts out searching (Tokio does the same), so that more notifications
// do not wake a crowd. il.mu must be held.
func (il *idle) unparkLocked(d int) *Worker {
	s := il.sleepers[d]
	if len(s) == 0 {
		return nil
	}
	w := s[len(s)-1]
	il.sleepers[d] = s[:len(s)-1]
	il.p.domains[d].sleeping.Add(-1)
	il.unmark(w)
	il.searchWake[w.id] = true
	il.searching.Add(1)
	w.domain.searching.Add(1)
	il.woke()
	return w
}

// unmark clears w's parked state. il.mu must be held.
func (il *idle) unmark(w *Worker) {
	il.parked[w.id] = false
	if il.waiting[w.id] {
		il.waiting[w.id] = false
		il.nWaiting--
	}
}

// asleep reports whether w is parked, waiting inside a task or not.
func (il *idle) asleep(w *Worker) bool {
	il.mu.Lock()
	defer il.mu.Unlock()
	return il.parked[w.id]
}

// idleParked reports whether w is parked with no task on its stack.
func (il *idle) idleParked(w *Worker) bool {
	il.mu.Lock()
	defer il.mu.Unlock()
	return il.parked[w.id] && !il.waiting[w.id]
}

// toParked registers w as parked; waiting says it waits inside a task.
// It reports whether nobody searches once w is parked, in which case w
// must re-check every queue: whether w was the last searcher, or was
// refused a search (tryStartSearching) while others searched who have
// stopped since.
func (il *idle) toParked(w *Worker, searching, waiting bool) (recheck, allParked bool) {
	il.mu.Lock()
	defer il.mu.Unlock()
	il.parked[w.id] = true
	il.searchWake[w.id] = false
	if waiting {
		il.waiting[w.id] = true
		il.nWaiting++
	}
	il.sleepers[w.domain.index] = append(il.sleepers[w.domain.index], w)
	il.lastParked.Store(int32(w.domain.index))
	w.domain.sleeping.Add(1)
	allParked = il.unparked.Add(-1) == 0 // before searching is read: rule 3
	if searching {
		w.domain.searching.Add(-1)
		return il.searching.Add(-1) == 0, allParked
	}
	return il.searching.Load() == 0, allParked
}

// toRetired registers w, awake at its loop's top with its queue handed to
// its node, as retired (resize.go): counted parked, as toParked does, but
// on no sleepers' list, so nobody wakes it or lends its seat. It reports
// false, and changes nothing, if a Resize took the retirement back
// meanwhile (w.retire cleared under mu); otherwise recheck and allParked
// as toParked's.
func (il *idle) toRetired(w *Worker, searching bool) (ok, recheck, allParked bool) {
	il.mu.Lock()
	defer il.mu.Unlock()
	if !w.retire.Load() {
		return false, false, false
	}
	il.parked[w.id] = true
	il.searchWake[w.id] = false
	il.retireLocked(w)
	allParked = il.unparked.Add(-1) == 0 // before searching is read: rule 3
	if searching {
		w.domain.searching.Add(-1)
		return true, il.searching.Add(-1) == 0, allParked
	}
	return true, il.searching.Load() == 0, allParked
}

// retireParkedLocked retires w if it sleeps parked with no task on its
// stack: it leaves the sleepers' lists and stays counted parked. It
// reports false for a worker that is awake, waits inside a task, or
// whose seat a caller holds. il.mu must be held.
func (il *idle) retireParkedLocked(w *Worker) bool {
	if !il.parked[w.id] || il.waiting[w.id] || il.retired[w.id] || w.relay.busy.Load() != 0 {
		return false
	}
	s := il.sleepers[w.domain.index]
	for i, o := range s {
		if o == w {
			il.sleepers[w.domain.index] = append(s[:i], s[i+1:]...)
			w.domain.sleeping.Add(-1)
			il.retireLocked(w)
			return true
		}
	}
	return false
}

// retireParked retires w, marked to retire (w.retire) and registered
// parked with no task on its stack, under mu, and reports whether it is
// retired (a Resize may have retired it already): for its own thread
// before it sleeps (park.go) and for a caller that gives its seat back
// (join.go).
func (il *idle) retireParked(w *Worker) bool {
	il.mu.Lock()
	defer il.mu.Unlock()
	return il.retired[w.id] || w.retire.Load() && il.retireParkedLocked(w)
}

// retireAtStart registers w, which New does not start, as retired
// (WithMaxWorkers): before any worker runs.
func (il *idle) retireAtStart(w *Worker) {
	il.mu.Lock()
	defer il.mu.Unlock()
	if il.parked[w.id] {
		il.retireParkedLocked(w)
		return
	}
	il.parked[w.id] = true
	il.unparked.Add(-1)
	il.retireLocked(w)
}

// retireLocked marks w retired and takes it out of the counts of
// workers. il.mu must be held.
func (il *idle) retireLocked(w *Worker) {
	il.retired[w.id] = true
	il.n.Add(-1)
	w.domain.size.Add(-1)
	w.domain.capacity.Add(-w.capacity)
}

// restoreLocked brings retired w back (resize.go): counted again, parked
// on its domain's sleepers' list as New's workers start, or awake if the
// pool's workers never sleep. Its new goroutine is started after.
// il.mu must be held.
func (il *idle) restoreLocked(w *Worker) {
	il.retired[w.id] = false
	il.n.Add(1)
	w.domain.size.Add(1)
	w.domain.capacity.Add(w.capacity)
	if !il.p.startsParked() {
		il.parked[w.id] = false
		il.woke()
		return
	}
	d := w.domain.index
	il.sleepers[d] = append(il.sleepers[d], w)
	w.domain.sleeping.Add(1)
}

// retiredNow returns which workers are retired, by ID, as of one look
// under mu (Stats, Explain).
func (il *idle) retiredNow() []bool {
	il.mu.Lock()
	defer il.mu.Unlock()
	return slices.Clone(il.retired)
}

// isRetired reports whether w is retired.
func (il *idle) isRetired(w *Worker) bool {
	il.mu.Lock()
	defer il.mu.Unlock()
	return il.retired[w.id]
}

// woken reports, for w after a wake-up, whether it is still registered
// as parked (a stale token), and if not, whether it was woken counted as
// searching (notify) or not (wakeWaiter).
func (il *idle) woken(w *Worker) (parked, searching bool) {
	il.mu.Lock()
	defer il.mu.Unlock()
	return il.parked[w.id], il.searchWake[w.id]
}

// unparkSelf takes w off the sleepers' lists when it leaves park on its
// own (the pool is stopping, a keep-off ended, its latch was set). It
// reports false if another took w off first: w then has a token on the
// way, and searching says whether it is counted as searching (notify) or
// not (wakeWaiter).
func (il *idle) unparkSelf(w *Worker) (self, searching bool) {
	il.mu.Lock()
	defer il.mu.Unlock()
	if !il.parked[w.id] {
		return false, il.searchWake[w.id]
	}
	il.takeOff(w)
	return true, false
}

// wakeWaiter wakes w, parked while it waits inside a task, because its
// latch is set (latch.go): w leaves the sleepers' lists counted as awake
// and not searching, since it goes back to its task. If w is not
// registered as parked, it is awake or has a token on the way (a notify
// came first) and will see its latch.
func (il *idle) wakeWaiter(w *Worker) {
	il.mu.Lock()
	if !il.parked[w.id] {
		il.mu.Unlock()
		return
	}
	il.takeOff(w)
	il.searchWake[w.id] = false
	il.mu.Unlock()
	w.wake()
}

// woke counts a worker that was parked as unparked; the first of them
// after every worker parked wakes the block watch.
func (il *idle) woke() {
	if il.unparked.Add(1) == 1 {
		il.kick()
	}
}

// kick wakes the block watch if it rests.
func (il *idle) kick() {
	if il.watchKick != nil {
		select {
		case il.watchKick <- struct{}{}:
		default:
		}
	}
}

// takeOff takes parked w off the sleepers' lists, counted as unparked.
// il.mu must be held.
func (il *idle) takeOff(w *Worker) {
	il.unmark(w)
	s := il.sleepers[w.domain.index]
	for i, o := range s {
		if o == w {
			il.sleepers[w.domain.index] = append(s[:i], s[i+1:]...)
			w.domain.sleeping.Add(-1)
			break
		}
	}
	il.woke()
}

// wakeAll wakes every worker (Close, Shutdown), and the block watch.
func (il *idle) wakeAll() {
	for _, w := range il.p.workers {
		w.wake()
	}
	il.kick() // the block watch looks on while closing, and ends with the pool
}

// beforeSleep is the one decision a worker of domain from takes, once
// registered as parked (toParked), on whether anything is left that it
// must not sleep through; keep is its keep-offs as of this look:
//
//   - the last searcher to park (recheck) looks at every queue and wakes
//     a worker for what it finds (wakeForPending: rule 3);
//   - otherwise others search, but a searcher of another domain never
//     takes this domain's pinned work, and one that spins without end
//     (Active) never parks to re-check it: this domain's sleeper count
//     (toParked) and its pinned shard are the handshake with notifyOwn's
//     push and look, as rule 3's are with notify's, so pinned work here
//     wakes one of the domain's own sleepers;
//   - the last worker to park while the pool closes (allParked) ends the
//     pool's drain if nothing is queued anywhere (drainIfQuiet).
func (p *sched) beforeSleep(from *domain, recheck, allParked bool, keep *keepOff) {
	if recheck {
		p.wakeForPending(from, keep)
	} else if !from.pinned.IsEmpty() {
		p.idle.wakeMore(from.index, 1)
	}
	if allParked && p.state.Load() == closing {
		p.drainIfQuiet(from)
	}
}

// wakeForPending is what a parker does when nobody searches (rule 3): it
// re-checks every queue, LIFO slot and join slot, and wakes a worker for
// what it finds: one of the node's for a node's pinned work (no other
// node may run it), one near from's domain for the rest. A parker passes
// its keep-off (else nil): for the domains it keeps off it wakes one of
// their own sleepers if their inject shard holds work, and otherwise
// leaves them to the end of the keep-off, when it looks again
// (Worker.sleep); taking their work into account like the rest would wake
// itself for work it leaves alone, park and wake again until then.
func (p *sched) wakeForPending(from *domain, keep *keepOff) {
	for _, d := range p.domains {
		// Work only d's workers may (pinned) or should (kept off) run
		// wakes one of d's sleepers; with none asleep they are all awake
		// and get to it, and a worker of another node woken instead would
		// park again at once, re-check, and wake itself, round and round.
		if !d.pinned.IsEmpty() || keep != nil && keep.holds(d.index) && !d.inject.IsEmpty() {
			p.idle.wakeMore(d.index, 1)
		}
	}
	if p.stealableWork(keep) {
		p.idle.notify(from.index)
	}
}

// stealableWork reports whether a task that any worker may take is
// queued somewhere, outside the domains keep holds if it is not nil.
func (p *sched) stealableWork(keep *keepOff) bool {
	for _, d := range p.domains {
		if !d.inject.IsEmpty() && (keep == nil || !keep.holds(d.index)) {
			return true
		}
	}
	for _, w := range p.workers {
		if keep != nil && keep.holds(w.domain.index) {
			continue
		}
		if !w.stealer.IsEmpty() || w.lifo.Load() != nil || w.joinSlot.Load() != nil {
			return true
		}
	}
	return false
}
