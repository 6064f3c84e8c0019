package pool

import (
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// Blocking nobody marked: workers that stand in.
//
// A task that blocks without Worker.Block (a read, a lock, a channel, a
// sleep) holds its worker: its node runs one worker short, and when all
// of them block on work queued behind them, the node stops. The pool
// cannot hand the blocked worker's seat to another thread, as Block
// does: it does not know where in the task the thread stopped. It may be
// in the middle of the pool's own code (a Spawn half done), or hold the
// worker's PerWorker cell across the wait; only the task can say it is
// at a safe place, which is what Block is. What the pool can do, as
// Java's ForkJoinPool adds a worker up to its maximum pool size, is run
// another worker beside it: one New placed but does not run, a worker
// in reserve (WithMaxWorkers places them, a Resize retires them), with
// its own ID, queue and PerWorker cell. Such a worker stands in. It
// takes the node's shards and steals the blocked worker's queued work
// (its run queue, LIFO slot and join slot are open to thieves) on the
// node's CPUs, so node locality and strict work keep their rules.
//
// The block watch. A goroutine of the pool (not locked, not bound) looks
// every interval (WithBlockWatch, defaultBlockWatch unless set; longer
// in proportion in a pool of 128 awake workers or more, so that a look
// costs about the same share of a CPU) while some worker is awake and
// some node has workers in reserve; once every worker is parked it waits
// for the first to wake (idle.watchKick), so an idle pool costs it
// nothing, and no task pays for it. At a look, a worker counts as
// blocked when it has been awake on its own seat (not parked, not lent
// to a caller, not in Block, no park in between) since the look before
// the last, its
// thread has had the CPU for less than a quarter of each of the two
// intervals (blockedLooks), and it is asleep now: its thread's CPU clock
// says so, one system call per awake worker, and then its state (S or D
// in /proc/self/task/TID/stat). A task that computes has the CPU, or at
// least its share of a CPU it shares with other processes, and never
// counts; one that waits on I/O, a lock or a channel, or sleeps, does,
// and so does a worker whose short tasks mostly wait. A locked worker
// that waits for a processor (more workers than GOMAXPROCS, or one the
// runtime preempted) also sleeps off its CPU; the runtime counts it
// runnable: where more workers are awake than GOMAXPROCS, a look takes
// as many of the blocked as that excess, and at most as many as
// goroutines wait for a processor, to be waiting for one (a stand-in
// would only wait with them); two intervals, not one, keep a short wait
// for a processor from counting.
//
// A node's stand-ins rise at a look that finds one of its workers
// blocked, work queued for the node and none of its workers parked (a
// stand-in helps only then). They rise at once to what keeps the node's
// share of workers (Resize's) busy, judged by the CPU time its workers
// had over the interval (standInsFor: at most twice the running workers
// at one look), and at least to one per blocked worker, up to the
// node's reserve; stand-ins wanted beyond the reserve are counted
// (StandInsRefused), each once while the node goes on needing them. At once, not one at a time: a worker that stands
// in counts as blocked only two looks after it starts, and where tasks
// block for most of each worker's time, the node needs hundreds. They
// fall by one after standInCalm looks in a row have found fewer blocked
// workers than stand-ins: a stand-in that is retired at once would be
// started again at the next block, and starting one costs a thread start
// and a bind. Stand-ins are workers like the others: which of a node's
// workers run is Resize's rule, the lowest IDs, for its share plus its
// stand-ins (setRunningLocked), and a stand-in retires as a resized
// worker does, at its next task boundary.
//
// A pool with no worker in reserve has its watch at rest (a Resize
// that retires some wakes it): blocked workers hold their node, and the
// stuck watch says so (stuck.go). The watch looks on while Close drains
// the pool, since a blocked task may wait for work queued behind it, and
// stand-ins start then too; it counts among the live workers, so Close
// returns after it has ended.

// blockedLooks is how many looks in a row must find a worker's thread
// off its CPU most of the time before it counts as blocked (see above).
const blockedLooks = 2

// standInCalm is how many looks in a row must find fewer blocked workers
// than stand-ins before one retires.
const standInCalm = 20

// blockWatch is the pool's block watch. The watch's goroutine alone
// reads and writes its fields but every and looks; the stand-ins it sets
// are sched.standIns (resize.go).
type blockWatch struct {
	every    time.Duration // 0: no watch
	calm     []int         // per domain: looks in a row with fewer blocked than standIns
	short    []int         // per domain: the most stand-ins wanted beyond the reserve since it last needed none for standInCalm looks
	quiet    []int         // per domain: looks in a row that wanted no stand-in
	seen     []threadSeen  // per worker: at the last look
	looks    atomic.Uint64 // looks taken (tests)
	found    []nodeLook    // per domain: the last look's findings (the watch's goroutine)
	runnable [1]metrics.Sample
}

// threadSeen is a worker's thread as the last look saw it.
type threadSeen struct {
	at    time.Time // zero: not awake on its seat then
	tid   int
	cpu   time.Duration // the thread's CPU clock
	parks uint64        // the worker's published Parks
	off   int           // looks in a row that found it off its CPU
}

// parksField is the index of Counters.Parks among the published counters.
var parksField = func() int {
	var c Counters
	for i, f := range c.fields() {
		if f == &c.Parks {
			return i
		}
	}
	panic("pool: Counters.fields has no Parks")
}()

// initBlockWatch readies the watch, before the workers start (they read
// idle.watchKick): it runs where the interval is not 0, threads' CPU
// clocks can be read, and the pool has more workers than nodes (Resize's
// floor), so that it may have workers in reserve.
func (p *sched) initBlockWatch() {
	bw := &p.blocked
	bw.every = p.cfg.blockWatchEvery()
	if bw.every <= 0 || !threadCPUs || len(p.workers) == len(p.domains) {
		bw.every = 0
		return
	}
	bw.calm = make([]int, len(p.domains))
	bw.short = make([]int, len(p.domains))
	bw.quiet = make([]int, len(p.domains))
	bw.found = make([]nodeLook, len(p.domains))
	bw.runnable[0].Name = "/sched/goroutines/runnable:goroutines"
	bw.seen = make([]threadSeen, len(p.workers))
	p.idle.watchKick = make(chan struct{}, 1)
}

// startBlockWatch starts the watch's goroutine, counted live (see above).
func (p *sched) startBlockWatch() {
	if p.blocked.every > 0 {
		p.live.Add(1)
		go p.watchBlocked()
	}
}

// watchBlocked is the watch's goroutine. It looks on while Close drains
// the pool (a blocked task may wait for work queued behind it, which
// Close runs), and ends once the pool is ending: idle.wakeAll kicks it.
func (p *sched) watchBlocked() {
	defer p.workerEnded()
	bw := &p.blocked
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for !p.ending() {
		if p.idle.unparked.Load() == 0 || !p.hasReserve() {
			// Every worker parked: nothing is blocked, no stand-in is
			// needed, and the look after the wait starts over. None in
			// reserve: nothing a look could do until a Resize retires
			// some.
			p.dropStandIns()
			clear(bw.seen)
			<-p.idle.watchKick
			continue
		}
		t.Reset(bw.lookEvery(int(p.idle.unparked.Load())))
		select {
		case <-t.C:
		case <-p.idle.watchKick: // perhaps the end: the loop looks
			t.Stop()
			continue
		}
		p.lookBlocked(time.Now())
	}
}

// lookEvery is the time between looks with awake workers awake.
func (bw *blockWatch) lookEvery(awake int) time.Duration {
	return bw.every * time.Duration(max(1, awake/64))
}

// lookBlocked is one look of the watch.
func (p *sched) lookBlocked(now time.Time) {
	bw := &p.blocked
	bw.looks.Add(1)
	// First what each node's workers did since the last look.
	total := 0
	for di, d := range p.domains {
		n := &bw.found[di]
		*n = nodeLook{}
		for _, w := range d.workers {
			b, cpu, over := p.blockedSince(w, now)
			if over > 0 {
				n.busy, n.span = n.busy+cpu, over
			}
			if b {
				n.blocked++
			}
		}
		total += n.blocked
	}
	if total == 0 && !p.anyStandIns() {
		return
	}
	// A locked worker that waits for a processor sleeps off its CPU as a
	// blocked one does, but the runtime counts it runnable. Where more
	// workers are awake than GOMAXPROCS, that many of the blocked, at most
	// as many as goroutines wait for a processor, are taken as waiting
	// for one (a stand-in would wait too), from each node in proportion.
	if over := int(p.idle.unparked.Load() - p.idle.procs.Load()); over > 0 && total > 0 {
		waiting := min(over, p.runnableNow(), total)
		left := waiting
		for di := range p.domains {
			n := &bw.found[di]
			take := min(left, waiting*n.blocked/total)
			n.blocked, left = n.blocked-take, left-take
		}
		for di := range p.domains { // what the rounding left, node by node
			n := &bw.found[di]
			take := min(left, n.blocked)
			n.blocked, left = n.blocked-take, left-take
		}
	}
	var change []int // per domain, the stand-ins wanted where they change
	for di, d := range p.domains {
		n := &bw.found[di]
		cur := int(p.standInsOf(d).now.Load())
		next := cur
		switch {
		case n.blocked > 0 && d.sleeping.Load() == 0 && d.hasWork():
			bw.calm[di], bw.quiet[di] = 0, 0
			want := max(n.blocked, standInsFor(int(d.size.Load()), cur, n.busy, n.span))
			reserve := int(p.standInsOf(d).reserve.Load())
			if short := want - reserve; short > bw.short[di] {
				// Each stand-in wanted past the reserve counts once while
				// the node goes on needing stand-ins, not at every look,
				// nor again after a look or two of calm.
				p.standInsOf(d).refused.Add(uint64(short - bw.short[di]))
				bw.short[di] = short
			}
			next = max(cur, min(want, reserve))
		case n.blocked < cur:
			if bw.calm[di]++; bw.calm[di] >= standInCalm {
				next, bw.calm[di] = cur-1, 0
			}
		default:
			bw.calm[di] = 0
		}
		if bw.quiet[di]++; bw.quiet[di] > standInCalm {
			bw.short[di] = 0 // needing none for standInCalm looks: a later need counts anew
		}
		if next != cur {
			if change == nil {
				change = make([]int, len(p.domains))
				for i, o := range p.domains {
					change[i] = int(p.standInsOf(o).now.Load())
				}
			}
			change[di] = next
		}
	}
	if change != nil {
		p.setStandIns(change)
	}
}

// nodeLook is what one look found of a node's workers: how many count as
// blocked, and the CPU time of those it saw over the interval span.
type nodeLook struct {
	blocked    int
	busy, span time.Duration
}

// anyStandIns reports whether a node has stand-ins now.
func (p *sched) anyStandIns() bool {
	for _, d := range p.domains {
		if p.standInsOf(d).now.Load() != 0 {
			return true
		}
	}
	return false
}

// runnableNow is the runtime's count of goroutines waiting for a
// processor.
func (p *sched) runnableNow() int {
	s := p.blocked.runnable[:]
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(s[0].Value.Uint64())
}

// standInsFor is how many stand-ins keep a node's share of workers busy,
// for a node of running workers (stand-ins included) whose workers had
// busy CPU time over the interval span: each running worker keeps about
// its part of the CPU, so running*share/(busy/span) workers keep share
// CPUs busy, at most twice running at one look (a node whose workers all
// wait gets no reading of how much more it needs). It is what the
// stand-ins rise to at once, not one look at a time: a worker that
// stands in counts as blocked only two looks after it starts, and for
// tasks that block for long (most of each worker's time) the node would
// need hundreds of looks.
func standInsFor(running, cur int, busy, span time.Duration) int {
	share := running - cur
	if share <= 0 || span <= 0 {
		return 0
	}
	need := 2 * running
	if busy > 0 {
		need = min(need, int((time.Duration(running*share)*span+busy-1)/busy)) // ceil(running·share·span/busy)
	}
	return need - share
}

// blockedSince reports whether w counts as blocked since the last look
// (see above), and, where it was awake on its seat at both looks, the CPU
// time its thread had over the interval between them (over > 0); it
// records what this look saw.
func (p *sched) blockedSince(w *Worker, now time.Time) (blocked bool, cpu, over time.Duration) {
	s := &p.blocked.seen[w.id]
	prev := *s
	*s = threadSeen{}
	if w.owner.ended.Load() || !p.awake(w.id) || w.seat.state.Load() != seatOwn || w.relay.busy.Load() != 0 {
		return false, 0, 0
	}
	tid := w.th.TID()
	t, ok := threadCPUTime(tid)
	if !ok {
		return false, 0, 0
	}
	*s = threadSeen{at: now, tid: tid, cpu: t, parks: w.pub.v[parksField].Load()}
	if prev.at.IsZero() || prev.tid != tid || prev.parks != s.parks {
		return false, 0, 0
	}
	cpu, over = t-prev.cpu, now.Sub(prev.at)
	if 4*cpu >= over {
		return false, cpu, over
	}
	// Off its CPU for blockedLooks looks in a row, and asleep now: not
	// running, nor runnable waiting for a CPU (R).
	if s.off = prev.off + 1; s.off < blockedLooks {
		return false, cpu, over
	}
	state, ok := threadState(tid)
	return ok && (state == 'S' || state == 'D'), cpu, over
}

// dropStandIns retires every stand-in: the pool is idle.
func (p *sched) dropStandIns() {
	for _, d := range p.domains {
		if p.standInsOf(d).now.Load() != 0 {
			p.resizeMu.Lock()
			defer p.resizeMu.Unlock()
			p.setStandInsLocked(make([]int, len(p.domains)))
			return
		}
	}
}

// setStandIns makes want the domains' stand-ins, each within its reserve,
// and runs the workers that makes (setRunningLocked). A Resize under
// way has the lock: this look changes nothing, the next looks again.
func (p *sched) setStandIns(want []int) {
	if !p.resizeMu.TryLock() {
		return
	}
	defer p.resizeMu.Unlock()
	p.setStandInsLocked(want)
}

// setStandInsLocked is setStandIns under resizeMu.
func (p *sched) setStandInsLocked(want []int) {
	for di, d := range p.domains {
		want[di] = min(want[di], int(p.standInsOf(d).reserve.Load())) // a Resize may have shrunk it since
		p.standInsOf(d).now.Store(int32(want[di]))
	}
	back, err := p.setRunningLocked(true, nil)
	if err != nil { // the pool ends: its workers with it, and no stand-in counts
		for _, d := range p.domains {
			p.standInsOf(d).now.Store(0)
		}
		return
	}
	for _, w := range back {
		p.standInsOf(w.domain).started.Add(1)
	}
}
