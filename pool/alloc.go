package pool

import (
	"errors"
	"unsafe"

	"github.com/numapool/numapool/pin"
)

// Numeric is the element types AllocOnNode can hold: no pointers, since
// the memory is outside the Go heap and the collector does not scan it.
type Numeric interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// AllocOnNode returns a slice of n zeroed elements whose pages are bound
// to the given NUMA node (its OS ID) and already on it, and a function
// that frees it; the slice must not be used after release. It is the
// explicit alternative to first touch. On systems without NUMA placement
// it returns pin.ErrUnsupported.
func AllocOnNode[T Numeric](node, n int) (s []T, release func() error, err error) {
	return mapSlice[T](n, func(size int) ([]byte, func() error, error) { return pin.Alloc(size, node) })
}

// AllocFirstTouch returns a slice of n zeroed elements whose pages are
// not yet allocated: each lands on the node of the worker that first
// writes it. Initialise it with ParallelFor, and every later ParallelFor
// over the same n processes each block on the node that holds it (the
// first-touch pattern). A slice from make may not work so: Go zeroes
// reused heap memory on the allocating thread, which places the pages
// there. release frees the slice, which must not be used afterwards. On
// systems without NUMA placement (the pool has one node there) it
// returns a slice from make and a release that does nothing, so a
// program needs no second path for them; it fails only when the memory
// cannot be mapped.
func AllocFirstTouch[T Numeric](n int) (s []T, release func() error, err error) {
	return firstTouch[T](n, pin.Map)
}

// firstTouch is AllocFirstTouch over mapBytes.
func firstTouch[T Numeric](n int, mapBytes func(size int) ([]byte, func() error, error)) ([]T, func() error, error) {
	s, release, err := mapSlice[T](n, mapBytes)
	if errors.Is(err, pin.ErrUnsupported) {
		return make([]T, n), func() error { return nil }, nil
	}
	return s, release, err
}

// mapSlice maps memory for n elements of T with mapBytes and returns it
// as a slice.
func mapSlice[T Numeric](n int, mapBytes func(size int) ([]byte, func() error, error)) ([]T, func() error, error) {
	if n <= 0 {
		return nil, func() error { return nil }, nil
	}
	var zero T
	b, release, err := mapBytes(n * int(unsafe.Sizeof(zero)))
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), release, nil
}
