//go:build !linux

package topology

import (
	"errors"
	"runtime"
)

func discoverOS(CPUSet, error) (*Topology, error) {
	return nil, errors.New("NUMA discovery is implemented for Linux only, not " + runtime.GOOS)
}

// getAffinity is not available here: there is no affinity to narrow to.
var getAffinity = func() (CPUSet, error) { return ThreadAffinity(0) }

// ThreadAffinity returns an error: thread affinity is read on Linux only.
func ThreadAffinity(tid int) (CPUSet, error) {
	return CPUSet{}, errors.New("sched_getaffinity is Linux only")
}

// hostMemory returns 0: the total memory is read on Linux only.
func hostMemory() int64 { return 0 }

// NodeAvailable returns false: a node's free memory is read on Linux only.
func NodeAvailable(int) (int64, bool) { return 0, false }
