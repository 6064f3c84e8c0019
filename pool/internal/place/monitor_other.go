//go:build !linux

package place

import "github.com/numapool/numapool/topology"

// machineFiles reads the process's CPUs afresh each time: there are no
// sysfs files to keep open.
type machineFiles struct{}

func openMachineFiles(topology.ProcessCPUs) *machineFiles { return &machineFiles{} }

func (*machineFiles) read(topology.ProcessCPUs) topology.ProcessCPUs {
	return topology.ReadProcessCPUsOf(0)
}

func (*machineFiles) close() {}
