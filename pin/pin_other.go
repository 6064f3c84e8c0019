//go:build !linux

package pin

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/numapool/numapool/topology"
)

// Thread is the calling goroutine's OS thread, locked. Pinning is not
// supported on this platform: only an empty CPU set is accepted.
type Thread struct {
	unlocked bool
}

// Lock locks the calling goroutine to its OS thread. A non-empty cpus
// returns ErrUnsupported (and leaves the goroutine unlocked).
func Lock(cpus topology.CPUSet) (*Thread, error) {
	if !cpus.IsEmpty() {
		return nil, fmt.Errorf("%w: cannot bind to CPUs %s on %s", ErrUnsupported, cpus, runtime.GOOS)
	}
	runtime.LockOSThread()
	return &Thread{}, nil
}

// Original returns the empty set: the mask is not known here.
func (th *Thread) Original() topology.CPUSet { return topology.CPUSet{} }

// Aim returns ErrUnsupported.
func Aim(tid int, cpus topology.CPUSet) error { return ErrUnsupported }

// Set returns ErrUnsupported.
func (th *Thread) Set(cpus topology.CPUSet) error {
	return fmt.Errorf("%w: cannot bind to CPUs %s on %s", ErrUnsupported, cpus, runtime.GOOS)
}

// RestoreMask does nothing: the mask was never changed.
func (th *Thread) RestoreMask() error { return nil }

// Restore unlocks the goroutine from its thread.
func (th *Thread) Restore() error {
	if !th.unlocked {
		th.unlocked = true
		runtime.UnlockOSThread()
	}
	return nil
}

// CurrentCPU returns ErrUnsupported.
func CurrentCPU() (cpu, node int, err error) { return 0, 0, ErrUnsupported }

// SetMemPolicy returns ErrUnsupported.
func SetMemPolicy(p Policy, nodes topology.CPUSet) error { return ErrUnsupported }

// Mbind returns ErrUnsupported.
func Mbind(b []byte, p Policy, nodes topology.CPUSet) error { return ErrUnsupported }

// Map returns ErrUnsupported.
func Map(size int) (b []byte, release func() error, err error) { return nil, nil, ErrUnsupported }

// HugePageSize returns 2 MiB, the common transparent huge page size.
func HugePageSize() int { return 2 << 20 }

// Alloc returns ErrUnsupported.
func Alloc(size, node int) (b []byte, release func() error, err error) {
	return nil, nil, ErrUnsupported
}

// NodeOf returns ErrUnsupported.
func NodeOf(addr unsafe.Pointer) (int, error) { return -1, ErrUnsupported }

// PageNodes returns ErrUnsupported.
func PageNodes(b []byte) ([]int, error) { return nil, ErrUnsupported }
