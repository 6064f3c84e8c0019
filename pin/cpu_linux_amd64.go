//go:build gc && !purego

package pin

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"

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
// and every such round must agree. auxProbeCPUs is how many threads at
// most auxTrusted probes with.
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
// RDTSCP, the kernel's CPU numbers fit in auxCPUBits, and the register
// agrees with getcpu(2) (auxAgrees) on up to auxProbeCPUs threads that
// probe at once, one at least on a CPU above CPU 0. Why several threads
// at once: they run on different CPUs where the process has them, and a
// register that no one writes, or that a hypervisor does not keep per
// virtual CPU, reads the same on every CPU, which is right on one of
// them. Where every probe ran on CPU 0 there is nothing to tell them
// apart, and the system call is used. The probes set no thread's mask: a
// mask read and put back while a CPU is offline would leave a thread
// without that CPU once it is back.
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
	probes := max(1, min(auxProbeCPUs, runtime.GOMAXPROCS(0), runtime.NumCPU()))
	type seen struct {
		ok  bool
		cpu int // the CPU the agreeing rounds ran on (the last one)
	}
	results := make(chan seen, probes)
	var arrived atomic.Int32
	for range probes {
		go func() {
			// Side by side: each waits, a moment at most, for the others,
			// so that the kernel runs them on different CPUs.
			arrived.Add(1)
			for start := time.Now(); arrived.Load() < int32(probes) && time.Since(start) < auxProbeGather; {
			}
			var s seen
			s.ok = auxAgrees(func() (before, after [2]int, aux uint32, err error) {
				before, after, aux, err = auxRound()
				if err == nil && before == after {
					s.cpu = before[0]
				}
				return
			})
			results <- s
		}()
	}
	aboveZero := false
	ok := true
	for range probes {
		s := <-results
		ok = ok && s.ok
		aboveZero = aboveZero || s.cpu > 0
	}
	return ok && aboveZero
}

// auxProbeGather is how long a probe of auxTrusted waits for the others
// to start.
const auxProbeGather = time.Millisecond

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
