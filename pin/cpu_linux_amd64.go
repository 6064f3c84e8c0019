//go:build gc && !purego

package pin

import (
	"os"

	"github.com/klauspost/cpuid/v2"

	"github.com/numapool/numapool/topology"
)

// rdtscpAux returns the TSC_AUX register, which Linux sets on each CPU to
// the CPU's number and its node's (cpu | node<<12), as its vDSO getcpu
// reads it: one instruction, where the getcpu system call enters the
// kernel.
func rdtscpAux() uint32

// auxCPUBits is how many low bits of TSC_AUX hold the CPU number (Linux's
// VDSO_CPUNODE_BITS); the node's number is above them.
const auxCPUBits = 12

// auxProbeRounds is how many getcpu, RDTSCP, getcpu rounds auxAgrees
// makes; at least auxProbeAgreed of them must run on one CPU throughout,
// and every such round must agree. auxProbeCPUs is how many CPUs at most
// auxTrusted checks.
const auxProbeRounds, auxProbeAgreed, auxProbeCPUs = 32, 8, 4

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
// RDTSCP, the kernel's CPU numbers fit in auxCPUBits, and threads pinned
// to up to auxProbeCPUs of the CPUs the process was allowed at its start
// (the highest; none of another's) read the register as getcpu(2)
// answers (auxAgrees), on at least one CPU above CPU 0. Why several CPUs, and one above CPU 0: a register
// that no one writes, or that a hypervisor does not keep per virtual
// CPU, reads the same on every CPU, which is right on one of them. Why
// not the asking thread's CPUs: it may be a worker bound to one. The
// pinned threads end with their goroutines, their masks put back first.
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
	allowed, err := topology.StartAffinity()
	if err != nil {
		return false
	}
	cpus := allowed.List()
	checked, aboveZero := 0, false
	for i := len(cpus) - 1; i >= 0 && checked < auxProbeCPUs; i-- {
		switch auxAgreesOn(cpus[i]) {
		case auxDisagrees:
			return false
		case auxAgree:
			checked++
			aboveZero = aboveZero || cpus[i] > 0
		}
	}
	return aboveZero
}

// The outcomes of auxAgreesOn.
const (
	auxNotHere   = iota // the thread could not be pinned there (the CPU went offline, a cpuset)
	auxAgree            // the register agreed with getcpu
	auxDisagrees        // it did not
)

// auxAgreesOn checks the register on a thread pinned to cpu.
func auxAgreesOn(cpu int) int {
	got := make(chan int, 1)
	go func() {
		th, err := Lock(topology.NewCPUSet(cpu))
		if err != nil {
			got <- auxNotHere
			return
		}
		defer func() { _ = th.RestoreMask() }() // still locked: the thread ends with the goroutine
		if auxAgrees(auxRound) {
			got <- auxAgree
		} else {
			got <- auxDisagrees
		}
	}()
	return <-got
}

// auxRound is one round of auxAgrees on the calling thread.
func auxRound() (before, after [2]int, aux uint32, err error) {
	c0, n0, err0 := getcpu()
	aux = rdtscpAux()
	c1, n1, err1 := getcpu()
	if err0 != nil {
		err = err0
	} else {
		err = err1
	}
	return [2]int{c0, n0}, [2]int{c1, n1}, aux, err
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
