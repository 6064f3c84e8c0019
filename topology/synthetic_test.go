package topology

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

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

// A hybrid spec lays out each node's performance cores, then its
// efficiency cores, as two kinds whose CPUs have capacities 1024 and 512.
func TestSyntheticKinds(t *testing.T) {
	real, err := FromFS(machineFS(8))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec       string
		perf, eff  CPUSet
		siblings   []CPUSet // of CPU 0, 1, ...: only checked where given
		nodes      int
		onOSCPUs   CPUSet
		capacities []int
	}{
		{spec: "1p+1e", perf: NewCPUSet(0), eff: NewCPUSet(1), nodes: 1, onOSCPUs: RangeCPUSet(0, 1), capacities: []int{1024, 512}},
		{spec: "1x4p+4e", perf: RangeCPUSet(0, 3), eff: RangeCPUSet(4, 7), nodes: 1, onOSCPUs: RangeCPUSet(0, 7),
			capacities: []int{1024, 1024, 1024, 1024, 512, 512, 512, 512}},
		{spec: "2X2P+1EX2", perf: NewCPUSet(0, 1, 2, 3, 6, 7, 8, 9), eff: NewCPUSet(4, 5, 10, 11), nodes: 2, onOSCPUs: RangeCPUSet(0, 7),
			siblings:   []CPUSet{NewCPUSet(0, 1), NewCPUSet(0, 1), NewCPUSet(2, 3), NewCPUSet(2, 3), NewCPUSet(4, 5), NewCPUSet(4, 5), NewCPUSet(6, 7)},
			capacities: []int{1024, 1024, 1024, 1024, 512, 512, 1024, 1024, 1024, 1024, 512, 512}},
		{spec: "1p+2ex3", perf: RangeCPUSet(0, 2), eff: RangeCPUSet(3, 8), nodes: 1, onOSCPUs: RangeCPUSet(0, 7),
			capacities: []int{1024, 1024, 1024, 512, 512, 512, 512, 512, 512}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			topo, err := Synthetic(tc.spec, real)
			if err != nil {
				t.Fatal(err)
			}
			if len(topo.Kinds) != 2 {
				t.Fatalf("kinds %+v, want efficiency and performance", topo.Kinds)
			}
			eff, perf := topo.Kinds[0], topo.Kinds[1]
			if eff.Rank != 0 || eff.Name != "efficiency" || !eff.CPUs.Equal(tc.eff) || eff.Capacity != 512 {
				t.Errorf("kind 0 %+v, want rank 0 efficiency on CPUs %s, capacity 512", eff, tc.eff)
			}
			if perf.Rank != 1 || perf.Name != "performance" || !perf.CPUs.Equal(tc.perf) || perf.Capacity != 1024 {
				t.Errorf("kind 1 %+v, want rank 1 performance on CPUs %s, capacity 1024", perf, tc.perf)
			}
			if len(topo.Nodes) != tc.nodes {
				t.Errorf("%d nodes, want %d", len(topo.Nodes), tc.nodes)
			}
			if got := topo.OSCPUs(topo.Online); !got.Equal(tc.onOSCPUs) {
				t.Errorf("runs on OS CPUs %s, want %s", got, tc.onOSCPUs)
			}
			if got := capacities(topo); fmt.Sprint(got) != fmt.Sprint(tc.capacities) {
				t.Errorf("capacities %v, want %v", got, tc.capacities)
			}
			for i, want := range tc.siblings {
				if got := topo.CPUs[i].Siblings; !got.Equal(want) {
					t.Errorf("CPU %d siblings %s, want %s", i, got, want)
				}
			}
			for _, c := range topo.CPUs {
				if k, ok := topo.KindOf(c.ID); !ok || !k.CPUs.Has(c.ID) || k.Capacity != c.Capacity {
					t.Errorf("CPU %d: kind %+v (%v), capacity %d", c.ID, k, ok, c.Capacity)
				}
			}
		})
	}
	t.Run("no kinds", func(t *testing.T) {
		topo, err := Synthetic("2x2", real)
		if err != nil {
			t.Fatal(err)
		}
		if topo.Kinds != nil {
			t.Errorf("kinds %+v, want none", topo.Kinds)
		}
		for _, c := range topo.CPUs {
			if c.Kind != -1 || c.Capacity != 1024 {
				t.Errorf("CPU %d: kind %d capacity %d, want -1 and 1024", c.ID, c.Kind, c.Capacity)
			}
		}
	})
}

// A bad hybrid spec is refused with an error that quotes it and shows the
// forms a spec can take.
func TestSyntheticKindsBadSpecs(t *testing.T) {
	real := Fallback("test")
	for _, tc := range []struct{ spec, says string }{
		{"1x4p", "want [NODESx]Pp+Ee[xTHREADS]"},
		{"1x4p4e", "not performance and efficiency cores"},
		{"4e+4p", "not performance and efficiency cores"},
		{"1x0p+1e", `"0" is not a positive count`},
		{"1x4p+-1e", `"-1" is not a positive count`},
		{"0x1p+1e", `"0" is not a positive count`},
		{"1p+1ex0", `"0" is not a positive count`},
		{"1x4p+4ex2x2", "want [NODESx]Pp+Ee[xTHREADS]"},
		{"2x1x1p+1e", "want [NODESx]Pp+Ee[xTHREADS]"},
		{"1x4p+4e+2e", "want [NODESx]Pp+Ee[xTHREADS]"},
		{"1x2p+2ex2p", "want [NODESx]Pp+Ee[xTHREADS]"},
		{"2x2048p+1e", "more than 4096 CPUs"},
		{"2x3p+2ex99999", "more than 4096 CPUs"},
		{"4611686018427387905x1p+1e", "more than 4096 CPUs"},
		{"1x4611686018427387905p+4611686018427387905e", "more than 4096 CPUs"},
	} {
		_, err := Synthetic(tc.spec, real)
		if !errors.Is(err, ErrSpec) {
			t.Errorf("Synthetic(%q): %v, want ErrSpec", tc.spec, err)
			continue
		}
		msg := err.Error()
		for _, want := range []string{strconv.Quote(tc.spec), tc.says, "1x4p+4e", "2x4x2", "0-1;2-3"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Synthetic(%q): %q does not say %q", tc.spec, msg, want)
			}
		}
	}
}
