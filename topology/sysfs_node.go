package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// readNodes reads devices/system/node: the nodes, their CPUs and memory,
// the distance matrix and the locality of memory-only nodes. A kernel
// without that directory gets one node 0 holding every online CPU and the
// memory of /proc/meminfo.
func (r *reader) readNodes(t *Topology) error {
	if !r.exists(nodeDir) {
		r.note("%s is missing (kernel without NUMA): one node 0 with every CPU", nodeDir)
		mem := int64(-1)
		if b, err := r.read("proc/meminfo"); err == nil {
			if v, ok, err := parseMemTotal(b); err != nil {
				return wrap("proc/meminfo", err)
			} else if ok {
				mem = v
			}
		}
		t.Nodes = []Node{{ID: 0, CPUs: t.Online, MemoryBytes: mem, HasCPUs: true, HasMemory: mem != 0, Allowed: true, Locality: t.Online}}
		r.finishNodes(t)
		return nil
	}
	t.HasNodeDir = true
	ids, found, err := r.maskOrList(nodeDir + "/online")
	if err != nil {
		return err
	}
	if !found {
		list, err := r.numberedEntries(nodeDir, "node")
		if err != nil {
			return err
		}
		ids = NewCPUSet(list...)
	}
	hasMemory, haveHasMemory, err := r.maskOrList(nodeDir + "/has_memory")
	if err != nil {
		return err
	}
	listed := ids.List() // every node the kernel lists, in order: the distance rows' columns
	var claimed CPUSet
	for _, id := range listed {
		dir := fmt.Sprintf("%s/node%d", nodeDir, id)
		cpus, found, err := r.maskOrList(dir+"/cpumap", dir+"/cpulist")
		if err != nil {
			return err
		}
		if !found {
			r.note("node %d has neither cpumap nor cpulist: node ignored", id)
			continue
		}
		if cpus.Intersects(claimed) {
			r.note("node %d lists CPUs %s that an earlier node has: node ignored", id, cpus.And(claimed))
			continue
		}
		claimed = claimed.Or(cpus)
		n := Node{ID: id, CPUs: cpus.And(t.Online), HasCPUs: !cpus.IsEmpty(), MemoryBytes: -1, Allowed: true}
		if b, err := r.read(dir + "/meminfo"); err == nil {
			v, ok, err := parseMemTotal(b)
			if err != nil {
				return wrap(dir+"/meminfo", err)
			}
			if ok {
				n.MemoryBytes = v
			}
		} else {
			r.note("node %d has no meminfo: memory size unknown", id)
		}
		if haveHasMemory {
			n.HasMemory = hasMemory.Has(id)
		} else {
			n.HasMemory = n.MemoryBytes > 0
		}
		t.Nodes = append(t.Nodes, n)
	}
	if len(t.Nodes) == 0 {
		return fmt.Errorf("%w: %s lists nodes %s but none could be read", ErrTopology, nodeDir, ids)
	}
	if err := r.readDistances(t, listed); err != nil {
		return err
	}
	if err := r.readLocality(t); err != nil {
		return err
	}
	r.finishNodes(t)
	return nil
}

// readDistances builds the matrix from each node's distance file. Like
// hwloc, it keeps no matrix when there is one node only or when any file is
// missing or does not hold exactly one entry per listed node.
func (r *reader) readDistances(t *Topology, listed []int) error {
	if len(listed) < 2 || len(t.Nodes) != len(listed) {
		return nil
	}
	d := &Distances{Nodes: listed, Matrix: make([][]int, len(listed))}
	for i, id := range listed {
		p := fmt.Sprintf("%s/node%d/distance", nodeDir, id)
		b, err := r.read(p)
		if errors.Is(err, fs.ErrNotExist) {
			r.note("node %d has no distance file: no distance matrix", id)
			return nil
		}
		if err != nil {
			return err
		}
		row, err := parseDistances(b)
		if err != nil {
			return wrap(p, err)
		}
		if len(row) != len(listed) {
			r.note("%s has %d entries for %d nodes: no distance matrix", p, len(row), len(listed))
			return nil
		}
		d.Matrix[i] = row
	}
	t.Distances = d
	return nil
}

// readLocality sets each node's Locality: its CPUs, or for a memory-only
// node the CPUs of its HMAT initiators (access0/initiators/nodeM), or else
// those of the node(s) at the unique smallest distance, as hwloc does.
func (r *reader) readLocality(t *Topology) error {
	for i := range t.Nodes {
		if t.Nodes[i].HasCPUs {
			t.Nodes[i].Locality = t.Nodes[i].CPUs
		}
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.HasCPUs {
			continue
		}
		initiators, err := r.initiators(n.ID)
		if err != nil {
			return err
		}
		for _, m := range initiators {
			if o, ok := t.Node(m); ok {
				n.Locality = n.Locality.Or(o.Locality)
			}
		}
		if !n.Locality.IsEmpty() || t.Distances == nil {
			continue
		}
		n.Locality = nearestLocality(t, i)
	}
	return nil
}

// initiators lists the nodes named in nodeN/access0/initiators.
func (r *reader) initiators(node int) ([]int, error) {
	dir := fmt.Sprintf("%s/node%d/access0/initiators", nodeDir, node)
	list, err := r.numberedEntries(dir, "node")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out []int
	for _, m := range list {
		if m != node {
			out = append(out, m)
		}
	}
	return out, err
}

// nearestLocality returns the union of the CPUs of the nodes at the
// smallest off-diagonal distance from node i, when that distance is larger
// than the local one and not shared by every other node.
func nearestLocality(t *Topology, i int) CPUSet {
	id := t.Nodes[i].ID
	self, _ := t.Distances.Between(id, id)
	best, count := -1, 0
	for _, o := range t.Nodes {
		if o.ID == id {
			continue
		}
		d, ok := t.Distances.Between(id, o.ID)
		if !ok {
			continue
		}
		switch {
		case best < 0 || d < best:
			best, count = d, 1
		case d == best:
			count++
		}
	}
	if best < 0 || best <= self || count == len(t.Nodes)-1 {
		return CPUSet{}
	}
	var out CPUSet
	for _, o := range t.Nodes {
		if d, _ := t.Distances.Between(id, o.ID); o.ID != id && d == best {
			out = out.Or(o.Locality)
		}
	}
	return out
}

// finishNodes records each CPU's node and drops clusters that coincide
// with another level (hwloc reports only clusters that add structure).
func (r *reader) finishNodes(t *Topology) {
	for _, n := range t.Nodes {
		for c := range n.CPUs.All() {
			if i, ok := indexCPU(t, c); ok {
				t.CPUs[i].Node = n.ID
			}
		}
	}
	if none := t.Online.AndNot(nodeCPUs(t)); !none.IsEmpty() && t.HasNodeDir {
		r.note("online CPUs %s belong to no listed node", none)
	}
	t.Clusters = deleteCoinciding(t, t.Clusters)
}

func nodeCPUs(t *Topology) CPUSet {
	var s CPUSet
	for _, n := range t.Nodes {
		s = s.Or(n.CPUs)
	}
	return s
}

func indexCPU(t *Topology, id int) (int, bool) {
	return slices.BinarySearchFunc(t.CPUs, id, func(c CPU, id int) int { return c.ID - id })
}

func deleteCoinciding(t *Topology, groups []Group) []Group {
	var levels []CPUSet
	for _, c := range t.Cores {
		levels = append(levels, c.CPUs)
	}
	for _, p := range t.Packages {
		levels = append(levels, p.CPUs)
	}
	for _, d := range t.Dies {
		levels = append(levels, d.CPUs)
	}
	for _, c := range t.Caches {
		levels = append(levels, c.CPUs)
	}
	for _, n := range t.Nodes {
		levels = append(levels, n.CPUs)
	}
	levels = append(levels, t.Online)
	out := groups[:0]
	for _, g := range groups {
		same := false
		for _, l := range levels {
			if l.Equal(g.CPUs) {
				same = true
				break
			}
		}
		if !same {
			out = append(out, g)
		}
	}
	return out
}
