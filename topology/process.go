package topology

import (
	"fmt"
	"os"
)

// ProcessCPUs is what narrowed this process's CPUs, each set read on its
// own, so that a report can say which of them did: the online CPUs, the
// cgroup cpuset the process lives in, and the affinity mask it started
// with (which taskset, numactl, srun --cpu-bind and mpirun --bind-to set).
type ProcessCPUs struct {
	Online     CPUSet // online CPUs (devices/system/cpu/online); empty if unreadable
	Cgroup     CPUSet // the cgroup cpuset's CPUs; empty when there is none or it is unreadable
	CgroupFile string // the file Cgroup was read from ("/sys/fs/cgroup/…/cpuset.cpus.effective")
	Mask       CPUSet // the affinity mask at start (see Discover); empty when unknown
	MaskErr    error  // why Mask is unknown (not Linux, sched_getaffinity failed)
}

// ReadProcessCPUs reads this machine's online CPUs, this process's cgroup
// cpuset and its starting affinity mask. It never fails: what cannot be
// read is left empty (MaskErr says why for the mask).
func ReadProcessCPUs() ProcessCPUs {
	var pc ProcessCPUs
	pc.Mask, pc.MaskErr = getAffinity()
	r := &reader{fsys: os.DirFS("/")}
	if b, ok := r.optional("sys/devices/system/cpu/online"); ok {
		if set, err := ParseCPUList(b); err == nil {
			pc.Online = set
		}
	}
	if cs := r.cgroupCpuset(); cs.haveCPUs {
		pc.Cgroup, pc.CgroupFile = cs.cpus, "/"+cs.cpusFile
	}
	if pc.MaskErr == nil && pc.Mask.IsEmpty() {
		pc.MaskErr = fmt.Errorf("sched_getaffinity returned an empty mask")
	}
	return pc
}
