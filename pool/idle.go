package pool

import (
	"sync"
	"sync/atomic"
)

// idle is the protocol by which workers search for work, park and are
// woken (Tokio's idle.rs, with NUMA-aware waking):
//
//   - at most half the workers search at once (tryStartSearching);
//   - a searcher that finds work and was the last one searching wakes
//     another worker, so that work keeps spreading;
//   - work arriving wakes a parked worker only when nobody searches,
//     preferring a sleeper of the node that received the work, then the
//     nearest nodes;
//   - a worker registers as parked before it sleeps; if it was the last
//     searcher it then re-checks every queue and wakes a worker if work
//     appeared, which closes the window between its last look and its
//     sleep;
//   - waking is idempotent: the token channel holds one wake-up, so a
//     wake-up sent before the worker blocks is not lost.
//
// The counters are read without the lock on the hot path; the sleepers'
// lists change only under mu.
type idle struct {
	p         *sched
	searching atomic.Int32 // workers searching
	unparked  atomic.Int32 // workers not parked
	n         int32

	mu       sync.Mutex
	sleepers [][]*Worker // per group, a stack of parked workers
	parked   []bool      // per worker
	nearest  [][]int     // per group, the groups by distance, itself first
}

func (id *idle) init(p *sched) {
	id.p = p
	id.n = int32(len(p.workers))
	id.unparked.Store(id.n)
	id.sleepers = make([][]*Worker, len(p.groups))
	id.parked = make([]bool, len(p.workers))
	for _, g := range p.groups {
		order := make([]int, 0, len(p.groups))
		order = append(order, g.index)
		for d := range p.groups {
			if d != g.index {
				order = append(order, d)
			}
		}
		// stable by distance, the group itself (distance 10) first
		for i := 1; i < len(order); i++ {
			for j := i; j > 1 && g.dist[order[j]] < g.dist[order[j-1]]; j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
		id.nearest = append(id.nearest, order)
	}
}

// tryStartSearching admits a worker to search unless half the workers
// already do. The check and the increment are not one step, so now and
// then one more searcher gets in: the limit is an optimisation, not an
// invariant.
func (id *idle) tryStartSearching(g *group) bool {
	if 2*id.searching.Load() >= id.n {
		return false
	}
	id.searching.Add(1)
	g.searching.Add(1)
	return true
}

// stopSearching ends a search; it reports whether the caller was the last
// searcher.
func (id *idle) stopSearching(g *group) bool {
	g.searching.Add(-1)
	return id.searching.Add(-1) == 0
}

// notify wakes a parked worker for new work in group g, unless a worker
// is searching that will find it: one of g's own, or, when g has no
// sleeper to wake, any. A searcher of another node would take the work
// across nodes, so it does not stop g's sleepers from being woken.
func (id *idle) notify(g int) {
	grp := id.p.groups[g]
	if grp.searching.Load() != 0 || id.unparked.Load() >= id.n {
		return
	}
	if id.searching.Load() != 0 && grp.sleeping.Load() == 0 {
		return
	}
	id.mu.Lock()
	if grp.searching.Load() != 0 || id.unparked.Load() >= id.n ||
		(id.searching.Load() != 0 && len(id.sleepers[g]) == 0) {
		id.mu.Unlock()
		return
	}
	var w *Worker
	for _, o := range id.nearest[g] {
		if s := id.sleepers[o]; len(s) > 0 {
			w = s[len(s)-1]
			id.sleepers[o] = s[:len(s)-1]
			id.p.groups[o].sleeping.Add(-1)
			break
		}
	}
	if w == nil {
		id.mu.Unlock()
		return
	}
	id.parked[w.id] = false
	// The woken worker starts out searching (Tokio does the same), so
	// that more notifications do not wake a crowd.
	id.searching.Add(1)
	w.group.searching.Add(1)
	id.unparked.Add(1)
	id.mu.Unlock()
	w.wake()
}

// toParked registers w as parked. It reports whether w was the last
// searcher, which must then re-check every queue.
func (id *idle) toParked(w *Worker, searching bool) (lastSearcher, allParked bool) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if searching {
		w.group.searching.Add(-1)
		lastSearcher = id.searching.Add(-1) == 0
	}
	id.parked[w.id] = true
	id.sleepers[w.group.index] = append(id.sleepers[w.group.index], w)
	w.group.sleeping.Add(1)
	return lastSearcher, id.unparked.Add(-1) == 0
}

// isParked reports whether w is still registered as parked (a wake-up
// that did not come from notify, e.g. a stale token).
func (id *idle) isParked(w *Worker) bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.parked[w.id]
}

// unparkSelf takes w off the sleepers' lists when it leaves park on its own
// (the pool is stopping).
func (id *idle) unparkSelf(w *Worker) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if !id.parked[w.id] {
		return
	}
	id.parked[w.id] = false
	s := id.sleepers[w.group.index]
	for i, o := range s {
		if o == w {
			id.sleepers[w.group.index] = append(s[:i], s[i+1:]...)
			w.group.sleeping.Add(-1)
			break
		}
	}
	id.unparked.Add(1)
}

// wakeAll wakes every worker (Close, Shutdown).
func (id *idle) wakeAll() {
	for _, w := range id.p.workers {
		w.wake()
	}
}
