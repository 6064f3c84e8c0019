package topology

import (
	"fmt"
	"slices"
)

// Topology is the machine as this process may use it.
//
// Every CPU and node number is the operating system's (the N of cpuN and
// nodeN). CPUs lists online CPUs only; offline ones appear in Offline and
// nowhere else. Disallowed CPUs and nodes stay in every list, marked by
// Allowed, so that a report can show what the process is not given.
type Topology struct {
	// Source says where the topology came from: "sysfs:/" (this machine),
	// "sysfs:DIR" (a captured tree), "synthetic:SPEC" or "fallback".
	Source string

	Nodes    []Node    // NUMA nodes by increasing ID, memory-only ones included
	CPUs     []CPU     // online CPUs by increasing ID
	Packages []Package // sockets, by lowest CPU
	Cores    []Core    // physical cores, by lowest CPU
	Caches   []Cache   // distinct caches, by level, type, then lowest CPU
	Dies     []Group   // dies that differ from their package
	Clusters []Group   // CPU clusters that differ from every other level

	// Kinds are the CPU kinds (performance and efficiency cores) in the
	// order of hwloc's cpukinds: by increasing Rank when they are ranked.
	// nil when the kernel describes no CPU's kind. Fewer than two kinds
	// means every CPU is alike.
	Kinds []Kind

	// Distances is the node distance matrix (ACPI SLIT: 10 is local), or
	// nil when the kernel gives none usable (one node, a missing file, a
	// row with the wrong number of entries).
	Distances *Distances

	Online      CPUSet // online CPUs
	Offline     CPUSet // CPUs that exist (have a cpuN directory) but are offline
	Allowed     CPUSet // online CPUs this process may run on
	AllowedMems CPUSet // nodes this process may allocate from

	// HasNodeDir is false when the kernel has no devices/system/node (a
	// kernel built without NUMA); the topology then has one node 0.
	HasNodeDir bool

	Machine Machine // CPU model, caches and memory as cpuid and the OS see them

	// Degraded lists what discovery could not learn and what it assumed
	// instead (for instance the reason for the portable fallback). Empty
	// on a machine whose sysfs was read completely.
	Degraded []string
}

// Node is one NUMA node.
type Node struct {
	ID          int
	CPUs        CPUSet // online CPUs of the node (empty for a memory-only node)
	MemoryBytes int64  // MemTotal of the node; -1 if unknown
	HasCPUs     bool   // the kernel lists CPUs for the node
	HasMemory   bool   // the node has memory (MemTotal > 0, or has_memory says so)
	Allowed     bool   // the process may allocate from the node (cgroup/cpuset mems)

	// Locality is the set of CPUs close to the node: its own CPUs, or for a
	// memory-only node the CPUs of its HMAT initiators or of its unique
	// nearest node. Empty when there is no such guess.
	Locality CPUSet
}

// MemoryOnly reports whether the node has no CPU (HBM, CXL or GPU memory).
func (n Node) MemoryOnly() bool { return !n.HasCPUs }

// CPU is one online hardware thread (a PU in hwloc's words).
type CPU struct {
	ID       int
	OS       int    // the OS CPU to pin to: ID itself, except in synthetic topologies
	Node     int    // NUMA node, or -1 if the CPU belongs to none
	Package  int    // physical_package_id, -1 if the kernel does not say
	Die      int    // die_id, -1 if unknown
	Core     int    // core_id (unique only among the core's siblings, not in the package)
	Cluster  int    // cluster_id, -1 if unknown
	Siblings CPUSet // online SMT siblings, the CPU itself included
	// LastLevelCache indexes Topology.Caches: the highest-level data or
	// unified cache of this CPU (the L3 on most machines), -1 if none.
	LastLevelCache int
	Allowed        bool // in the process's affinity mask and cgroup

	// Kind indexes Topology.Kinds: the CPU's kind, -1 if it is in none.
	Kind int
	// Capacity is how much work the CPU does relative to the most capable
	// CPU of the topology, which has 1024 (the kernel's cpu_capacity
	// scale): its cpu_capacity when every online CPU has one, else its
	// kind's maximum frequency when every online CPU has one, else 1024
	// for every CPU. A loop split in proportion to it gives each CPU work
	// for the same time.
	Capacity int
}

// Package is one physical processor package (socket).
type Package struct {
	ID   int // physical_package_id, -1 if the kernel reports none
	CPUs CPUSet
}

// Core is one physical core: the online hardware threads that share it.
type Core struct {
	Package int // physical_package_id of the core's package, -1 if unknown
	ID      int // core_id
	CPUs    CPUSet
}

// Cache is one cache instance and the CPUs that share it.
type Cache struct {
	Level     int
	Type      string // "Data", "Instruction" or "Unified"
	SizeBytes int64
	LineSize  int
	CPUs      CPUSet
}

// Group is a set of CPUs with an OS index: a die or a cluster.
type Group struct {
	ID      int
	Package int // the package of a die; -1 for clusters
	CPUs    CPUSet
}

// Distances is the NUMA distance matrix: Matrix[i][j] is the distance from
// node Nodes[i] to node Nodes[j].
type Distances struct {
	Nodes  []int   `json:"node_os_indexes"`
	Matrix [][]int `json:"matrix"`
}

// Between returns the distance from node a to node b, and false if either
// node is not in the matrix.
func (d *Distances) Between(a, b int) (int, bool) {
	if d == nil {
		return 0, false
	}
	i, j := slices.Index(d.Nodes, a), slices.Index(d.Nodes, b)
	if i < 0 || j < 0 {
		return 0, false
	}
	return d.Matrix[i][j], true
}

// Machine describes the processor and memory as a whole.
type Machine struct {
	Vendor      string `json:"vendor"`       // e.g. "GenuineIntel" (cpuid, or /proc/cpuinfo for captures)
	Model       string `json:"model"`        // model name
	Family      int    `json:"family"`       // cpuid family number, 0 if unknown
	Number      int    `json:"model_number"` // cpuid model number, 0 if unknown
	CacheLine   int    `json:"cache_line"`   // cache line size in bytes, 0 if unknown
	L1D         int64  `json:"l1d_bytes"`    // per-core L1 data cache per cpuid, 0 if unknown
	L2          int64  `json:"l2_bytes"`     // L2 size per cpuid, 0 if unknown
	L3          int64  `json:"l3_bytes"`     // L3 size per cpuid, 0 if unknown
	MemoryBytes int64  `json:"memory_bytes"` // total memory (MemTotal), 0 if unknown
	Arch        string `json:"arch"`         // "x86_64", "aarch64", ... when known
}

// Node returns the node with the given ID.
func (t *Topology) Node(id int) (Node, bool) {
	i := slices.IndexFunc(t.Nodes, func(n Node) bool { return n.ID == id })
	if i < 0 {
		return Node{}, false
	}
	return t.Nodes[i], true
}

// CPU returns the online CPU with the given ID.
func (t *Topology) CPU(id int) (CPU, bool) {
	i, ok := indexCPU(t, id)
	if !ok {
		return CPU{}, false
	}
	return t.CPUs[i], true
}

// OSCPUs maps a set of this topology's CPUs to the OS CPUs they run on
// (the identity except for synthetic topologies), for pinning.
func (t *Topology) OSCPUs(set CPUSet) CPUSet {
	var out CPUSet
	for id := range set.All() {
		if c, ok := t.CPU(id); ok {
			out.Add(c.OS)
		}
	}
	return out
}

// ComputeNodes returns the nodes that have CPUs this process may run on,
// each with only its allowed CPUs: the nodes that get worker groups.
// Allowed CPUs that belong to no node (their node is offline, as on
// offline-cpu0-node0) form one more group with ID -1, so that no allowed
// CPU is left without a worker.
func (t *Topology) ComputeNodes() []Node {
	var out []Node
	var placed CPUSet
	for _, n := range t.Nodes {
		cpus := n.CPUs.And(t.Allowed)
		if cpus.IsEmpty() {
			continue
		}
		n.CPUs = cpus
		placed = placed.Or(cpus)
		out = append(out, n)
	}
	if orphans := t.Allowed.AndNot(placed); !orphans.IsEmpty() {
		out = append(out, Node{ID: -1, CPUs: orphans, HasCPUs: true, MemoryBytes: -1, Locality: orphans})
	}
	return out
}

// Check verifies the invariants the rest of numapool relies on; discovery
// calls it before returning. The error names the first violation.
func (t *Topology) Check() error {
	if len(t.CPUs) == 0 {
		return fmt.Errorf("%w: no online CPU", ErrTopology)
	}
	if t.Allowed.IsEmpty() {
		return fmt.Errorf("%w: no allowed CPU among online CPUs %s", ErrTopology, t.Online.short())
	}
	var seen CPUSet
	for _, n := range t.Nodes {
		if n.CPUs.Intersects(seen) {
			return fmt.Errorf("%w: node %d shares CPUs %s with another node", ErrTopology, n.ID, n.CPUs.And(seen).short())
		}
		seen = seen.Or(n.CPUs)
	}
	if !t.Allowed.IsSubsetOf(t.Online) {
		return fmt.Errorf("%w: allowed CPUs %s are not online", ErrTopology, t.Allowed.AndNot(t.Online).short())
	}
	return nil
}
