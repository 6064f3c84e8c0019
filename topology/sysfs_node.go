package topology

import (
	"fmt"
	"slices"
	"strings"
)

// readNodes reads devices/system/node: the nodes, their CPUs and memory,
// the distance matrix and the locality of memory-only nodes. A kernel
// without that directory gets one node 0 holding every online CPU and the
// memory of /proc/meminfo; so does a node directory that cannot be read or
// holds no node that can, as hwloc falls back to one node then.
func (r *reader) readNodes(t *Topology) {
	fi, err := r.stat(nodeDir)
	switch {
	case err != nil && missing(err):
		r.note("%s is missing (kernel without NUMA): one node 0 with every CPU", nodeDir)
		r.singleNode(t)
		return
	case err != nil:
		r.note("%v: one node 0 with every CPU", err)
		r.singleNode(t)
		return
	case !fi.IsDir():
		r.note("%s is not a directory: one node 0 with every CPU", nodeDir)
		r.singleNode(t)
		return
	}
	t.HasNodeDir = true
	ids, dirs, listedBy := r.listNodes()
	hasMemory, haveHasMemory := r.firstCPUSet("memory from each node's meminfo", nodeDir+"/has_memory")
	listed := ids.List() // every node the kernel lists, in order: the distance rows' columns
	if gone := ids.AndNot(dirs); !gone.IsEmpty() {
		r.note("%s lists nodes %s that have no nodeN directory: nodes ignored", listedBy, gone.short())
	}
	var claimed CPUSet
	for _, id := range listed {
		if !dirs.Has(id) {
			continue
		}
		dir := fmt.Sprintf("%s/node%d", nodeDir, id)
		before := r.noted
		cpus, found := r.firstCPUSet("node ignored", dir+"/cpumap", dir+"/cpulist")
		if !found {
			if r.noted == before {
				r.note("node %d has neither cpumap nor cpulist: node ignored", id)
			}
			continue
		}
		if cpus.Intersects(claimed) {
			r.note("node %d lists CPUs %s that an earlier node has: node ignored", id, cpus.And(claimed).short())
			continue
		}
		claimed = claimed.Or(cpus)
		n := Node{ID: id, CPUs: cpus.And(t.Online), HasCPUs: !cpus.IsEmpty(), MemoryBytes: r.nodeMemory(dir+"/meminfo", id), Allowed: true}
		if haveHasMemory {
			n.HasMemory = hasMemory.Has(id)
		} else {
			n.HasMemory = n.MemoryBytes > 0
		}
		t.Nodes = append(t.Nodes, n)
	}
	if len(t.Nodes) == 0 {
		r.note("%s lists nodes %s but none could be read: one node 0 with every CPU", listedBy, ids.short())
		r.singleNode(t)
		return
	}
	r.readDistances(t, listed)
	r.readLocality(t)
	r.finishNodes(t)
}

// listNodes returns the nodes node/online lists, or when that file is
// missing, empty, unreadable or malformed those that have a nodeN
// directory; by says which. dirs are the nodes that have a directory.
func (r *reader) listNodes() (ids, dirs CPUSet, by string) {
	list, err := r.numberedEntries(nodeDir, "node")
	if err != nil {
		r.note("%v: no node listed", err)
	}
	dirs = NewCPUSet(list...)
	p := nodeDir + "/online"
	const instead = "nodes taken from the nodeN directories"
	if b, ok := r.optional(p); ok {
		set, err := ParseCPUList(b)
		switch {
		case err != nil:
			r.note("%s: %v: %s", p, err, instead)
		case set.IsEmpty():
			r.note("%s is %s: %s", p, quote(clean(b)), instead)
		default:
			return set, dirs, p + " (" + quote(clean(b)) + ")"
		}
	}
	return dirs, dirs, "the nodeN directories of " + nodeDir
}

// nodeMemory reads MemTotal from a node's meminfo (or /proc/meminfo), -1
// when it is missing or cannot be read.
func (r *reader) nodeMemory(p string, node int) int64 {
	var b []byte
	ok := false
	if strings.HasPrefix(p, "proc/") {
		ok = r.optionalLines(p, func(line string) bool {
			if strings.Contains(line, "MemTotal:") {
				b = []byte(line)
				return false
			}
			return true
		})
	} else {
		b, ok = r.optional(p)
	}
	if !ok {
		if node >= 0 {
			r.note("node %d has no meminfo: memory size unknown", node)
		}
		return -1
	}
	v, found, err := parseMemTotal(b)
	switch {
	case err != nil:
		r.note("%s: %v: memory size unknown", p, err)
	case !found:
		r.note("%s has no MemTotal line: memory size unknown", p)
	default:
		return v
	}
	return -1
}

// singleNode makes one node 0 of every online CPU and the memory of
// /proc/meminfo, as hwloc does without usable NUMA information.
func (r *reader) singleNode(t *Topology) {
	mem := r.nodeMemory("proc/meminfo", -1)
	t.Nodes = []Node{{ID: 0, CPUs: t.Online, MemoryBytes: mem, HasCPUs: true, HasMemory: mem != 0, Allowed: true, Locality: t.Online}}
	t.Distances = nil
	r.finishNodes(t)
}

// readDistances builds the matrix from each listed node's distance file,
// then keeps the rows and columns of the nodes that were read. Like hwloc,
// it keeps no matrix when fewer than two nodes remain or when any file is
// missing, unreadable or malformed (an empty, negative or non-numeric
// entry); it also keeps none when a file does not hold exactly one entry
// per listed node, where hwloc would take the first ones of a longer row.
func (r *reader) readDistances(t *Topology, listed []int) {
	if len(listed) < 2 || len(t.Nodes) < 2 {
		return
	}
	rows := make([][]int, len(listed))
	for i, id := range listed {
		p := fmt.Sprintf("%s/node%d/distance", nodeDir, id)
		b, err := r.read(p)
		if err != nil {
			if missing(err) {
				r.note("node %d has no distance file: no distance matrix", id)
			} else {
				r.note("%v: no distance matrix", err)
			}
			return
		}
		row, err := parseDistances(b)
		if err != nil {
			r.note("%s: %v: no distance matrix", p, err)
			return
		}
		if len(row) != len(listed) {
			r.note("%s has %d entries for %d nodes: no distance matrix", p, len(row), len(listed))
			return
		}
		rows[i] = row
	}
	var keep []int // indexes in listed of the nodes read
	for i, id := range listed {
		if _, ok := t.Node(id); ok {
			keep = append(keep, i)
		}
	}
	d := &Distances{Matrix: make([][]int, len(keep))}
	for k, i := range keep {
		d.Nodes = append(d.Nodes, listed[i])
		for _, j := range keep {
			d.Matrix[k] = append(d.Matrix[k], rows[i][j])
		}
	}
	t.Distances = d
}

// readLocality sets each node's Locality: its CPUs, or for a memory-only
// node the CPUs of its HMAT initiators (access0/initiators/nodeM), or else
// those of the node(s) at the unique smallest distance, as hwloc does.
func (r *reader) readLocality(t *Topology) {
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
		initiators := r.initiators(n.ID)
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
}

// initiators lists the nodes named in nodeN/access0/initiators.
func (r *reader) initiators(node int) []int {
	dir := fmt.Sprintf("%s/node%d/access0/initiators", nodeDir, node)
	list, err := r.numberedEntries(dir, "node")
	if err != nil {
		if !missing(err) {
			r.note("%v: locality from distances", err)
		}
		return nil
	}
	var out []int
	for _, m := range list {
		if m != node {
			out = append(out, m)
		}
	}
	return out
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
		r.note("online CPUs %s belong to no listed node", none.short())
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
