package place

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/numapool/numapool/topology"
)

// machineFiles keeps the files a look reads open: opening a sysfs or
// cgroupfs file costs the look most of its time, and reading an open one
// again from offset 0 makes the kernel write it anew.
type machineFiles struct {
	online, cgroup int // file descriptors; -1: none
	buf            []byte
}

// openMachineFiles opens the online CPUs' file and the cgroup cpuset's
// that first found.
func openMachineFiles(first topology.ProcessCPUs) *machineFiles {
	f := &machineFiles{online: -1, cgroup: -1, buf: make([]byte, 4096)}
	f.online, _ = openRead("/sys/devices/system/cpu/online")
	if first.CgroupFile != "" {
		f.cgroup, _ = openRead(first.CgroupFile)
	}
	return f
}

func openRead(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// read reads the process's CPUs as topology.ReadProcessCPUsOf(0) does,
// from the open files; a file that cannot be read again leaves its set
// as it was in last.
func (f *machineFiles) read(last topology.ProcessCPUs) topology.ProcessCPUs {
	pc := topology.ProcessCPUs{CgroupFile: last.CgroupFile, Online: last.Online, Cgroup: last.Cgroup}
	pc.Mask, pc.MaskErr = topology.ThreadAffinity(0)
	if s, ok := f.list(f.online); ok {
		pc.Online = s
	}
	if s, ok := f.list(f.cgroup); ok {
		pc.Cgroup = s
	}
	return pc
}

// list reads a CPU list file from its start.
func (f *machineFiles) list(fd int) (topology.CPUSet, bool) {
	if fd < 0 {
		return topology.CPUSet{}, false
	}
	for {
		n, err := unix.Pread(fd, f.buf, 0)
		if err != nil {
			return topology.CPUSet{}, false
		}
		if n == len(f.buf) { // a list longer than the buffer: read it whole
			f.buf = make([]byte, 2*len(f.buf))
			continue
		}
		s, err := topology.ParseCPUList([]byte(strings.TrimSpace(string(f.buf[:n]))))
		return s, err == nil
	}
}

func (f *machineFiles) close() {
	for _, fd := range []int{f.online, f.cgroup} {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
}
