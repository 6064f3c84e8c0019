package main

import (
	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/mem"

	"github.com/numapool/numapool/topology"
)

// addHostDetails fills in, from gopsutil, what the topology package leaves
// unknown about the machine as a whole: the processor's model name where
// neither cpuid nor /proc/cpuinfo gives one, and the total memory outside
// Linux. The library does without these details; only the CLI shows them,
// so only the CLI pays for the dependency. Call it on a discovered
// topology before deriving a synthetic one, which copies Machine.
func addHostDetails(m *topology.Machine) {
	if m.Model == "" {
		if infos, err := cpu.Info(); err == nil && len(infos) > 0 {
			m.Model = infos[0].ModelName
		}
	}
	if m.MemoryBytes <= 0 {
		if vm, err := mem.VirtualMemory(); err == nil {
			m.MemoryBytes = int64(vm.Total)
		}
	}
}
