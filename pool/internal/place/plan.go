package place

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/numapool/numapool/launch"
	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// Plan is where a pool's workers go, decided before any starts: the
// topology, the nodes that get workers, and each worker's CPU.
type Plan struct {
	Topo     *topology.Topology
	Nodes    []NodePlan
	Degraded []string // what of the request could not be had
	Notes    []string // what a setting chose (the CPU kind), for Explain
	Claim    *Claim   // the workers' CPUs, held until the pool ends
	// ThreadsLeft is how many more threads the process may start, as New
	// counted, beyond the workers' and the runtime's headroom: the room
	// for spare threads (pool/spare.go). math.MaxInt when the workers
	// lock no thread or no limit applies.
	ThreadsLeft int
	// Start is how many of the planned workers start; the others wait
	// for a Resize (Request.Max).
	Start int
}

// NodePlan is one node's part of a Plan.
type NodePlan struct {
	Node topology.Node // with only its allowed CPUs
	CPUs []int         // one per worker: the topology CPU it is placed on
	Dist []int         // distances to the other nodes of the plan, by index
}

// Request is what a pool asks of the plan. Each From field is the
// prefix an error gives the value it is about when it came from the
// environment ("NUMAPOOL_NODES=\"0,2\": "), or "".
type Request struct {
	Topo    *topology.Topology // nil: discover the machine
	Spec    string             // a synthetic topology laid over Topo; "": none
	Nodes   []int              // the node IDs to keep; nil: all
	Kind    string             // the CPU kind to keep; "": all
	Workers int                // 0: min(the nodes' CPUs, GOMAXPROCS)
	// Max is how many workers the plan places, of which Workers (or its
	// default, at most Max) start (Plan.Start): the rest are for a
	// Resize to start later. 0: as many as start.
	Max     int
	Binding pin.Binding
	// Required fails the plan on any degradation (WithRequiredPlacement).
	Required bool
	// CPUs is the process's CPUs now; empty: the mask it started with.
	CPUs topology.CPUSet
	// MonitorThread: the pool is to start the machine monitor, whose
	// locked thread the thread limits count.
	MonitorThread bool

	SpecFrom, NodesFrom, KindFrom, WorkersFrom string
	MaxFrom                                    string // names Max's source: "WithMaxWorkers(4)", "NUMAPOOL_MAX_WORKERS=4"
}

// NewPlan picks the topology, the nodes and the CPU of each worker, and
// claims those CPUs (Claim) against the other pools of the process.
func NewPlan(r Request) (*Plan, error) {
	p := &Plan{ThreadsLeft: math.MaxInt}
	t := r.Topo
	if t == nil {
		t = topology.DiscoverWithin(r.CPUs)
	}
	if r.Spec != "" {
		st, note, err := synthetic(r.Spec, t)
		if err != nil {
			return nil, fmt.Errorf("pool: %s%w", r.SpecFrom, err)
		}
		if note != "" {
			p.Degraded = append(p.Degraded, note)
		}
		t = st
	}
	p.Topo = t
	p.Degraded = append(p.Degraded, t.Degraded...)

	nodes := t.ComputeNodes()
	if r.Nodes != nil {
		var kept []topology.Node
		for _, id := range r.Nodes {
			i := slices.IndexFunc(nodes, func(n topology.Node) bool { return n.ID == id })
			if i < 0 {
				msg := fmt.Sprintf("node %d has no CPU this process may use (nodes with allowed CPUs: %s)", id, nodeIDs(nodes))
				if r.Required {
					return nil, fmt.Errorf("pool: placement degraded (WithRequiredPlacement): %s", msg)
				}
				p.Degraded = append(p.Degraded, msg)
				continue
			}
			if !slices.ContainsFunc(kept, func(n topology.Node) bool { return n.ID == id }) {
				kept = append(kept, nodes[i])
			}
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("pool: %snone of nodes %v has CPUs this process may use (nodes with allowed CPUs: %s)", r.NodesFrom, r.Nodes, nodeIDs(nodes))
		}
		slices.SortFunc(kept, func(a, b topology.Node) int { return a.ID - b.ID })
		nodes = kept
	}
	if r.Kind != "" {
		var note string
		var err error
		if nodes, note, err = keepKind(t, nodes, r.Kind, r.KindFrom); err != nil {
			return nil, err
		}
		p.Notes = append(p.Notes, note)
	}

	total := 0
	for _, n := range nodes {
		total += n.CPUs.Len()
	}
	workers := r.Workers
	if workers == 0 {
		workers = min(total, runtime.GOMAXPROCS(0))
		if strings.HasPrefix(t.Source, "synthetic") {
			workers = total // the spec asks for these CPUs, even above GOMAXPROCS
		}
		if r.Max > 0 {
			workers = min(workers, r.Max)
		}
	}
	p.Start = workers
	if r.Max > 0 {
		if r.Max < workers {
			return nil, fmt.Errorf("pool: %s%s to start, above %s", r.WorkersFrom, plural(workers, "worker"), r.MaxFrom)
		}
		workers = r.Max // all are placed, and count against the thread limits: any may run
	}
	if r.Binding.LocksThread() {
		bounds := threadBounds()
		if r.MonitorThread {
			for i := range bounds {
				bounds[i].room--
				bounds[i].what += " and the machine monitor's"
			}
		}
		left, err := checkThreads(workers, r.WorkersFrom, bounds)
		if err != nil {
			return nil, err
		}
		p.ThreadsLeft = left
	}
	if r.Required && len(nodes) > workers {
		return nil, fmt.Errorf("pool: placement degraded (WithRequiredPlacement): %s cannot cover %d nodes", plural(workers, "worker"), len(nodes))
	}
	counts := apportion(workers, nodes)
	starting := apportion(p.Start, nodes) // beyond them, workers wait in reserve and take no CPU
	for i, n := range nodes {
		if counts[i] == 0 {
			p.Degraded = append(p.Degraded, fmt.Sprintf("node %d gets no worker (%s for %d nodes)", n.ID, plural(workers, "worker"), len(nodes)))
		} else if starting[i] > n.CPUs.Len() {
			p.Degraded = append(p.Degraded, fmt.Sprintf("node %d: %d workers on %s", n.ID, starting[i], plural(n.CPUs.Len(), "CPU")))
		}
	}
	if r.Required && len(p.Degraded) > 0 {
		return nil, fmt.Errorf("pool: placement degraded (WithRequiredPlacement): %s", strings.Join(p.Degraded, "; "))
	}
	p.Claim = &Claim{}
	cpuClaims.Lock()
	defer cpuClaims.Unlock()
	for i, n := range nodes {
		if counts[i] == 0 {
			continue
		}
		order := coresFirst(t, n.CPUs)
		cpus := assignCPUs(t, order, counts[i], p.Claim)
		p.Nodes = append(p.Nodes, NodePlan{Node: n, CPUs: cpus})
	}
	for i := range p.Nodes {
		row := make([]int, len(p.Nodes))
		for j := range p.Nodes {
			row[j] = Distance(t, p.Nodes[i].Node.ID, p.Nodes[j].Node.ID)
		}
		p.Nodes[i].Dist = row
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

// Distance is the distance between nodes a and b: the topology's, or
// 10 within a node and 20 between two where it has none.
func Distance(t *topology.Topology, a, b int) int {
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

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
