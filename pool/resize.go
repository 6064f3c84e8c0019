package pool

import (
	"errors"
	"fmt"
)

// Resizing a running pool.
//
// A pool's workers are the ones New placed: their IDs, CPUs, queues and
// PerWorker cells stay for the pool's life. New starts all of them, or
// with WithMaxWorkers only WithWorkers' count, the others beginning
// retired. Resize(n) keeps n of them running and retires the others; a
// later Resize brings retired workers back, on the CPUs New placed them
// on, bound as New binds. So growth places workers as New would have and
// holds no CPU another pool claimed meanwhile (the pool claimed the CPUs
// of all its workers at New and keeps them).
//
// Which workers run. Resize apportions n over the nodes in proportion to
// their workers (largest remainders, ties to the first node), at least one
// per node: strict work for a node (Node.Submit with Strict, a loop's node
// block) runs only on that node's workers, so a node without one would
// hold it forever. Inside a node the lowest IDs run: growth brings back
// the lowest retired, shrinking retires the highest running.
//
// How a worker retires. Resize marks it (Worker.retire) under idle.mu.
// One asleep with no task on its stack is retired there and then (taken
// off the sleepers' lists, still counted parked) and woken to end its
// goroutine. Any other retires at its next task boundary, the top of its
// scheduler loop: it hands its LIFO slot and run queue to its node's
// inject shard (handOver), registers as retired (idle.toRetired) and
// re-checks as the last parker does (idle.go's rule 3), so what it
// handed over is not left with every worker asleep. A worker inside a
// task that waits (Join, Group.Wait, a loop) retires once that task
// returns; one whose seat a caller from outside or a spare holds
// (join.go, spare.go), once the seat is its own thread's again. A
// retired worker's goroutine ends as at Close: its spares end, its
// thread's mask is put back and the thread ends with it.
//
// A retired worker counts as parked: it keeps the drain's rule (every
// worker parked, nothing queued) true with its queue empty, and notify
// never wakes it, since it is on no sleepers' list. idle.n counts the
// workers not retired, for the search limit and notify's "all awake".
//
// An idle worker that spins (WithBlockTime) stops spinning when marked
// and retires through park; a seat a caller gives back (leave) retires
// there if it was marked meanwhile.
//
// How a worker comes back. Under idle.mu, a worker marked but not yet
// retired is simply unmarked. For a retired one Resize first waits until
// its last goroutine has ended (alive), so that no two goroutines ever
// hold it; then, under idle.mu and only while the pool still runs (for
// a stand-in, standin.go, also while Close drains it), it
// registers it as New's workers start (parked on its node's sleepers'
// list, or awake where workers never sleep) and counts it in sched.live,
// and a new goroutine binds its thread and sleeps until work wakes it.
// The drain is declared only under idle.mu after Close, so a worker
// brought back is counted live before any worker can end, and ends with
// the others.
//
// What follows the running workers: Stats (NodeStats.Workers, and each
// worker's Retired), the search limit, a loop's split of its range over
// the nodes (by the capacity of their running workers at the loop's
// start: Split) and how many of a node's workers a loop wakes. What does
// not: Workers and worker IDs, PerWorker, and the share of Submit's round
// robin each node gets (by its workers at New; the apportioning above
// keeps the running ones in about that proportion).
//
// GOMAXPROCS. The pool does not resize itself when GOMAXPROCS falls
// below its running workers (Go lowers it under a container's CPU quota):
// a locked worker with no processor waits for one, asleep, and takes no
// CPU time from the others, so keeping only GOMAXPROCS workers is not
// shown to pay (the figures are in CHANGELOG.md). Explain says
// when the workers outnumber GOMAXPROCS; a program that wants the pool to
// follow calls p.Resize(runtime.GOMAXPROCS(0)).
// scripts/gomaxprocs-study.sh asks the question again on a machine of
// many CPUs.
//
// Tests: TestResizeCountedStream (every task exactly once through grow
// and shrink cycles, with loops, joins and strict work), and the tests
// beside it in resize_test.go.

// errResize is the error of a Resize to a size the pool cannot take.
var errResize = errors.New("pool: Resize")

// Resize keeps n of the pool's workers running and retires the rest, or
// brings retired workers back, while the pool runs. n may be from the
// number of nodes (each node keeps a worker for its strict work) to
// Workers(); outside that range Resize returns an error that names it and
// changes nothing. n is spread over the nodes in proportion to their
// workers, a remainder going to the first nodes, and inside a node the
// lowest IDs run (IDs are numbered node by node). Workers brought back
// are bound and parked when it returns. Workers retired end at their next
// task boundary, after the task they are running, handing what they had
// queued to their node; until then they count as running (Size, Stats),
// and their queued tasks are not in Stats' Queued. It may be called from
// a task, including one on a worker it retires. It returns ErrClosed once
// Close or Shutdown has begun.
func (p *Pool) Resize(n int) error {
	mustPool(p, "Resize")
	return p.resize(n)
}

// Size returns how many workers run: Workers() until a Resize. After a
// shrink it falls as the retiring workers reach their task boundaries;
// after a grow it is the new size when Resize returns. Workers standing
// in for blocked ones (WithBlockWatch) count, beyond Resize's n. Once the
// pool has ended (Close returned) it is 0.
func (p *Pool) Size() int {
	mustPool(p, "Size")
	select {
	case <-p.done:
		return 0
	default:
		return int(p.idle.n.Load())
	}
}

func (p *sched) resize(n int) error {
	if n < len(p.domains) || n > len(p.workers) {
		return fmt.Errorf("%w(%d): a pool of %s and %s runs between %d (one per node, for its strict work) and %d workers",
			errResize, n, plural(len(p.workers), "worker"), plural(len(p.domains), "node"), len(p.domains), len(p.workers))
	}
	p.resizeMu.Lock()
	defer p.resizeMu.Unlock()
	_, err := p.setRunningLocked(false, shares(n, p.domains))
	return err
}

// setRunningLocked makes base (nil: as it is) each domain's share and
// keeps running, in each domain, its share plus its stand-ins of its
// workers, the lowest IDs, retiring the others and bringing back retired
// ones (see above); it returns those brought back. A Resize changes
// nothing once Close has begun: the new share is taken under idle.mu,
// where Close's state is read. The block watch's stand-ins (standIns)
// also come while Close drains the pool, since a blocked task may wait
// for work queued behind it: a worker brought back then is counted live
// under idle.mu before the drain can be declared, as above. p.resizeMu
// must be held.
func (p *sched) setRunningLocked(standIns bool, base []int) ([]*Worker, error) {
	il := &p.idle
	var back, asleep []*Worker
	il.mu.Lock()
	if !p.mayRun(standIns) {
		il.mu.Unlock()
		return nil, ErrClosed
	}
	if base != nil {
		p.setBase(base)
	}
	for i, d := range p.domains {
		want := p.base[i] + int(p.standInsOf(d).now.Load())
		for k, w := range d.workers {
			switch {
			case k < want && il.retired[w.id]:
				back = append(back, w)
			case k < want:
				w.retire.Store(false) // marked, not yet retired: it runs on
			default:
				// Marked already or not, one asleep retires now: a mark
				// made while a caller held its seat may have found it
				// awake.
				w.retire.Store(true)
				if il.retireParkedLocked(w) {
					asleep = append(asleep, w)
				}
			}
		}
	}
	il.mu.Unlock()
	for _, w := range asleep {
		w.wake() // to end its goroutine
	}
	if len(back) == 0 {
		return nil, nil
	}
	// A retired worker's goroutine ends on its own (it is retired, and
	// woken if it was asleep); only then is the worker brought back, so
	// that no two goroutines ever hold it.
	for _, w := range back {
		w.alive.Wait()
	}
	il.mu.Lock()
	if !p.mayRun(standIns) {
		il.mu.Unlock()
		return nil, ErrClosed
	}
	for _, w := range back {
		w.retire.Store(false)
		il.restoreLocked(w)
	}
	p.live.Add(int32(len(back))) // before the drain can be declared: see above
	il.mu.Unlock()
	placed := make(chan error, len(back))
	for _, w := range back {
		w.alive.Add(1)
		go w.main(placed)
	}
	for range back {
		if err := <-placed; err != nil {
			p.noteDegraded(err)
		}
	}
	// Work queued meanwhile wakes them as a parker's re-check would.
	p.wakeForPending(back[0].domain, nil)
	return back, nil
}

// mayRun reports whether workers may be brought back now: while the pool
// runs, and for stand-ins also while Close drains it.
func (p *sched) mayRun(standIns bool) bool {
	st := p.state.Load()
	return st == running || standIns && st == closing
}
