package topology

import (
	"fmt"
	"runtime"

	"github.com/klauspost/cpuid/v2"
)

// Discover returns the topology of this machine as this process may use
// it. On Linux it reads /sys and /proc and narrows the allowed CPUs to the
// process's affinity mask as the process started with it (so taskset,
// numactl, cgroup cpusets and batch systems' binding are honoured, and the
// pinned threads of a running pool are not mistaken for the process).
// Where that is impossible (another OS, an unreadable or malformed sysfs)
// it returns the portable fallback, one node of runtime.NumCPU CPUs, with
// the reason in Degraded. It never fails.
func Discover() *Topology {
	return discover(getAffinity())
}

func discover(aff CPUSet, affErr error) *Topology {
	t, err := discoverOS(aff, affErr)
	if err != nil {
		t = Fallback(err.Error())
	}
	addMachineInfo(t)
	return t
}

// Fallback returns one node 0 of runtime.NumCPU CPUs numbered 0..n-1,
// each its own core, all allowed, with reason recorded in Degraded.
func Fallback(reason string) *Topology {
	n := runtime.NumCPU()
	all := RangeCPUSet(0, n-1)
	t := &Topology{
		Source:      "fallback",
		Online:      all,
		Allowed:     all,
		AllowedMems: NewCPUSet(0),
		Nodes:       []Node{{ID: 0, CPUs: all, MemoryBytes: -1, HasCPUs: true, HasMemory: true, Allowed: true, Locality: all}},
		Packages:    []Package{{ID: -1, CPUs: all}},
		Degraded:    []string{fmt.Sprintf("portable fallback (one node of %d CPUs): %s", n, reason)},
	}
	for c := range n {
		t.CPUs = append(t.CPUs, CPU{ID: c, OS: c, Node: 0, Package: -1, Die: -1, Core: c, Cluster: -1,
			Siblings: NewCPUSet(c), LastLevelCache: -1, Allowed: true, Kind: -1, Capacity: fullCapacity})
		t.Cores = append(t.Cores, Core{Package: -1, ID: c, CPUs: NewCPUSet(c)})
	}
	return t
}

// addMachineInfo fills Machine from cpuid (vendor, family, model, cache
// sizes, cache line) and the host's total memory (/proc/meminfo on Linux),
// keeping what sysfs said where those are silent. Outside Linux the model
// name of a processor without a cpuid brand string and the memory stay
// unknown: this package takes no dependency for them.
func addMachineInfo(t *Topology) {
	m := &t.Machine
	if v := cpuid.CPU.VendorString; v != "" {
		m.Vendor = v
	}
	if cpuid.CPU.BrandName != "" {
		m.Model = cpuid.CPU.BrandName
	}
	if cpuid.CPU.Family != 0 {
		m.Family, m.Number = cpuid.CPU.Family, cpuid.CPU.Model
	}
	m.CacheLine = cpuid.CPU.CacheLine
	m.L1D = max(int64(cpuid.CPU.Cache.L1D), 0)
	m.L2 = max(int64(cpuid.CPU.Cache.L2), 0)
	m.L3 = max(int64(cpuid.CPU.Cache.L3), 0)
	if m.MemoryBytes <= 0 {
		m.MemoryBytes = hostMemory()
	}
	if m.Arch == "" {
		m.Arch = runtime.GOARCH
	}
}

// narrowToAffinity restricts t.Allowed to the affinity mask aff.
func narrowToAffinity(t *Topology, aff CPUSet) (*Topology, error) {
	allowed := t.Allowed.And(aff)
	if allowed.IsEmpty() {
		return nil, fmt.Errorf("%w: affinity mask %s has no online allowed CPU (allowed %s)", ErrTopology, aff.short(), t.Allowed.short())
	}
	t.Allowed = allowed
	t.restrict()
	return t, nil
}
