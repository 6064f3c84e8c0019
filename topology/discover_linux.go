package topology

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// getAffinity returns the CPUs the process was allowed when it started:
// the affinity mask read while this package was initialised, before any
// thread was pinned. Reading it later would not do: sched_getaffinity
// answers for one thread, and any thread, the main one included, may by
// then be running a pinned worker of a pool (Go runs a goroutine that
// locks its thread on whatever thread it is on). It is a variable so that
// tests can replay recorded masks.
var getAffinity = func() (CPUSet, error) { return startAffinity, startAffinityErr }

var startAffinity, startAffinityErr = readAffinity()

func readAffinity() (CPUSet, error) { return ThreadAffinity(0) }

// ThreadAffinity returns the CPU affinity mask of thread tid (0: the
// calling thread), from sched_getaffinity(2), however many CPUs the
// kernel supports: the buffer grows until the kernel's cpumask fits
// (x/sys/unix's CPUSet holds 1024 CPUs).
func ThreadAffinity(tid int) (CPUSet, error) {
	for words := 16; words <= MaxCPU/64; words *= 2 {
		mask := make([]uint64, words)
		n, _, errno := unix.RawSyscall(unix.SYS_SCHED_GETAFFINITY, uintptr(tid), uintptr(words*8), uintptr(unsafe.Pointer(&mask[0])))
		if errno == unix.EINVAL {
			continue // the kernel's cpumask is larger than the buffer
		}
		if errno != 0 {
			return CPUSet{}, fmt.Errorf("sched_getaffinity: %w", errno)
		}
		return CPUSetFromMask(mask[:n/8]), nil
	}
	return CPUSet{}, fmt.Errorf("sched_getaffinity: the kernel's CPU mask holds more than %d CPUs", MaxCPU)
}

// discoverOS reads this machine's topology, narrowed to the affinity
// mask aff (affErr: why it is unknown).
func discoverOS(aff CPUSet, affErr error) (*Topology, error) {
	var uts unix.Utsname
	arch := ""
	if unix.Uname(&uts) == nil {
		arch = unix.ByteSliceToString(uts.Machine[:])
	}
	t, err := fromFS(os.DirFS("/"), arch, affErr != nil, false)
	if err != nil {
		return nil, err
	}
	t.Source = "sysfs:/"
	if affErr != nil {
		t.Degraded = append(t.Degraded, affErr.Error()+": allowed CPUs from /proc/self/status only")
		return t, nil
	}
	return narrowToAffinity(t, aff)
}

// hostMemory returns MemTotal of /proc/meminfo in bytes, 0 if it cannot
// be read.
func hostMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	v, ok, err := parseMemTotal(b)
	if !ok || err != nil {
		return 0
	}
	return v
}

// NodeAvailable returns the memory of OS node node that an allocation
// bound to it can get without swapping, in bytes, read from the node's
// meminfo in sysfs (parseNodeAvailable), and false if it cannot be read.
func NodeAvailable(node int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/node/node%d/meminfo", node))
	if err != nil {
		return 0, false
	}
	return parseNodeAvailable(b)
}
