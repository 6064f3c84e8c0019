package pool

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/launch"
	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// plan is where the workers go, decided before any starts.
type plan struct {
	topo     *topology.Topology
	domains  []domainPlan
	degraded []string
	notes    []string // what a setting chose, for Explain (the CPU kind)
	claim    *claim   // the workers' CPUs, held until the pool ends
}

type domainPlan struct {
	node    topology.Node // with only its allowed CPUs
	cpus    []int         // one per worker: the topology CPU it is placed on
	distRow []int         // distances to the other domains, by domain index
}

// makePlan picks the topology, the nodes and the CPU of each worker,
// inside the process's CPUs now (cpus; empty: the mask it started with).
// monitorThread says New is to start the machine monitor, whose locked
// thread the thread limits count.
func makePlan(c config, cpus topology.CPUSet, monitorThread bool) (*plan, error) {
	p := &plan{}
	t := c.topo
	if t == nil {
		t = topology.DiscoverWithin(cpus)
	}
	if c.spec != "" {
		st, note, err := synthetic(c.spec, t)
		if err != nil && c.specEnv {
			return nil, fmt.Errorf("pool: %s=%q: %w", envTopology, c.spec, err)
		}
		if err != nil {
			return nil, fmt.Errorf("pool: %w", err)
		}
		if note != "" {
			p.degraded = append(p.degraded, note)
		}
		t = st
	}
	p.topo = t
	p.degraded = append(p.degraded, t.Degraded...)

	nodes := t.ComputeNodes()
	if c.nodes != nil {
		var kept []topology.Node
		for _, id := range c.nodes {
			i := slices.IndexFunc(nodes, func(n topology.Node) bool { return n.ID == id })
			if i < 0 {
				msg := fmt.Sprintf("node %d has no CPU this process may use (nodes with allowed CPUs: %s)", id, nodeIDs(nodes))
				if c.required {
					return nil, fmt.Errorf("pool: placement degraded (WithRequiredPlacement): %s", msg)
				}
				p.degraded = append(p.degraded, msg)
				continue
			}
			if !slices.ContainsFunc(kept, func(n topology.Node) bool { return n.ID == id }) {
				kept = append(kept, nodes[i])
			}
		}
		if len(kept) == 0 {
			from := ""
			if c.nodesEnv != "" {
				from = fmt.Sprintf("%s=%q: ", envNodes, c.nodesEnv)
			}
			return nil, fmt.Errorf("pool: %snone of nodes %v has CPUs this process may use (nodes with allowed CPUs: %s)", from, c.nodes, nodeIDs(nodes))
		}
		slices.SortFunc(kept, func(a, b topology.Node) int { return a.ID - b.ID })
		nodes = kept
	}
	if c.kind != "" {
		from := ""
		if c.kindEnv != "" {
			from = fmt.Sprintf("%s=%q: ", envPlaces, c.kindEnv)
		}
		var note string
		var err error
		if nodes, note, err = keepKind(t, nodes, c.kind, from); err != nil {
			return nil, err
		}
		p.notes = append(p.notes, note)
	}

	total := 0
	for _, n := range nodes {
		total += n.CPUs.Len()
	}
	workers := c.workers
	if workers == 0 {
		workers = min(total, runtime.GOMAXPROCS(0))
		if strings.HasPrefix(t.Source, "synthetic") {
			workers = total // the spec asks for these CPUs, even above GOMAXPROCS
		}
	}
	if c.binding.LocksThread() {
		from := ""
		if c.workersEnv != "" {
			from = fmt.Sprintf("%s=%s: ", envNumWorkers, c.workersEnv)
		}
		bounds := threadBounds()
		if monitorThread {
			for i := range bounds {
				bounds[i].room--
				bounds[i].what += " and the machine monitor's"
			}
		}
		if err := checkThreads(workers, from, bounds); err != nil {
			return nil, err
		}
	}
	if c.required && len(nodes) > workers {
		return nil, fmt.Errorf("pool: placement degraded (WithRequiredPlacement): %d workers cannot cover %d nodes", workers, len(nodes))
	}
	counts := apportion(workers, nodes)
	for i, n := range nodes {
		if counts[i] == 0 {
			p.degraded = append(p.degraded, fmt.Sprintf("node %d gets no worker (%d workers for %d nodes)", n.ID, workers, len(nodes)))
		} else if counts[i] > n.CPUs.Len() {
			p.degraded = append(p.degraded, fmt.Sprintf("node %d: %d workers on %d CPUs", n.ID, counts[i], n.CPUs.Len()))
		}
	}
	if c.required && len(p.degraded) > 0 {
		return nil, fmt.Errorf("pool: placement degraded (WithRequiredPlacement): %s", strings.Join(p.degraded, "; "))
	}
	p.claim = &claim{}
	cpuClaims.Lock()
	defer cpuClaims.Unlock()
	for i, n := range nodes {
		if counts[i] == 0 {
			continue
		}
		order := coresFirst(t, n.CPUs)
		cpus := assignCPUs(t, order, counts[i], p.claim)
		p.domains = append(p.domains, domainPlan{node: n, cpus: cpus})
	}
	for i := range p.domains {
		row := make([]int, len(p.domains))
		for j := range p.domains {
			row[j] = distance(t, p.domains[i].node.ID, p.domains[j].node.ID)
		}
		p.domains[i].distRow = row
	}
	return p, nil
}

// synthetic builds the topology a spec describes. The spec describes the
// machine: when a launcher, taskset or a cgroup gave the process only
// some of the online CPUs, the spec is laid over all of them and the
// process keeps the synthetic CPUs on its own (launch.Synthetic), so a
// rank bound to the CPUs of one synthetic node gets that node alone.
// Otherwise, or when that leaves the process no CPU, the spec is laid
// over the allowed CPUs (topology.Synthetic), wrapping around them.
func synthetic(spec string, t *topology.Topology) (_ *topology.Topology, note string, _ error) {
	if !t.Online.IsEmpty() && !t.Allowed.Equal(t.Online) {
		st, err := launch.Synthetic(spec, t)
		if err == nil {
			return st, "", nil
		}
		note = fmt.Sprintf("synthetic topology %q laid over the allowed CPUs %s, not the machine's: %v", spec, t.Allowed, err)
	}
	st, err := topology.Synthetic(spec, t)
	return st, note, err
}

// apportion splits n workers over nodes in proportion to their CPUs
// (largest remainder), giving every node one first when there are enough.
func apportion(n int, nodes []topology.Node) []int {
	counts := make([]int, len(nodes))
	total := 0
	for _, nd := range nodes {
		total += nd.CPUs.Len()
	}
	if n >= len(nodes) {
		for i := range counts {
			counts[i] = 1
		}
		n -= len(nodes)
		total -= len(nodes)
	}
	type rem struct{ i, r int }
	var rems []rem
	given := 0
	for i, nd := range nodes {
		share := nd.CPUs.Len()
		if counts[i] == 1 {
			share--
		}
		if total > 0 {
			counts[i] += n * share / total
			given += n * share / total
			rems = append(rems, rem{i, n * share % total})
		}
	}
	if total <= 0 {
		for i := range n {
			counts[i%len(counts)]++
		}
		return counts
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return b.r - a.r })
	for k := 0; given < n; k++ {
		counts[rems[k%len(rems)].i]++
		given++
	}
	return counts
}

// coresFirst orders CPUs so that every core gets a worker before any
// core gets a second one (SMT siblings last).
func coresFirst(t *topology.Topology, cpus topology.CPUSet) []int {
	type slot struct{ cpu, rank int }
	var slots []slot
	for c := range cpus.All() {
		rank := 0
		if cpu, ok := t.CPU(c); ok {
			for s := range cpu.Siblings.All() {
				if s == c {
					break
				}
				if cpus.Has(s) {
					rank++
				}
			}
		}
		slots = append(slots, slot{c, rank})
	}
	slices.SortStableFunc(slots, func(a, b slot) int { return a.rank - b.rank })
	out := make([]int, len(slots))
	for i, s := range slots {
		out[i] = s.cpu
	}
	return out
}

func distance(t *topology.Topology, a, b int) int {
	if d, ok := t.Distances.Between(a, b); ok {
		return d
	}
	if a == b {
		return 10
	}
	return 20
}

func nodeIDs(nodes []topology.Node) string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = fmt.Sprint(n.ID)
	}
	return strings.Join(ids, ",")
}

func singleton(cpu int) topology.CPUSet { return topology.NewCPUSet(cpu) }

// placement is where a worker's thread is bound now, which may differ
// from the plan once the machine changed (monitor.go).
type placement struct {
	// now is the CPUs the worker is bound to and why they are not its
	// planned ones; nil until its first thread is bound, and for a worker
	// that locks no thread. Written under the worker's masking flag (or,
	// the first time, by bind before the thread's ID is published).
	now atomic.Pointer[placeNow]
	// Under the masking flag:
	set     topology.CPUSet // the mask the pool last set on the thread
	outside topology.CPUSet // a mask set from outside, honoured; empty: none
	seenAt  uint64          // the monitor's look that found outside
	gen     uint64          // the generation last taken up (follow); owner only
}

// placeNow is a worker's placement as Stats and Explain show it.
type placeNow struct {
	cpus    topology.CPUSet // OS CPUs
	why     string          // why they are not the planned ones; "" when they are
	outside bool            // set from outside and honoured
}

// placed returns the CPUs the worker's thread is to be bound to now
// (empty: none known).
func (w *Worker) placed() topology.CPUSet {
	if n := w.place.now.Load(); n != nil {
		return n.cpus
	}
	return topology.CPUSet{}
}

// lockMask takes the worker's masking flag, which every change of the
// thread's mask by the pool holds, so that the recorded mask
// (placement.set) is the thread's unless someone else set it.
func (w *Worker) lockMask() {
	for !w.masking.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}

func (w *Worker) unlockMask() { w.masking.Store(false) }

// setNodeCPUs publishes the CPUs a spreading worker and its wakers choose
// among: to, when it has several (spread.go).
func (w *Worker) setNodeCPUs(to topology.CPUSet) {
	if to.Len() > 1 {
		w.nodeCPUs.Store(&to)
	} else {
		w.nodeCPUs.Store(nil)
	}
}

// within returns the part of cpus the process may run on now: a mask the
// pool sets never holds a CPU outside it. All of the process's CPUs when
// none of cpus is left; cpus itself when the process's are unknown.
func (p *sched) within(cpus topology.CPUSet) topology.CPUSet {
	now := p.cpusNow()
	switch x := cpus.And(now); {
	case now.IsEmpty():
		return cpus
	case x.IsEmpty():
		return now
	default:
		return x
	}
}

// placeWithin is where worker w goes when the process has cpus: on its
// planned CPUs that are left; if none, on the rest of its node; if its
// node has none, on the nearest node of the pool that has some; and
// with no node of the pool left, on any of cpus. why says which, and is
// empty for the first.
func (p *sched) placeWithin(w *Worker, cpus topology.CPUSet) (topology.CPUSet, string) {
	if to := w.bound.And(cpus); !to.IsEmpty() {
		return to, ""
	}
	if to := p.topo.OSCPUs(w.domain.node.CPUs).And(cpus); !to.IsEmpty() {
		return to, fmt.Sprintf("its CPUs %s are gone: on the rest of node %d", w.bound, w.Node())
	}
	order := make([]*domain, 0, len(p.domains))
	for _, g := range p.domains {
		if g != w.domain {
			order = append(order, g)
		}
	}
	slices.SortStableFunc(order, func(a, b *domain) int { return w.domain.dist[a.index] - w.domain.dist[b.index] })
	for _, g := range order {
		if to := p.topo.OSCPUs(g.node.CPUs).And(cpus); !to.IsEmpty() {
			return to, fmt.Sprintf("node %d has none of the process's CPUs: on node %d, the nearest that has", w.Node(), g.node.ID)
		}
	}
	return cpus, fmt.Sprintf("no node of the pool has a CPU of the process's: on CPUs %s", cpus)
}

// replan re-binds every bound worker inside st.cpus (placeWithin),
// by thread ID, busy or parked; mask says the reference thread's mask
// changed, which rewrote every thread and ends what was honoured of
// masks set from outside. It returns what moved, for the log. Monitor
// only.
func (p *sched) replan(st *machineState, mask bool) string {
	var moved []string
	for _, w := range p.workers {
		if w.place.now.Load() == nil {
			continue
		}
		to, why := p.placeWithin(w, st.cpus)
		w.lockMask()
		if mask || w.place.seenAt+1 >= p.looks {
			// taskset -a -p rewrote every thread; or the look before this
			// one found the mask, and it may have been this change under
			// way (a cpuset change rewrites the threads' masks too).
			w.place.outside = topology.CPUSet{}
		}
		outside := false
		if !w.place.outside.IsEmpty() {
			if x := to.And(w.place.outside); !x.IsEmpty() {
				to, why, outside = x, fmt.Sprintf("its thread was set to CPUs %s from outside: honoured", w.place.outside), true
			} else {
				w.place.outside = topology.CPUSet{} // none of its CPUs is left
			}
		}
		prev := w.place.now.Load()
		w.place.now.Store(&placeNow{cpus: to, why: why, outside: outside})
		w.setNodeCPUs(to)
		// Set even when to is the mask the pool set last: taskset -a -p,
		// a cpuset change or hotplug may have rewritten it.
		if tid := int(w.tid.Load()); tid > 0 && pin.Aim(tid, to) == nil {
			w.place.set = to
		}
		w.unlockMask()
		if !prev.cpus.Equal(to) {
			m := fmt.Sprintf("worker %d %s -> %s", w.id, prev.cpus, to)
			if why != "" {
				m += " (" + why + ")"
			}
			moved = append(moved, m)
		}
	}
	if len(moved) == 0 {
		return "; no worker moved"
	}
	return "; " + strings.Join(moved, "; ")
}

// checkMasks reads each bound worker's thread mask and honours one that
// someone else set (see monitor.go). Monitor only.
func (p *sched) checkMasks(st *machineState) {
	p.looks++
	for _, w := range p.workers {
		if w.place.now.Load() == nil || !w.masking.CompareAndSwap(false, true) {
			continue // unbound, or the pool is setting its mask
		}
		note := ""
		if tid := int(w.tid.Load()); tid > 0 && !w.place.set.IsEmpty() {
			expect := w.place.set.And(st.cpus)
			if expect.IsEmpty() {
				expect = w.place.set
			}
			mask, err := topology.ThreadAffinity(tid)
			to, why := p.placeWithin(w, st.cpus)
			if err == nil && !mask.Equal(expect) && !mask.Equal(to) && expect.IsSubsetOf(mask) && mask.Equal(st.cpus) {
				// Widened to every CPU of the process: what the kernel
				// does to a thread whose CPUs all went offline, even if
				// they were back before this look saw them go. Nobody
				// narrowed it: bind it where the pool would.
				if pin.Aim(tid, to) == nil {
					w.place.outside, w.place.set = topology.CPUSet{}, to
					w.place.now.Store(&placeNow{cpus: to, why: why})
					w.setNodeCPUs(to)
				}
			} else if err == nil && !mask.Equal(expect) && mask.Equal(to) {
				// Set back to where the pool would put it: nothing to honour.
				w.place.outside, w.place.set = topology.CPUSet{}, mask
				w.place.now.Store(&placeNow{cpus: to, why: why})
				w.setNodeCPUs(to)
			} else if err == nil && !mask.Equal(expect) {
				w.place.outside, w.place.set, w.place.seenAt = mask, mask, p.looks
				why := fmt.Sprintf("its thread %d was set to CPUs %s from outside (the pool had set %s): honoured", tid, mask, expect)
				w.place.now.Store(&placeNow{cpus: mask, why: why, outside: true})
				w.setNodeCPUs(mask.And(st.cpus))
				note = fmt.Sprintf("worker %d: %s", w.id, why)
			}
		}
		w.unlockMask()
		if note != "" {
			p.logReplan(fmt.Sprintf("%s after start: %s", time.Since(p.started).Round(time.Millisecond), note))
		}
	}
}

// boundNow returns the mask of the worker's thread, read from the kernel
// by its ID; where it cannot be read, the CPUs the pool bound it to.
// Empty for a worker that locks no thread.
func (w *Worker) boundNow() topology.CPUSet {
	set := w.placed()
	if set.IsEmpty() {
		return topology.CPUSet{}
	}
	if tid := int(w.tid.Load()); tid > 0 {
		if mask, err := topology.ThreadAffinity(tid); err == nil {
			return mask
		}
	}
	return set
}

// ownsMask reports whether thread tid (0: the calling thread) has the
// mask the pool last set on the worker's thread, as far as the process's
// CPUs keep it: a worker and its wakers set a mask only then, and leave
// one someone else set for the monitor to honour. Under masking.
func (w *Worker) ownsMask(tid int) bool {
	mask, err := topology.ThreadAffinity(tid)
	return err == nil && mask.Equal(w.pool.within(w.place.set))
}
