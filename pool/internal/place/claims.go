package place

import (
	"sync"

	"github.com/numapool/numapool/topology"
)

// cpuClaims counts, for each OS CPU, the workers of this process's live
// pools placed there. A pool started while others run gives its workers
// the least-claimed CPUs of each node first: with per-CPU bindings every
// pool would otherwise put its first worker on the same core (two
// one-worker pools pinned to `cores` would share one CPU, each at half
// speed, while another CPU idles).
var cpuClaims = struct {
	sync.Mutex
	n map[int]int
}{n: map[int]int{}}

// Claim is one pool's hold on its workers' CPUs, given back once.
type Claim struct {
	once sync.Once
	os   []int
}

// assignCPUs gives each of n workers a CPU of order (the node's CPUs,
// cores first), each time the one with the fewest workers of live pools
// and of this pool so far, the earliest in order on ties, and claims
// them. The caller holds cpuClaims.
func assignCPUs(t *topology.Topology, order []int, n int, c *Claim) []int {
	cpus := make([]int, n)
	for k := range cpus {
		best, bestLoad := 0, -1
		for i, cpu := range order {
			if load := cpuClaims.n[osCPU(t, cpu)]; bestLoad < 0 || load < bestLoad {
				best, bestLoad = i, load
			}
		}
		cpus[k] = order[best]
		os := osCPU(t, order[best])
		cpuClaims.n[os]++
		c.os = append(c.os, os)
	}
	return cpus
}

// Release gives the claimed CPUs back. The last of the pool's workers to
// end calls it (workerEnded), also after a Shutdown that gave up while
// tasks ran: until those tasks return, their workers' threads still run
// on these CPUs, so a pool made meanwhile places its workers on others
// first. A claim only orders the choice of CPUs; it reserves none.
func (c *Claim) Release() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		cpuClaims.Lock()
		defer cpuClaims.Unlock()
		for _, os := range c.os {
			if cpuClaims.n[os]--; cpuClaims.n[os] <= 0 {
				delete(cpuClaims.n, os)
			}
		}
	})
}

func osCPU(t *topology.Topology, cpu int) int {
	if c, ok := t.CPU(cpu); ok {
		return c.OS
	}
	return cpu
}

// ClaimedCPUs is how many OS CPUs the live pools' claims hold.
func ClaimedCPUs() int {
	cpuClaims.Lock()
	defer cpuClaims.Unlock()
	return len(cpuClaims.n)
}

// OSCPU is the OS number of topology CPU cpu (itself where the topology
// has no such CPU).
func OSCPU(t *topology.Topology, cpu int) int { return osCPU(t, cpu) }
