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
//
// CPUs of order that share an OS CPU share its count, so the earliest of
// them always wins over the others: the choice is among the distinct OS
// CPUs, each standing for its earliest CPU in order, by (count, that
// position). A heap keyed so makes each choice O(log CPUs) rather than a
// scan of order.
func assignCPUs(t *topology.Topology, order []int, n int, c *Claim) []int {
	cpus := make([]int, n)
	if n == 0 || len(order) == 0 {
		return cpus
	}
	first := make(map[int]int, len(order)) // OS CPU -> index in order of its earliest CPU
	h := make(osHeap, 0, len(order))
	for i, cpu := range order {
		os := osCPU(t, cpu)
		if _, ok := first[os]; ok {
			continue
		}
		first[os] = i
		h = append(h, osSlot{load: cpuClaims.n[os], pos: i, os: os})
	}
	h.init()
	for k := range cpus {
		s := &h[0]
		cpus[k] = order[s.pos]
		cpuClaims.n[s.os]++
		c.os = append(c.os, s.os)
		s.load++
		h.down(0)
	}
	return cpus
}

// osSlot is one OS CPU of a node's order: its count and the position in
// order of its earliest CPU.
type osSlot struct{ load, pos, os int }

// osHeap is a min-heap of osSlot by (load, pos).
type osHeap []osSlot

func (h osHeap) less(i, j int) bool {
	if h[i].load != h[j].load {
		return h[i].load < h[j].load
	}
	return h[i].pos < h[j].pos
}

func (h osHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h osHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
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
