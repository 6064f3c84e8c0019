package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/numapool/numapool/topology"
)

// writeReport prints the topology for people: the numactl --hardware view
// (nodes, sizes, distances), then packages, caches and cores as lstopo
// shows them, then what this process may use and whether placement works.
func writeReport(w io.Writer, t *topology.Topology, pl *placement) {
	m := t.Machine
	fmt.Fprintf(w, "source:    %s\n", t.Source)
	if m.Model != "" || m.Vendor != "" {
		fmt.Fprintf(w, "processor: %s", strings.TrimSpace(m.Model))
		if m.Vendor != "" {
			fmt.Fprintf(w, " (%s", m.Vendor)
			if m.Family != 0 {
				fmt.Fprintf(w, ", family %d model %d", m.Family, m.Number)
			}
			fmt.Fprint(w, ")")
		}
		fmt.Fprintln(w)
	}
	if m.CacheLine > 0 || m.L3 > 0 {
		fmt.Fprintf(w, "caches:    line %d B, L1d %s, L2 %s, L3 %s (cpuid)\n", m.CacheLine, size(m.L1D), size(m.L2), size(m.L3))
	}
	fmt.Fprintf(w, "machine:   %s online (%s)", plural(len(t.CPUs), "CPU"), t.Online)
	if !t.Offline.IsEmpty() {
		fmt.Fprintf(w, ", offline %s", t.Offline)
	}
	fmt.Fprintf(w, "; %s, %s", plural(len(t.Packages), "package"), plural(len(t.Cores), "core"))
	if m.MemoryBytes > 0 {
		fmt.Fprintf(w, "; %s memory", size(m.MemoryBytes))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "allowed:   CPUs %s; memory nodes %s\n\n", t.Allowed, t.AllowedMems)

	ids := make([]string, len(t.Nodes))
	for i, n := range t.Nodes {
		ids[i] = fmt.Sprint(n.ID)
	}
	// numactl --hardware's line word for word, "1 nodes" too, so that
	// whatever reads numactl's output reads this.
	fmt.Fprintf(w, "available: %d nodes (%s)\n", len(t.Nodes), strings.Join(ids, ","))
	for _, n := range t.Nodes {
		cpus := strings.Fields(strings.Trim(fmt.Sprint(n.CPUs.List()), "[]"))
		fmt.Fprintf(w, "node %d cpus: %s", n.ID, strings.Join(cpus, " "))
		switch {
		case n.MemoryOnly() && !n.Locality.IsEmpty():
			fmt.Fprintf(w, "(memory only, near CPUs %s)", n.Locality)
		case n.MemoryOnly():
			fmt.Fprint(w, "(memory only)")
		}
		if !n.Allowed && n.HasMemory { // a node without memory has none to allow
			fmt.Fprint(w, "  [memory not allowed]")
		}
		if nc := n.CPUs.And(t.Allowed); nc.Len() != n.CPUs.Len() {
			fmt.Fprintf(w, "  [allowed CPUs: %s]", orNone(nc.String()))
		}
		fmt.Fprintln(w)
		root, onSysfs := strings.CutPrefix(t.Source, "sysfs:")
		switch {
		case strings.HasPrefix(t.Source, "synthetic:"):
			fmt.Fprintf(w, "node %d size: none of its own (a synthetic node; see memory below)\n", n.ID)
		case n.MemoryBytes >= 0:
			fmt.Fprintf(w, "node %d size: %d MB\n", n.ID, n.MemoryBytes>>20)
		default:
			fmt.Fprintf(w, "node %d size: unknown\n", n.ID)
		}
		if free, ok := nodeFree(root, n.ID); onSysfs && ok {
			fmt.Fprintf(w, "node %d free: %d MB\n", n.ID, free>>20)
		}
	}
	d := t.Distances
	if root, ok := strings.CutPrefix(t.Source, "sysfs:"); ok && d == nil && len(t.Nodes) == 1 {
		d = oneNodeDistance(root, t.Nodes[0].ID)
	}
	if d != nil {
		fmt.Fprintln(w, "node distances:")
		tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "node\t")
		for _, id := range d.Nodes {
			fmt.Fprintf(tw, "%d\t", id)
		}
		fmt.Fprintln(tw)
		for i, id := range d.Nodes {
			fmt.Fprintf(tw, "%d:\t", id)
			for _, v := range d.Matrix[i] {
				fmt.Fprintf(tw, "%d\t", v)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	} else {
		fmt.Fprintln(w, "node distances: none reported")
	}

	fmt.Fprintln(w)
	writeTree(w, t)
	writeKinds(w, t)

	if pl != nil {
		fmt.Fprintf(w, "\npinning:       %s\nmemory policy: %s\n", pl.Pinning, pl.MemoryPolicy)
	}
	if len(t.Degraded) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, d := range t.Degraded {
			fmt.Fprintf(w, "  - %s\n", d)
		}
	}
}

// writeTree prints packages, their last-level caches and cores:
//
//	package 0: CPUs 0-7
//	  L3 32 MiB: CPUs 0-7
//	    core 0: 0,4   core 1: 1,5 ...
func writeTree(w io.Writer, t *topology.Topology) {
	for _, p := range t.Packages {
		id := "?"
		if p.ID >= 0 {
			id = fmt.Sprint(p.ID)
		}
		fmt.Fprintf(w, "package %s: CPUs %s\n", id, p.CPUs)
		groups := llcGroups(t, p.CPUs)
		for _, g := range groups {
			indent := "  "
			if g.label != "" {
				fmt.Fprintf(w, "  %s: CPUs %s\n", g.label, g.cpus)
				indent = "    "
			}
			var cores []string
			for _, c := range t.Cores {
				if c.CPUs.IsSubsetOf(g.cpus) {
					cores = append(cores, fmt.Sprintf("core %d: %s", c.ID, c.CPUs))
				}
			}
			for i := 0; i < len(cores); i += 4 {
				fmt.Fprintf(w, "%s%s\n", indent, strings.Join(cores[i:min(i+4, len(cores))], "   "))
			}
		}
	}
}

type cpuGroup struct {
	label string
	cpus  topology.CPUSet
}

// llcGroups splits a package's CPUs by last-level cache, or returns the
// package as one unlabelled group when caches are unknown.
func llcGroups(t *topology.Topology, pkg topology.CPUSet) []cpuGroup {
	var out []cpuGroup
	var covered topology.CPUSet
	seen := map[int]bool{}
	for c := range pkg.All() {
		cpu, ok := t.CPU(c)
		if !ok || cpu.LastLevelCache < 0 || seen[cpu.LastLevelCache] {
			continue
		}
		seen[cpu.LastLevelCache] = true
		cache := t.Caches[cpu.LastLevelCache]
		set := cache.CPUs.And(pkg)
		covered = covered.Or(set)
		out = append(out, cpuGroup{label: fmt.Sprintf("L%d %s", cache.Level, size(cache.SizeBytes)), cpus: set})
	}
	if rest := pkg.AndNot(covered); !rest.IsEmpty() {
		out = append(out, cpuGroup{cpus: rest})
	}
	return out
}

func size(b int64) string {
	switch {
	case b <= 0:
		return "?"
	case b >= 1<<30 && b%(1<<30) == 0 || b >= 10<<30:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// nodeFree reads MemFree of node id from the sysfs tree under root, as
// numactl --hardware shows it.
func nodeFree(root string, id int) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("sys/devices/system/node/node%d/meminfo", id)))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "MemFree:" {
			kb, err := strconv.ParseInt(f[3], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// oneNodeDistance reads a lone node's distance file: the topology keeps
// no matrix for one node (as hwloc does), but the kernel has its local
// distance, which numactl shows.
func oneNodeDistance(root string, id int) *topology.Distances {
	b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("sys/devices/system/node/node%d/distance", id)))
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return nil
	}
	v, err := strconv.Atoi(f[0])
	if err != nil || v <= 0 {
		return nil
	}
	return &topology.Distances{Nodes: []int{id}, Matrix: [][]int{{v}}}
}
