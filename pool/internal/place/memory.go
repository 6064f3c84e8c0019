package place

import (
	"errors"
	"fmt"
	"strings"

	"github.com/numapool/numapool/topology"
)

// Memory placement: which OS node holds a pool node's memory, and
// whether a node may and can give an allocation (AllocOnNode's checks).

// MemoryNode returns the OS node whose memory holds node's, of a pool on
// t: the node itself, or for a node of a synthetic topology the one real
// node its OS CPUs are on.
func MemoryNode(t *topology.Topology, node topology.Node) (int, error) {
	if !strings.HasPrefix(t.Source, "synthetic:") {
		return node.ID, nil
	}
	cpus := t.OSCPUs(node.CPUs)
	var on []int
	for _, r := range RealTopology().Nodes {
		if r.CPUs.Intersects(cpus) {
			on = append(on, r.ID)
		}
	}
	if len(on) != 1 {
		return 0, fmt.Errorf("synthetic node %d runs on OS CPUs %s, which are on real nodes %v: its memory is on no one node (AllocFirstTouch places each page where it is first written)", node.ID, cpus, on)
	}
	return on[0], nil
}

// RealTopology is the machine the pool runs on, under any synthetic
// topology: a variable so that tests can give other machines.
var RealTopology = topology.Discover

// MemoryNodes returns the nodes this process may allocate memory from: a
// variable so that tests can give other machines.
var MemoryNodes = func() topology.CPUSet {
	var set topology.CPUSet
	for _, n := range topology.Discover().Nodes {
		if n.HasMemory && n.Allowed {
			set.Add(n.ID)
		}
	}
	return set
}

// memoryNodeError is AllocOnNode's error for a node that is none of the
// process's memory nodes.
type memoryNodeError struct {
	call  string
	node  int
	nodes topology.CPUSet
}

func (e *memoryNodeError) Error() string {
	have := e.nodes.String()
	if have == "" {
		have = "none"
	}
	return fmt.Sprintf("pool: %s: node %d is not a memory node this process may allocate from (memory nodes: %s)", e.call, e.node, have)
}

func (e *memoryNodeError) Unwrap() error { return ErrUnknownNode }

// ErrUnknownNode: a node ID the pool has no domain for, or that is none
// of the memory nodes this process may allocate from (the pool's error of
// that name).
var ErrUnknownNode = errors.New("pool: unknown node")

// CheckMemoryNode returns an error wrapping ErrUnknownNode that names
// the memory nodes if node is none of MemoryNodes; call names the caller.
func CheckMemoryNode(call string, node int) error {
	if nodes := MemoryNodes(); !nodes.Has(node) {
		return &memoryNodeError{call: call, node: node, nodes: nodes}
	}
	return nil
}

// nodeMemoryError is AllocOnNode's error for a size past the node's free
// memory.
type nodeMemoryError struct {
	call       string
	node       int
	size, free int64
}

func (e *nodeMemoryError) Error() string {
	return fmt.Sprintf("pool: %s: %s: %d bytes asked of node %d, which has %d bytes free or reclaimable",
		e.call, strings.TrimPrefix(ErrNodeMemory.Error(), "pool: "), e.size, e.node, e.free)
}

func (e *nodeMemoryError) Unwrap() error { return ErrNodeMemory }

// CheckNodeFree returns an error wrapping ErrNodeMemory if size bytes
// are more than node's free memory (NodeFree), and nil when they fit or
// when the free memory is unknown; call names the caller.
func CheckNodeFree(call string, node int, size int64) error {
	free, ok := NodeFree(node)
	if ok && size > free {
		return &nodeMemoryError{call: call, node: node, size: size, free: free}
	}
	return nil
}

// ErrNodeMemory: more was asked of a node than its free memory (the
// pool's error of that name).
var ErrNodeMemory = errors.New("pool: not enough free memory on the node")

// NodeFree returns the memory of an OS node that an allocation bound to
// it can get without swapping, in bytes, and whether it could be read: a
// variable so that tests can give other figures.
var NodeFree = topology.NodeAvailable
