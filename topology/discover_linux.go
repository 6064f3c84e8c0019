package topology

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// getAffinity returns the process's CPU affinity mask (its main thread's,
// not the calling thread's, which may be a pinned worker). It is a
// variable so that tests can replay recorded masks.
var getAffinity = func() (CPUSet, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(unix.Getpid(), &set); err != nil {
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
	t, err := fromFS(os.DirFS("/"), arch)
	if err != nil {
		return nil, err
	}
	t.Source = "sysfs:/"
	aff, err := getAffinity()
	if err != nil {
		t.Degraded = append(t.Degraded, err.Error()+": allowed CPUs from /proc/self/status only")
		return t, nil
	}
	return narrowToAffinity(t, aff)
}
