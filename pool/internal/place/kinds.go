package place

import (
	"fmt"
	"strings"

	"github.com/numapool/numapool/topology"
)

// The kind names a CPU kind setting may ask for (topology.Kind.Name): a
// hybrid machine's full-speed CPUs and its slower ones.
const (
	KindPerformance = "performance"
	KindEfficiency  = "efficiency"
)

// ParseKind checks a kind name, in any case, and returns it in lower case.
func ParseKind(s string) (string, error) {
	switch k := strings.ToLower(strings.TrimSpace(s)); k {
	case KindPerformance, KindEfficiency:
		return k, nil
	}
	return "", fmt.Errorf("unknown CPU kind %q (want %s or %s)", s, KindPerformance, KindEfficiency)
}

// The CPU kinds in a plan: WithCPUKind keeps a pool to one kind
// (keepKind), and a node's share of a loop is the sum of its workers'
// capacities (Capacity). The pool's side is in the pool's kinds.go.

// NamedKinds reports whether t names its kinds: two or more of them,
// ranked.
func NamedKinds(t *topology.Topology) bool {
	for _, k := range t.Kinds {
		if k.Name != "" {
			return true
		}
	}
	return false
}

// keepKind narrows each node to its CPUs of the named kind, dropping
// nodes left with none; note says what it did for Explain. It fails when
// no node keeps a CPU.
func keepKind(t *topology.Topology, nodes []topology.Node, kind, from string) (_ []topology.Node, note string, _ error) {
	if !NamedKinds(t) {
		return nodes, fmt.Sprintf("CPU kind %s: the CPUs are all alike (no kind is named performance or efficiency), so every CPU is kept", kind), nil
	}
	kindCPUs := t.KindCPUs(kind)
	var names []string
	for _, k := range t.Kinds {
		if k.Name != "" {
			names = append(names, fmt.Sprintf("%s CPUs %s", k.Name, k.CPUs))
		}
	}
	var kept []topology.Node
	var dropped []string
	for _, n := range nodes {
		cpus := n.CPUs.And(kindCPUs)
		if cpus.IsEmpty() {
			dropped = append(dropped, fmt.Sprint(n.ID))
			continue
		}
		n.CPUs = cpus
		kept = append(kept, n)
	}
	if len(kept) == 0 {
		return nil, "", fmt.Errorf("pool: %sCPU kind %s: no allowed CPU of that kind (%s; allowed %s)", from, kind, strings.Join(names, ", "), t.Allowed)
	}
	note = fmt.Sprintf("CPU kind %s: CPUs %s", kind, kindCPUs.And(t.Allowed))
	if len(dropped) > 0 {
		note += fmt.Sprintf("; nodes %s have none and get no worker", strings.Join(dropped, ","))
	}
	return kept, note, nil
}

// Capacity is the capacity of topology CPU id (topology.CPU.Capacity,
// 1024 for the most capable CPU); a CPU the topology gives none counts
// as full.
func Capacity(t *topology.Topology, id int) uint64 {
	if c, ok := t.CPU(id); ok && c.Capacity > 0 {
		return uint64(c.Capacity)
	}
	return 1024
}

// KindName is the name of topology CPU id's kind, "" if it has none.
func KindName(t *topology.Topology, id int) string {
	if k, ok := t.KindOf(id); ok {
		return k.Name
	}
	return ""
}
