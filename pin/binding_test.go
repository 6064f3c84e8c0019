package pin

import (
	"testing"

	"github.com/numapool/numapool/topology"
)

func TestParseBinding(t *testing.T) {
	for _, b := range []Binding{NUMADomains, Cores, Threads, LLCaches, None, Goroutines} {
		got, err := ParseBinding(b.String())
		if err != nil || got != b {
			t.Errorf("ParseBinding(%q) = %v, %v", b.String(), got, err)
		}
	}
	if _, err := ParseBinding("sockets"); err == nil {
		t.Error("ParseBinding accepted sockets")
	}
}

func TestPlace(t *testing.T) {
	real := topology.Fallback("test")
	real.Allowed = topology.NewCPUSet(0, 1)
	// 2 nodes x 2 cores x 2 threads on OS CPUs 0-1 (wrapping).
	topo, err := topology.Synthetic("2x2x2", real)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		b    Binding
		cpu  int
		want string // as topology CPUs, before mapping to OS CPUs
	}{
		{Threads, 5, "5"},
		{Cores, 5, "4-5"},
		{LLCaches, 5, "4-7"},
		{NUMADomains, 5, "4-7"},
		{None, 5, ""},
		{Goroutines, 5, ""},
	} {
		got, err := Place(topo, tc.b, tc.cpu)
		if err != nil {
			t.Fatalf("%v: %v", tc.b, err)
		}
		want, _ := topology.ParseCPUList([]byte(tc.want))
		if !got.Equal(topo.OSCPUs(want)) {
			t.Errorf("Place(%v, %d) = %s, want OS CPUs of %s = %s", tc.b, tc.cpu, got, tc.want, topo.OSCPUs(want))
		}
	}
	if _, err := Place(topo, Threads, 99); err == nil {
		t.Error("Place on a CPU outside the topology accepted")
	}
	topo.Allowed = topology.NewCPUSet(0, 1, 2, 3)
	if _, err := Place(topo, Threads, 0); err != nil {
		t.Error(err)
	}
	for i := range topo.CPUs {
		topo.CPUs[i].Allowed = topo.Allowed.Has(topo.CPUs[i].ID)
	}
	if _, err := Place(topo, Threads, 6); err == nil {
		t.Error("Place on a disallowed CPU accepted")
	}
	// numa_domains keeps to the allowed CPUs of the node.
	got, err := Place(topo, NUMADomains, 1)
	if err != nil || !got.Equal(topo.OSCPUs(topology.RangeCPUSet(0, 3))) {
		t.Errorf("Place(numa_domains, 1) = %s, %v", got, err)
	}
}
