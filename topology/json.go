package topology

// SchemaVersion names the JSON layout of Summary. Version 2 is version 1,
// the layout of the hwloc-derived fixtures' expected.json
// (testdata/fixtures/SCHEMA.md) that lets numapool's reading of a machine
// be compared with hwloc's field by field (testdata/fixtures/compare.py),
// plus the CPU kinds: cpu_kinds at the top and in each node.
const SchemaVersion = "numa-topology-fixture/v2"

// Summary is the JSON form of a Topology.
type Summary struct {
	Schema           string         `json:"schema"`
	Name             string         `json:"name"`
	Source           string         `json:"source"`
	SysfsHasNodeDir  bool           `json:"sysfs_has_node_dir"`
	PUCount          int            `json:"pu_count"`
	OnlineCPUs       CPUSet         `json:"online_cpus"`
	OfflineCPUs      CPUSet         `json:"offline_cpus"`
	AllowedCPUs      CPUSet         `json:"allowed_cpus"`
	NUMANodeCount    int            `json:"numa_node_count"`
	NUMANodes        []SummaryNode  `json:"numa_nodes"`
	AllowedNUMANodes CPUSet         `json:"allowed_numa_nodes"`
	PackageCount     int            `json:"package_count"`
	Packages         []SummaryPkg   `json:"packages"`
	CoreCount        int            `json:"core_count"`
	Cores            []SummaryCore  `json:"cores"`
	Distances        *Distances     `json:"distances"`
	Optional         SummaryOptions `json:"optional"`
	CPUKinds         []SummaryKind  `json:"cpu_kinds"`
	Machine          string         `json:"machine"`
	Processor        Machine        `json:"processor"`
	Degraded         []string       `json:"degraded"`
}

// SummaryNode is one entry of numa_nodes.
type SummaryNode struct {
	OSIndex      int    `json:"os_index"`
	CPUs         CPUSet `json:"cpus"`
	MemoryOnly   bool   `json:"memory_only"`
	LocalityCPUs CPUSet `json:"locality_cpus"`
	MemoryBytes  *int64 `json:"memory_bytes"`
	Allowed      bool   `json:"allowed"`
	// Kinds are the node's CPUs of each kind, by increasing kind index.
	Kinds []SummaryNodeKind `json:"cpu_kinds"`
}

// SummaryKind is one entry of cpu_kinds, a Kind; 0 is unknown in the
// frequencies and linux_capacity.
type SummaryKind struct {
	Rank          int    `json:"rank"` // -1 when the kinds are not ordered
	Name          string `json:"name"`
	CPUs          CPUSet `json:"cpus"`
	MaxMHz        int    `json:"frequency_max_mhz"`
	BaseMHz       int    `json:"frequency_base_mhz"`
	LinuxCapacity int    `json:"linux_capacity"`
	CoreType      string `json:"core_type"`
	Capacity      int    `json:"capacity"`
}

// SummaryNodeKind is one entry of a node's cpu_kinds: the node's CPUs of
// the kind whose index in cpu_kinds is Kind.
type SummaryNodeKind struct {
	Kind int    `json:"kind"`
	Name string `json:"name"`
	CPUs CPUSet `json:"cpus"`
}

// SummaryPkg is one entry of packages; OSIndex is null when the kernel
// reports no package number.
type SummaryPkg struct {
	OSIndex *int   `json:"os_index"`
	CPUs    CPUSet `json:"cpus"`
}

// SummaryCore is one entry of cores.
type SummaryCore struct {
	Package *int   `json:"package"`
	CoreID  int    `json:"core_id"`
	PUs     CPUSet `json:"pus"`
}

// SummaryOptions holds the informational sections.
type SummaryOptions struct {
	Dies     []SummaryGroup `json:"dies"`
	Clusters []SummaryGroup `json:"clusters"`
	Caches   []SummaryCache `json:"caches"`
}

// SummaryGroup is a die or a cluster.
type SummaryGroup struct {
	Package *int   `json:"package,omitempty"`
	OSIndex int    `json:"os_index"`
	CPUs    CPUSet `json:"cpus"`
}

// SummaryCache is one cache instance.
type SummaryCache struct {
	Level     int    `json:"level"`
	Type      string `json:"type"`
	SizeBytes int64  `json:"size_bytes"`
	LineSize  int    `json:"line_size"`
	CPUs      CPUSet `json:"cpus"`
}

func optionalIndex(id int) *int {
	if id < 0 {
		return nil
	}
	return &id
}

// Summary returns t in the fixture schema; name is the "name" field.
func (t *Topology) Summary(name string) Summary {
	s := Summary{
		Schema:           SchemaVersion,
		Name:             name,
		Source:           t.Source,
		SysfsHasNodeDir:  t.HasNodeDir,
		PUCount:          len(t.CPUs),
		OnlineCPUs:       t.Online,
		OfflineCPUs:      t.Offline,
		AllowedCPUs:      t.Allowed,
		NUMANodeCount:    len(t.Nodes),
		NUMANodes:        []SummaryNode{},
		AllowedNUMANodes: t.AllowedMems,
		PackageCount:     len(t.Packages),
		Packages:         []SummaryPkg{},
		CoreCount:        len(t.Cores),
		Cores:            []SummaryCore{},
		Distances:        t.Distances,
		Optional:         SummaryOptions{Dies: []SummaryGroup{}, Clusters: []SummaryGroup{}, Caches: []SummaryCache{}},
		Machine:          t.Machine.Model,
		Processor:        t.Machine,
		Degraded:         append([]string{}, t.Degraded...),
		CPUKinds:         []SummaryKind{},
	}
	for _, k := range t.Kinds {
		s.CPUKinds = append(s.CPUKinds, SummaryKind(k))
	}
	for _, n := range t.Nodes {
		sn := SummaryNode{OSIndex: n.ID, CPUs: n.CPUs, MemoryOnly: n.MemoryOnly(), LocalityCPUs: n.Locality, Allowed: n.Allowed,
			Kinds: []SummaryNodeKind{}}
		for i, k := range t.Kinds {
			if cpus := k.CPUs.And(n.CPUs); !cpus.IsEmpty() {
				sn.Kinds = append(sn.Kinds, SummaryNodeKind{Kind: i, Name: k.Name, CPUs: cpus})
			}
		}
		if n.MemoryBytes >= 0 {
			sn.MemoryBytes = &n.MemoryBytes
		}
		s.NUMANodes = append(s.NUMANodes, sn)
	}
	for _, p := range t.Packages {
		s.Packages = append(s.Packages, SummaryPkg{OSIndex: optionalIndex(p.ID), CPUs: p.CPUs})
	}
	for _, c := range t.Cores {
		s.Cores = append(s.Cores, SummaryCore{Package: optionalIndex(c.Package), CoreID: c.ID, PUs: c.CPUs})
	}
	for _, d := range t.Dies {
		s.Optional.Dies = append(s.Optional.Dies, SummaryGroup{Package: optionalIndex(d.Package), OSIndex: d.ID, CPUs: d.CPUs})
	}
	for _, c := range t.Clusters {
		s.Optional.Clusters = append(s.Optional.Clusters, SummaryGroup{OSIndex: c.ID, CPUs: c.CPUs})
	}
	for _, c := range t.Caches {
		s.Optional.Caches = append(s.Optional.Caches, SummaryCache(c))
	}
	return s
}
