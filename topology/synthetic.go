package topology

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrSpec reports a synthetic topology spec that cannot be used.
var ErrSpec = errors.New("bad topology spec")

// MaxSyntheticCPUs bounds the size of a synthetic topology.
const MaxSyntheticCPUs = 4096

// Synthetic builds a multi-node topology from a spec and maps it onto the
// CPUs that real may use, so that a one-node machine can run a several-node
// pool for real. Specs:
//
//	2x4      2 nodes of 4 CPUs (one core each)
//	2x4x2    2 nodes of 4 cores of 2 SMT threads
//	0-1;2-3  explicit: node 0 runs on OS CPUs 0-1, node 1 on 2-3 (cpulists)
//	1x4p+4e  1 node of 4 performance and 4 efficiency cores (hybrid)
//	2x2p+4ex2  2 nodes of 2 performance and 4 efficiency cores of 2 threads
//	1p+1e    one node of 1 performance and 1 efficiency core
//
// In a hybrid spec (Pp+Ee in the place of the cores, the node count
// optional) each node's performance cores come first, then its efficiency
// cores. The topology then has two kinds: rank 0 "efficiency", whose CPUs
// have Capacity 512, and rank 1 "performance", with 1024: an efficiency
// core does half the work of a performance core in the same time. Other
// specs have no kinds, and every CPU has Capacity 1024.
//
// In the NxC and NxCxT forms the synthetic CPUs are numbered 0..n-1 and
// synthetic CPU i runs on the i-th allowed CPU of real, wrapping around when
// real has fewer (CPU.OS names it). In the explicit form the CPUs are the
// OS CPUs themselves and must be allowed in real. Each node is one package
// with one shared last-level cache; distances are 10 within a node and 20
// between nodes.
//
// Synthetic nodes are not the kernel's, and no memory can be bound to
// them: each has no memory of its own (HasMemory false, MemoryBytes 0,
// not Allowed), and AllowedMems keeps real's memory nodes, the only ones
// the process may allocate from. A page a worker first touches lands on
// the real node of the OS CPU it runs on.
func Synthetic(spec string, real *Topology) (*Topology, error) {
	t, err := synthetic(strings.ToLower(strings.TrimSpace(spec)), real)
	if err != nil {
		return nil, fmt.Errorf("%w (a spec is nodes x CPUs such as 2x4, nodes x cores x threads such as 2x4x2, "+
			"OS CPUs per node such as 0-1;2-3, or performance and efficiency cores such as 1x4p+4e, 2x2p+4ex2 or 1p+1e)", err)
	}
	return t, nil
}

func synthetic(spec string, real *Topology) (*Topology, error) {
	if real == nil || real.Allowed.IsEmpty() {
		return nil, fmt.Errorf("%w %s: no allowed CPU to map it onto", ErrSpec, quote(spec))
	}
	var nodes [][]int // per node, the OS CPU of each synthetic CPU
	var ids [][]int   // per node, the synthetic CPU IDs
	threads := 1
	perf := -1 // performance cores per node in a hybrid spec
	switch {
	case strings.ContainsAny(spec, "pe"):
		n, p, e, thr, err := hybridSpec(spec)
		if err != nil {
			return nil, err
		}
		threads, perf = thr, p
		nodes, ids = shapeNodes(real, n, p+e, thr)
	case strings.ContainsAny(spec, ";,-") || !strings.Contains(spec, "x"):
		var err error
		if nodes, err = explicitSpec(spec, real); err != nil {
			return nil, err
		}
		ids = nodes
	default:
		n, cores, thr, err := shapeSpec(spec)
		if err != nil {
			return nil, err
		}
		threads = thr
		nodes, ids = shapeNodes(real, n, cores, thr)
	}

	t := &Topology{Source: "synthetic:" + spec, HasNodeDir: true, Machine: real.Machine}
	for _, n := range real.Nodes {
		if n.HasMemory && real.AllowedMems.Has(n.ID) {
			t.AllowedMems.Add(n.ID)
		}
	}
	d := &Distances{}
	for n := range nodes {
		var cpus CPUSet
		for k, id := range ids[n] {
			cpus.Add(id)
			t.CPUs = append(t.CPUs, CPU{
				ID: id, OS: nodes[n][k], Node: n, Package: n, Die: -1, Cluster: -1,
				Core: k / threads, LastLevelCache: n, Allowed: true, Kind: -1, Capacity: fullCapacity,
			})
		}
		t.Nodes = append(t.Nodes, Node{ID: n, CPUs: cpus, MemoryBytes: 0, HasCPUs: true, Locality: cpus})
		t.Packages = append(t.Packages, Package{ID: n, CPUs: cpus})
		t.Caches = append(t.Caches, Cache{Level: 3, Type: "Unified", SizeBytes: realLLC(real, nodes[n]), LineSize: real.Machine.CacheLine, CPUs: cpus})
		t.Online = t.Online.Or(cpus)
		d.Nodes = append(d.Nodes, n)
		row := make([]int, len(nodes))
		for m := range row {
			row[m] = 20
		}
		row[n] = 10
		d.Matrix = append(d.Matrix, row)
	}
	if len(nodes) > 1 {
		t.Distances = d
	}
	// Cores: consecutive groups of `threads` synthetic CPUs.
	for i := range t.CPUs {
		c := &t.CPUs[i]
		first := i - (i % threads)
		var sib CPUSet
		for j := first; j < first+threads && j < len(t.CPUs); j++ {
			sib.Add(t.CPUs[j].ID)
		}
		c.Siblings = sib
		if i == first {
			t.Cores = append(t.Cores, Core{Package: c.Package, ID: c.Core, CPUs: sib})
		}
	}
	t.Allowed = t.Online
	if perf >= 0 {
		t.setSyntheticKinds(perf * threads)
	}
	if len(real.Allowed.List()) < len(t.CPUs) {
		t.Degraded = append(t.Degraded, fmt.Sprintf("synthetic topology has %d CPUs on %d real ones: CPUs share OS CPUs %s", len(t.CPUs), real.Allowed.Len(), real.Allowed))
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

// shapeNodes lays out n nodes of cores x threads synthetic CPUs, numbered
// from 0, the i-th on the i-th allowed CPU of real (wrapping around).
func shapeNodes(real *Topology, n, cores, threads int) (nodes, ids [][]int) {
	allowed := real.Allowed.List()
	next := 0
	for range n {
		var os, id []int
		for range cores * threads {
			os = append(os, allowed[next%len(allowed)])
			id = append(id, next)
			next++
		}
		nodes, ids = append(nodes, os), append(ids, id)
	}
	return nodes, ids
}

// hybridSpec parses "[Nx]Pp+Ee[xT]": N nodes (1 if left out) of P
// performance and E efficiency cores of T threads (1 if left out), each
// count at least 1 and the CPUs at most MaxSyntheticCPUs.
func hybridSpec(spec string) (nodes, perf, eff, threads int, err error) {
	parts := strings.Split(spec, "x")
	at := slices.IndexFunc(parts, func(p string) bool { return strings.ContainsAny(p, "pe") })
	if len(parts) > 3 || at > 1 || len(parts)-at > 2 || strings.Count(spec, "p") != 1 || strings.Count(spec, "e") != 1 {
		return 0, 0, 0, 0, fmt.Errorf("%w %s: want [NODESx]Pp+Ee[xTHREADS], such as 1x4p+4e or 1p+1e", ErrSpec, quote(spec))
	}
	p, e, ok := strings.Cut(parts[at], "+")
	if !ok || !strings.HasSuffix(p, "p") || !strings.HasSuffix(e, "e") {
		return 0, 0, 0, 0, fmt.Errorf("%w %s: %s is not performance and efficiency cores such as 4p+4e", ErrSpec, quote(spec), quote(parts[at]))
	}
	counts := []string{"1", strings.TrimSuffix(p, "p"), strings.TrimSuffix(e, "e"), "1"}
	if at == 1 {
		counts[0] = parts[0]
	}
	if len(parts) > at+1 {
		counts[3] = parts[at+1]
	}
	nums := make([]int, len(counts))
	for i, c := range counts {
		if nums[i], err = positiveCount(spec, c); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	// CPUs = nodes x (perf + eff) x threads, checked factor by factor.
	cores := nums[1] + nums[2] // each at most MaxSyntheticCPUs: no overflow
	if cores > MaxSyntheticCPUs || nums[0] > MaxSyntheticCPUs/cores || nums[3] > MaxSyntheticCPUs/(nums[0]*cores) {
		return 0, 0, 0, 0, fmt.Errorf("%w %s: more than %d CPUs", ErrSpec, quote(spec), MaxSyntheticCPUs)
	}
	return nums[0], nums[1], nums[2], nums[3], nil
}

// positiveCount parses one count of a spec: a decimal number from 1 to
// MaxSyntheticCPUs.
func positiveCount(spec, p string) (int, error) {
	v, err := strconv.Atoi(p)
	switch {
	case errors.Is(err, strconv.ErrRange) && p[0] != '-', err == nil && v > MaxSyntheticCPUs:
		return 0, fmt.Errorf("%w %s: more than %d CPUs", ErrSpec, quote(spec), MaxSyntheticCPUs)
	case err != nil || v < 1 || p[0] == '+':
		return 0, fmt.Errorf("%w %s: %s is not a positive count", ErrSpec, quote(spec), quote(p))
	}
	return v, nil
}

// setSyntheticKinds makes the kinds of a hybrid spec: in each node, the
// first perfCPUs CPUs are performance CPUs, the rest efficiency CPUs.
func (t *Topology) setSyntheticKinds(perfCPUs int) {
	eff := Kind{Rank: 0, Capacity: efficiencyCapacity}
	perf := Kind{Rank: 1, Capacity: fullCapacity}
	for _, n := range t.Nodes {
		for k, id := range n.CPUs.List() {
			if k < perfCPUs {
				perf.CPUs.Add(id)
			} else {
				eff.CPUs.Add(id)
			}
		}
	}
	t.Kinds = []Kind{eff, perf}
	for i := range t.CPUs {
		c := &t.CPUs[i]
		c.Kind = 0
		if perf.CPUs.Has(c.ID) {
			c.Kind = 1
		}
		c.Capacity = t.Kinds[c.Kind].Capacity
	}
	t.nameKinds()
}

// shapeSpec parses "NxC" or "NxCxT". Each count and their product must
// stay within MaxSyntheticCPUs; the product is checked factor by factor,
// so that no count can make it wrap around.
func shapeSpec(spec string) (nodes, cores, threads int, err error) {
	parts := strings.Split(spec, "x")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, 0, fmt.Errorf("%w %s: want NODESxCPUS, NODESxCORESxTHREADS or a list like 0-1;2-3", ErrSpec, quote(spec))
	}
	nums := []int{1, 1, 1}
	total := 1
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		switch {
		case errors.Is(err, strconv.ErrRange) && p[0] != '-':
			return 0, 0, 0, fmt.Errorf("%w %s: more than %d CPUs", ErrSpec, quote(spec), MaxSyntheticCPUs)
		case err != nil || v < 1 || p[0] == '+':
			return 0, 0, 0, fmt.Errorf("%w %s: %s is not a positive count", ErrSpec, quote(spec), quote(p))
		case v > MaxSyntheticCPUs/total:
			return 0, 0, 0, fmt.Errorf("%w %s: more than %d CPUs", ErrSpec, quote(spec), MaxSyntheticCPUs)
		}
		nums[i] = v
		total *= v
	}
	return nums[0], nums[1], nums[2], nil
}

// explicitSpec parses "0-1;2-3": one cpulist of OS CPUs per node.
func explicitSpec(spec string, real *Topology) ([][]int, error) {
	var nodes [][]int
	var seen CPUSet
	for i, item := range strings.Split(spec, ";") {
		set, err := ParseCPUList([]byte(item))
		if err != nil {
			return nil, fmt.Errorf("%w %s: node %d: %w", ErrSpec, quote(spec), i, err)
		}
		if set.IsEmpty() {
			return nil, fmt.Errorf("%w %s: node %d has no CPU", ErrSpec, quote(spec), i)
		}
		if dup := set.And(seen); !dup.IsEmpty() {
			return nil, fmt.Errorf("%w %s: CPUs %s are in more than one node", ErrSpec, quote(spec), dup.short())
		}
		if bad := set.AndNot(real.Allowed); !bad.IsEmpty() {
			return nil, fmt.Errorf("%w %s: CPUs %s are not allowed here (allowed: %s)", ErrSpec, quote(spec), bad.short(), real.Allowed.short())
		}
		seen = seen.Or(set)
		nodes = append(nodes, set.List())
	}
	return nodes, nil
}

// realLLC is the size of the last-level cache of the real CPUs a
// synthetic node runs on (the first of them that has one; 0 if none
// does): a synthetic node inherits what its CPUs have rather than
// inventing a size.
func realLLC(real *Topology, osCPUs []int) int64 {
	for _, os := range osCPUs {
		var best Cache
		for _, c := range real.Caches {
			if c.CPUs.Has(os) && c.Level > best.Level && c.Type != "Instruction" {
				best = c
			}
		}
		if best.SizeBytes > 0 {
			return best.SizeBytes
		}
	}
	return 0
}
