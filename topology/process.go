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
	return readProcessCPUs(getAffinity())
}

func readProcessCPUs(mask CPUSet, maskErr error) ProcessCPUs {
	pc := ProcessCPUs{Mask: mask, MaskErr: maskErr}
	r := &reader{fsys: os.DirFS("/")}
	pc.Online = r.online()
	if cs := r.cgroupCpuset(); cs.haveCPUs {
		pc.Cgroup, pc.CgroupFile = cs.cpus, "/"+cs.cpusFile
	}
	pc.checkMask()
	return pc
}

func (r *reader) online() CPUSet {
	if b, ok := r.optional("sys/devices/system/cpu/online"); ok {
		if set, err := ParseCPUList(b); err == nil {
			return set
		}
	}
	return CPUSet{}
}

func (pc *ProcessCPUs) checkMask() {
	if pc.MaskErr == nil && pc.Mask.IsEmpty() {
		pc.MaskErr = fmt.Errorf("sched_getaffinity returned an empty mask")
	}
}

// ReadProcessCPUsOf is ReadProcessCPUs with the affinity mask of thread
// tid (0: the calling thread) read now instead of the one the process
// started with. The caller answers for the thread: one that nobody
// pinned, such as a thread locked for the purpose, follows what taskset
// -a -p, a cgroup cpuset and CPU hotplug do to the process.
func ReadProcessCPUsOf(tid int) ProcessCPUs {
	mask, err := ThreadAffinity(tid)
	return readProcessCPUs(mask, err)
}

// Usable returns the CPUs the process may run on by all three sets: the
// mask, within the cgroup cpuset and the online CPUs where those are
// known. Empty when the mask is unknown.
func (pc ProcessCPUs) Usable() CPUSet {
	cpus := pc.Mask
	if !pc.Cgroup.IsEmpty() && !cpus.And(pc.Cgroup).IsEmpty() {
		cpus = cpus.And(pc.Cgroup)
	}
	if !pc.Online.IsEmpty() && !cpus.And(pc.Online).IsEmpty() {
		cpus = cpus.And(pc.Online)
	}
	return cpus
}

// DiscoverWithin is Discover with the allowed CPUs narrowed to mask, the
// process's CPUs as the caller read them now (ReadProcessCPUsOf), instead
// of the mask the process started with: a pool made after taskset -a -p
// or a cpuset change places its workers inside what the process has now.
// An empty mask is Discover's.
func DiscoverWithin(mask CPUSet) *Topology {
	if mask.IsEmpty() {
		return Discover()
	}
	return discover(mask, nil)
}
