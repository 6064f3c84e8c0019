package pool

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/numapool/numapool/launch"
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

// makePlan picks the topology, the nodes and the CPU of each worker.
func makePlan(c config) (*plan, error) {
	p := &plan{}
	t := c.topo
	if t == nil {
		t = topology.Discover()
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
		if err := checkThreads(workers, from, threadBounds()); err != nil {
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
