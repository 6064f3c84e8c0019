package topology

import (
	"fmt"
	"os"

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

func readAffinity() (CPUSet, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return CPUSet{}, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var out CPUSet
	for c := range MaxCPU {
		if c/64 >= len(set) {
			break
		}
		if set.IsSet(c) {
			out.Add(c)
		}
	}
	return out, nil
}

func discoverOS() (*Topology, error) {
	var uts unix.Utsname
	arch := ""
	if unix.Uname(&uts) == nil {
		arch = unix.ByteSliceToString(uts.Machine[:])
	}
	aff, affErr := getAffinity()
	t, err := fromFS(os.DirFS("/"), arch, affErr != nil)
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
