package pin

import (
	"os"

	"github.com/klauspost/cpuid/v2"

	"github.com/numapool/numapool/topology"
)

// rdtscpAux returns the TSC_AUX register, which Linux sets on each CPU to
// the CPU's number and its node's (cpu | node<<12), as its vDSO getcpu
// reads it: one instruction, where the getcpu system call is a kernel
// entry (about ten times as long, and more on a virtual machine).
func rdtscpAux() uint32

// auxCPUBits is how many low bits of TSC_AUX hold the CPU number (Linux's
// VDSO_CPUNODE_BITS); the node's number is above them.
const auxCPUBits = 12

// auxProbeRounds is how many getcpu, RDTSCP, getcpu rounds auxTrusted
// makes; at least auxProbeAgreed of them must run on one CPU throughout,
// and every such round must agree.
const auxProbeRounds, auxProbeAgreed = 32, 8

// fastCPU reads the CPU from TSC_AUX where it can be trusted (auxTrusted),
// and reports false where it cannot, for CurrentCPU to ask the kernel.
func fastCPU() (cpu, node int, ok bool) {
	if !auxOK.get(auxTrusted) {
		return 0, 0, false
	}
	aux := rdtscpAux()
	return int(aux & (1<<auxCPUBits - 1)), int(aux >> auxCPUBits), true
}

// auxTrusted reports whether TSC_AUX names the CPU here: the CPU has
// RDTSCP, the kernel's CPU numbers fit in auxCPUBits, and the register
// agrees with getcpu(2) in every round of auxProbeRounds that ran on one
// CPU throughout (getcpu before and after say the same), of which there
// are at least auxProbeAgreed. A hypervisor that does not keep the
// register per virtual CPU, or a kernel that uses it otherwise, fails.
func auxTrusted() bool {
	if !cpuid.CPU.Has(cpuid.RDTSCP) {
		return false
	}
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return false
	}
	possible, err := topology.ParseCPUList(b)
	if err != nil {
		return false
	}
	if l := possible.List(); len(l) == 0 || l[len(l)-1] >= 1<<auxCPUBits {
		return false
	}
	return auxAgrees(func() (before, after [2]int, aux uint32, err error) {
		c0, n0, err0 := getcpu()
		aux = rdtscpAux()
		c1, n1, err1 := getcpu()
		if err0 != nil {
			err = err0
		} else {
			err = err1
		}
		return [2]int{c0, n0}, [2]int{c1, n1}, aux, err
	})
}

// auxAgrees makes auxProbeRounds rounds of round, each getcpu's CPU and
// node before and after a read of the register, and reports whether the
// register agreed in every round that stayed on one CPU, with at least
// auxProbeAgreed of those.
func auxAgrees(round func() (before, after [2]int, aux uint32, err error)) bool {
	agreed := 0
	for range auxProbeRounds {
		before, after, aux, err := round()
		if err != nil {
			return false
		}
		if before != after {
			continue // moved meanwhile
		}
		if [2]int{int(aux & (1<<auxCPUBits - 1)), int(aux >> auxCPUBits)} != before {
			return false
		}
		agreed++
	}
	return agreed >= auxProbeAgreed
}
