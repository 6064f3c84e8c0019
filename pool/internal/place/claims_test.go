package place

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/numapool/numapool/topology"
)

// assignCPUsScan is assignCPUs as a scan of order for every worker: the
// rule it states, written out directly.
func assignCPUsScan(t *topology.Topology, order []int, n int, claims map[int]int) ([]int, []int) {
	cpus := make([]int, n)
	var os []int
	for k := range cpus {
		best, bestLoad := 0, -1
		for i, cpu := range order {
			if load := claims[osCPU(t, cpu)]; bestLoad < 0 || load < bestLoad {
				best, bestLoad = i, load
			}
		}
		cpus[k] = order[best]
		claims[osCPU(t, order[best])]++
		os = append(os, osCPU(t, order[best]))
	}
	return cpus, os
}

// realMachine is a one-node machine of n OS CPUs, one per core.
func realMachine(n int) *topology.Topology {
	var all topology.CPUSet
	for c := range n {
		all.Add(c)
	}
	t := &topology.Topology{Source: "test", Online: all, Allowed: all, AllowedMems: topology.NewCPUSet(0),
		Nodes:    []topology.Node{{ID: 0, CPUs: all, MemoryBytes: 1 << 30, HasCPUs: true, HasMemory: true, Allowed: true, Locality: all}},
		Packages: []topology.Package{{ID: 0, CPUs: all}}}
	for c := range n {
		t.CPUs = append(t.CPUs, topology.CPU{ID: c, OS: c, Package: 0, Die: -1, Cluster: -1, Core: c, Siblings: topology.NewCPUSet(c),
			LastLevelCache: -1, Allowed: true})
		t.Cores = append(t.Cores, topology.Core{ID: c, CPUs: topology.NewCPUSet(c)})
	}
	return t
}

// assignCPUs chooses the CPUs the scan chooses, in the same order, and
// claims the same OS CPUs, whatever the claims of other pools: on
// synthetic nodes laid over fewer OS CPUs (many CPUs share each), with
// SMT siblings, and with more workers than CPUs.
func TestAssignCPUsIsTheScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cpuClaims.Lock()
	saved := maps.Clone(cpuClaims.n)
	defer func() { cpuClaims.n = saved; cpuClaims.Unlock() }()
	for _, osCPUs := range []int{1, 2, 3, 8} {
		for _, spec := range []string{"2x2", "4x16", "2x4x2", "3x5", "16x64"} {
			topo, err := topology.Synthetic(spec, realMachine(osCPUs))
			if err != nil {
				t.Fatalf("%s over %d CPUs: %v", spec, osCPUs, err)
			}
			for _, nd := range topo.Nodes {
				order := coresFirst(topo, nd.CPUs)
				for _, n := range []int{0, 1, len(order) / 2, len(order), 3*len(order) + 1} {
					for _, loaded := range []bool{false, true} {
						name := fmt.Sprintf("%s over %d CPUs, node %d, %d workers, claimed %v", spec, osCPUs, nd.ID, n, loaded)
						claims := map[int]int{}
						if loaded {
							for c := range osCPUs {
								if rng.IntN(2) == 0 {
									claims[c] = rng.IntN(4) + 1
								}
							}
						}
						cpuClaims.n = maps.Clone(claims)
						c := &Claim{}
						got := assignCPUs(topo, order, n, c)
						want, wantOS := assignCPUsScan(topo, order, n, claims)
						if !slices.Equal(got, want) {
							t.Errorf("%s: CPUs %v, want %v", name, got, want)
						}
						if !slices.Equal(c.os, wantOS) {
							t.Errorf("%s: claimed OS CPUs %v, want %v", name, c.os, wantOS)
						}
						if !maps.Equal(cpuClaims.n, claims) {
							t.Errorf("%s: claims %v, want %v", name, cpuClaims.n, claims)
						}
					}
				}
			}
		}
	}
}
