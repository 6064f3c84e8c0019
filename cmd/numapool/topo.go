package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// placement says whether this machine honours pinning and memory policy,
// found by trying both.
type placement struct {
	Pinning      string `json:"pinning"`
	MemoryPolicy string `json:"memory_policy"`
}

type topoOutput struct {
	topology.Summary
	Placement *placement `json:"placement,omitempty"`
	// SyntheticMemory says, for a synthetic topology, where each node's
	// memory is: synthetic nodes have none of their own.
	SyntheticMemory []syntheticMemory `json:"synthetic_memory,omitempty"`
}

// syntheticMemory is where the memory of one synthetic node is: on the
// real nodes of the OS CPUs its CPUs run on.
type syntheticMemory struct {
	Node        int   `json:"node"`
	MemoryNodes []int `json:"memory_of_nodes"` // real node IDs; -1 for CPUs on no node
}

// topoOpts are topo's flags; topoFlags makes them.
type topoOpts struct {
	asJSON      *bool
	sysfs, spec *string
}

func topoFlags() (*flag.FlagSet, topoOpts) {
	fs := flag.NewFlagSet("topo", flag.ContinueOnError)
	return fs, topoOpts{
		asJSON: fs.Bool("json", false, "print the topology as JSON (the hwloc fixture schema)"),
		sysfs:  fs.String("sysfs", "", "read a captured `DIR` (it holds sys/ and proc/) instead of this machine"),
		spec: fs.String("spec", "", "a synthetic topology `SPEC` mapped onto the allowed CPUs: 2x4 (nodes x CPUs), "+
			"2x4x2 (nodes x cores x threads), \"0-1;2-3\" (OS CPUs per node), or 1x4p+4e and 1p+1e "+
			"(nodes x performance + efficiency cores)"),
	}
}

func topoCmd(args []string, stdout io.Writer) error {
	fs, o := topoFlags()
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	asJSON, sysfs, spec := o.asJSON, o.sysfs, o.spec
	t, real, live, err := loadTopology(*sysfs, *spec)
	if err != nil {
		return err
	}
	var mem []syntheticMemory
	if t != real {
		mem = memoryOfSynthetic(t, real)
	}
	name := "this machine"
	if *sysfs != "" {
		name = filepath.Base(filepath.Clean(*sysfs))
	}
	var pl *placement
	if live {
		pl = probePlacement(t, real)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(topoOutput{Summary: t.Summary(name), Placement: pl, SyntheticMemory: mem})
	}
	writeReport(stdout, t, pl)
	writeSyntheticMemory(stdout, mem, real)
	return nil
}

// writeKinds shows the CPU kinds, least powerful first, and each node's
// CPUs of each kind (writeReport calls it after the tree).
func writeKinds(w io.Writer, t *topology.Topology) {
	switch len(t.Kinds) {
	case 0:
		fmt.Fprintln(w, "\ncpu kinds: none (every CPU alike, capacity 1024)")
		return
	case 1:
		fmt.Fprintf(w, "\ncpu kinds: one (every CPU alike)\n")
	default:
		fmt.Fprintf(w, "\ncpu kinds: %d, least powerful first\n", len(t.Kinds))
	}
	for _, k := range t.Kinds {
		rank := "unranked"
		if k.Rank >= 0 {
			rank = fmt.Sprintf("rank %d", k.Rank)
		}
		fmt.Fprintf(w, "  %s: CPUs %s; %s\n", strings.TrimSpace(rank+" "+k.Name), k.CPUs, kindFigures(k))
	}
	if len(t.Kinds) < 2 {
		return
	}
	for _, n := range t.Nodes {
		var parts []string
		for i, k := range t.Kinds {
			if cpus := k.CPUs.And(n.CPUs); !cpus.IsEmpty() {
				parts = append(parts, fmt.Sprintf("%s %s", kindName(i, k), cpus))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "node %d kinds: %s\n", n.ID, strings.Join(parts, "; "))
		}
	}
}

// kindName is a kind's name, else its rank, else its index in Kinds.
func kindName(i int, k topology.Kind) string {
	switch {
	case k.Name != "":
		return k.Name
	case k.Rank >= 0:
		return fmt.Sprintf("rank %d", k.Rank)
	}
	return fmt.Sprintf("kind %d", i)
}

// kindFigures lists what the kernel says of a kind and its capacity.
func kindFigures(k topology.Kind) string {
	var f []string
	if k.MaxMHz > 0 {
		f = append(f, fmt.Sprintf("max %d MHz", k.MaxMHz))
	}
	if k.BaseMHz > 0 {
		f = append(f, fmt.Sprintf("base %d MHz", k.BaseMHz))
	}
	if k.LinuxCapacity > 0 {
		f = append(f, fmt.Sprintf("cpu_capacity %d", k.LinuxCapacity))
	}
	if k.CoreType != "" {
		f = append(f, "core type "+k.CoreType)
	}
	return strings.Join(append(f, fmt.Sprintf("capacity %d", k.Capacity)), ", ")
}

// memoryOfSynthetic finds, for each node of the synthetic topology t laid
// over real, the real nodes its CPUs run on: the pages a worker of the
// node touches first land there (or, for a real node without memory, on
// the nearest node with memory the kernel picks).
func memoryOfSynthetic(t, real *topology.Topology) []syntheticMemory {
	var out []syntheticMemory
	for _, n := range t.Nodes {
		var nodes []int
		for id := range n.CPUs.All() {
			c, ok := t.CPU(id)
			if !ok {
				continue
			}
			node := -1
			if rc, ok := real.CPU(c.OS); ok {
				node = rc.Node
			}
			if !slices.Contains(nodes, node) {
				nodes = append(nodes, node)
			}
		}
		slices.Sort(nodes)
		out = append(out, syntheticMemory{Node: n.ID, MemoryNodes: nodes})
	}
	return out
}

// writeSyntheticMemory says where the memory of each synthetic node is.
func writeSyntheticMemory(w io.Writer, mem []syntheticMemory, real *topology.Topology) {
	if len(mem) == 0 {
		return
	}
	fmt.Fprintln(w, "\nmemory: synthetic nodes are not the kernel's and have no memory of their own;")
	fmt.Fprintln(w, "a page lands on the real node of the CPU that first touches it")
	for _, m := range mem {
		var of []string
		for _, id := range m.MemoryNodes {
			rn, ok := real.Node(id)
			switch {
			case id < 0 || !ok:
				of = append(of, "no node (its CPUs are on none)")
			case !rn.HasMemory:
				of = append(of, fmt.Sprintf("node %d, which has none (the kernel takes the nearest node with memory)", id))
			case !rn.Allowed:
				of = append(of, fmt.Sprintf("node %d, which this process may not allocate from", id))
			default:
				of = append(of, fmt.Sprintf("node %d", id))
			}
		}
		fmt.Fprintf(w, "  synthetic node %d: memory of %s\n", m.Node, strings.Join(of, " and "))
	}
}

// loadTopology reads the topology the flags ask for, and the real one a
// synthetic topology is laid over (t itself without a spec); live is true
// when it describes this machine (so that placement can be tried).
func loadTopology(sysfs, spec string) (t, real *topology.Topology, live bool, err error) {
	if sysfs != "" {
		if st, err := os.Stat(sysfs); err != nil {
			return nil, nil, false, usageError{fmt.Sprintf("--sysfs: %v", err)}
		} else if !st.IsDir() {
			return nil, nil, false, usageError{fmt.Sprintf("--sysfs: %s is not a directory", sysfs)}
		}
		if real, err = topology.FromDir(sysfs); err != nil {
			return nil, nil, false, usageError{fmt.Sprintf("--sysfs %s: %v", sysfs, err)}
		}
	} else {
		real, live = topology.Discover(), true
		addHostDetails(&real.Machine)
	}
	t = real
	if spec != "" {
		if t, err = topology.Synthetic(spec, real); err != nil {
			return nil, nil, false, usageError{"--spec: " + err.Error()}
		}
	}
	return t, real, live, nil
}

// probePlacement pins a thread to the first allowed CPU of t and
// allocates a page on the first node of real (the kernel's nodes, which t
// is when it is not synthetic) with memory the process may allocate from,
// and says what happened.
func probePlacement(t, real *topology.Topology) *placement {
	pl := &placement{}
	cpu := t.OSCPUs(topology.NewCPUSet(t.Allowed.First())).First()
	done := make(chan struct{})
	go func() {
		defer close(done)
		th, err := pin.Lock(topology.NewCPUSet(cpu))
		if err != nil {
			pl.Pinning = "fails: " + err.Error()
			return
		}
		defer th.Restore()
		got, _, err := pin.CurrentCPU()
		switch {
		case err != nil:
			pl.Pinning = "pinned, but getcpu fails: " + err.Error()
		case got != cpu:
			pl.Pinning = fmt.Sprintf("fails: pinned to CPU %d but running on %d", cpu, got)
		default:
			pl.Pinning = fmt.Sprintf("works (a thread pinned to CPU %d ran there)", cpu)
		}
	}()
	<-done
	node := 0 // where nothing says which node has memory
	for _, n := range real.Nodes {
		if n.Allowed && n.HasMemory {
			node = n.ID
			break
		}
	}
	b, release, err := pin.Alloc(1<<16, node)
	if err != nil {
		pl.MemoryPolicy = "fails: " + err.Error()
		return pl
	}
	defer release()
	got, err := pin.NodeOf(unsafe.Pointer(&b[0]))
	switch {
	case err != nil:
		pl.MemoryPolicy = "mbind works, but the page query fails: " + err.Error()
	case got != node:
		pl.MemoryPolicy = fmt.Sprintf("fails: memory bound to node %d is on node %d", node, got)
	default:
		pl.MemoryPolicy = fmt.Sprintf("works (memory bound to node %d is there)", node)
	}
	return pl
}
