package topology

import "testing"

// A synthetic node is no kernel node: it claims no memory of its own, and
// the memory nodes the topology allows are the real ones the process may
// allocate from, never a synthetic node's ID.
func TestSyntheticNodesHaveNoMemoryOfTheirOwn(t *testing.T) {
	real, err := FromFS(twoNodeFS())
	if err != nil {
		t.Fatal(err)
	}
	real.AllowedMems = NewCPUSet(1) // a cpuset that gives the process node 1's memory only
	real.restrict()
	for _, spec := range []string{"2x1", "8x1", "0-1;2-3"} {
		t.Run(spec, func(t *testing.T) {
			topo, err := Synthetic(spec, real)
			if err != nil {
				t.Fatal(err)
			}
			if !topo.AllowedMems.Equal(NewCPUSet(1)) {
				t.Errorf("memory nodes %s, want the real node 1 alone", topo.AllowedMems)
			}
			for _, n := range topo.Nodes {
				if n.HasMemory || n.Allowed || n.MemoryBytes != 0 {
					t.Errorf("synthetic node %d: has memory %v, allowed %v, %d bytes; want none of its own", n.ID, n.HasMemory, n.Allowed, n.MemoryBytes)
				}
			}
		})
	}
}

// A synthetic node's last-level cache is that of the real CPUs it runs
// on, not an unknown size.
func TestSyntheticCachesAreTheRealOnes(t *testing.T) {
	real, err := FromFS(twoNodeFS())
	if err != nil {
		t.Fatal(err)
	}
	real.Caches = []Cache{
		{Level: 2, Type: "Unified", SizeBytes: 1 << 20, CPUs: real.Allowed},
		{Level: 3, Type: "Unified", SizeBytes: 32 << 20, CPUs: real.Allowed},
	}
	topo, err := Synthetic("2x1", real)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range topo.Caches {
		if c.Level == 3 && c.SizeBytes != 32<<20 {
			t.Errorf("synthetic L3 on CPUs %s: %d bytes, want the real L3's %d", c.CPUs, c.SizeBytes, 32<<20)
		}
	}
}
