package pool

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// Numeric is the element types AllocOnNode can hold: no pointers, since
// the memory is outside the Go heap and the collector does not scan it.
type Numeric interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// AllocOnNode returns a slice of n zeroed elements whose pages are bound
// to the memory of one of the pool's nodes and already there, and a
// function that frees it; the slice must not be used after release. It
// is the explicit alternative to first touch. n == 0 gives an empty
// slice; a negative n, or one whose size in bytes overflows an int, is an
// error.
//
// The memory is the node's own, or, for a node of a synthetic topology
// (NUMAPOOL_TOPOLOGY, WithSpec), which has none of its own, that of the
// real node its CPUs are on; a synthetic node whose CPUs are on several
// real nodes has no one memory, and that is an error that names them. A
// node the pool does not have, or whose memory this process may not
// allocate from (the cpuset), gives an error wrapping ErrUnknownNode that
// names the nodes there are. On systems without NUMA placement it
// returns pin.ErrUnsupported.
//
// The size asked is checked against the node's free memory first (on
// Linux its meminfo: MemFree and the page cache and slab the kernel can
// reclaim, swap not counted): more than that is an error wrapping
// ErrNodeMemory that names the node, the size and the free memory, and
// nothing is bound. The check is a snapshot: memory that others take
// between it and the binding, or that runs out after it, is not
// reported as an error, since the pages are bound to the node and
// placed at once: the kernel then reclaims and swaps, and if that is not
// enough its OOM killer ends a process, possibly this one. Where the free
// memory cannot be read, nothing is checked.
//
// release unmaps the slice; a second call unmaps nothing and returns an
// error saying the slice was released already.
func AllocOnNode[T Numeric](node Node, n int) (s []T, release func() error, err error) {
	mustNode(node, "AllocOnNode")
	call := fmt.Sprintf("AllocOnNode(node %d, %d)", node.ID(), n)
	mem, err := node.memory()
	if errors.Is(err, ErrUnknownNode) {
		return nil, nil, fmt.Errorf("%w, in %s", err, call) // the error names the node and the pool's
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pool: %s: %w", call, err)
	}
	if n == 0 {
		if err := checkMemoryNode(call, mem); err != nil {
			return nil, nil, err
		}
	}
	if err := checkNodeFree[T](call, mem, n); err != nil {
		return nil, nil, err
	}
	s, release, err = mapSlice[T](call, n, func(size int) ([]byte, func() error, error) { return pin.Alloc(size, mem) })
	if err != nil {
		// The kernel accepts exactly the nodes the process may allocate
		// from, so only a refusal is checked against the topology, which
		// costs a reading of sysfs: it says whether the node was the
		// reason.
		if nerr := checkMemoryNode(call, mem); nerr != nil {
			return nil, nil, nerr
		}
		return nil, nil, err
	}
	return s, release, nil
}

// memory returns the OS node whose memory holds the node's: the node
// itself, or for a synthetic node the one real node its OS CPUs are on.
func (n Node) memory() (int, error) {
	if n.err != nil {
		return 0, n.err
	}
	t := n.p.topo
	if !strings.HasPrefix(t.Source, "synthetic:") {
		return n.g.node.ID, nil
	}
	cpus := t.OSCPUs(n.g.node.CPUs)
	var on []int
	for _, r := range realTopology().Nodes {
		if r.CPUs.Intersects(cpus) {
			on = append(on, r.ID)
		}
	}
	if len(on) != 1 {
		return 0, fmt.Errorf("synthetic node %d runs on OS CPUs %s, which are on real nodes %v: its memory is on no one node (AllocFirstTouch places each page where it is first written)", n.g.node.ID, cpus, on)
	}
	return on[0], nil
}

// realTopology is the machine the pool runs on, under any synthetic
// topology: a variable so that tests can give other machines.
var realTopology = topology.Discover

// memoryNodes returns the nodes this process may allocate memory from: a
// variable so that tests can give other machines.
var memoryNodes = func() topology.CPUSet {
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

// checkMemoryNode returns a *memoryNodeError if node is none of
// memoryNodes.
func checkMemoryNode(call string, node int) error {
	if nodes := memoryNodes(); !nodes.Has(node) {
		return &memoryNodeError{call: call, node: node, nodes: nodes}
	}
	return nil
}

// ErrNodeMemory: AllocOnNode was asked for more than the node's free
// memory; the error names the node, the size asked and the free memory.
var ErrNodeMemory = errors.New("pool: not enough free memory on the node")

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

// checkNodeFree returns a *nodeMemoryError if n elements of T are more
// than node's free memory, and nil when they fit, when the size
// overflows (mapSlice says so) or when the free memory is unknown.
func checkNodeFree[T Numeric](call string, node, n int) error {
	size := int64(unsafe.Sizeof(*new(T)))
	if n <= 0 || int64(n) > math.MaxInt64/size {
		return nil
	}
	free, ok := nodeFree(node)
	if ok && int64(n)*size > free {
		return &nodeMemoryError{call: call, node: node, size: int64(n) * size, free: free}
	}
	return nil
}

// nodeFree returns the memory of an OS node that an allocation bound to
// it can get without swapping, in bytes, and whether it could be read: a
// variable so that tests can give other figures.
var nodeFree = topology.NodeAvailable

// AllocFirstTouch returns a slice of n zeroed elements whose pages are
// not yet allocated: each lands on the node of the worker that first
// writes it. Initialise it with ParallelFor, and every later ParallelFor
// over the same n processes each block on the node that holds it (the
// first-touch pattern). A slice from make may not work so: Go zeroes
// reused heap memory on the allocating thread, which places the pages
// there. release frees the slice, which must not be used afterwards; a
// second call frees nothing and returns an error saying the slice was
// released already. On systems without NUMA placement (the pool has one
// node there) it returns a slice from make and a release that frees
// nothing, so a program needs no second path for them. n == 0 gives an
// empty slice; a negative n, one whose size in bytes overflows an int, or
// memory that cannot be mapped is an error.
func AllocFirstTouch[T Numeric](n int) (s []T, release func() error, err error) {
	return firstTouch[T](n, pin.Map)
}

// firstTouch is AllocFirstTouch over mapBytes.
func firstTouch[T Numeric](n int, mapBytes func(size int) ([]byte, func() error, error)) ([]T, func() error, error) {
	call := fmt.Sprintf("AllocFirstTouch(%d)", n)
	s, release, err := mapSlice[T](call, n, mapBytes)
	if errors.Is(err, pin.ErrUnsupported) {
		return make([]T, n), releaseOnce(func() error { return nil }), nil
	}
	return s, release, err
}

// errReleased is a release function's answer when called again.
var errReleased = errors.New("pool: slice already released")

// releaseOnce returns a release that calls free the first time and
// returns errReleased after, without calling it: a second unmap could
// take away a later mapping at the same address.
func releaseOnce(free func() error) func() error {
	var done atomic.Bool
	return func() error {
		if !done.CompareAndSwap(false, true) {
			return errReleased
		}
		return free()
	}
}

// mapSlice maps memory for n elements of T with mapBytes and returns it
// as a slice; call names the caller in errors.
func mapSlice[T Numeric](call string, n int, mapBytes func(size int) ([]byte, func() error, error)) ([]T, func() error, error) {
	size := int(unsafe.Sizeof(*new(T)))
	switch {
	case n < 0:
		return nil, nil, fmt.Errorf("pool: %s: negative length %d", call, n)
	case n > math.MaxInt/size:
		return nil, nil, fmt.Errorf("pool: %s: %d elements of %d bytes overflow an int", call, n, size)
	case n == 0:
		return nil, releaseOnce(func() error { return nil }), nil
	}
	b, release, err := mapBytes(n * size)
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), releaseOnce(release), nil
}
