package pool

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/place"
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
		if err := place.CheckMemoryNode(call, mem); err != nil {
			return nil, nil, err
		}
	}
	if size := int64(unsafe.Sizeof(*new(T))); n > 0 && int64(n) <= math.MaxInt64/size {
		if err := place.CheckNodeFree(call, mem, int64(n)*size); err != nil {
			return nil, nil, err // an overflowing size is mapSlice's error
		}
	}
	s, release, err = mapSlice[T](call, n, func(size int) ([]byte, func() error, error) { return pin.Alloc(size, mem) })
	if err != nil {
		// The kernel accepts exactly the nodes the process may allocate
		// from, so only a refusal is checked against the topology, which
		// costs a reading of sysfs: it says whether the node was the
		// reason.
		if nerr := place.CheckMemoryNode(call, mem); nerr != nil {
			return nil, nil, nerr
		}
		return nil, nil, err
	}
	return s, release, nil
}

// memory returns the OS node whose memory holds the node's
// (place.MemoryNode).
func (n Node) memory() (int, error) {
	if n.err != nil {
		return 0, n.err
	}
	return place.MemoryNode(n.p.topo, n.d.node)
}

// ErrNodeMemory: AllocOnNode was asked for more than the node's free
// memory; the error names the node, the size asked and the free memory.
var ErrNodeMemory = place.ErrNodeMemory

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
