package place

import (
	"slices"
	"strings"
	"testing"

	"github.com/numapool/numapool/topology"
)

func nodesOf(sizes ...int) []topology.Node {
	var nodes []topology.Node
	cpu := 0
	for i, n := range sizes {
		var s topology.CPUSet
		for range n {
			s.Add(cpu)
			cpu++
		}
		nodes = append(nodes, topology.Node{ID: i, CPUs: s})
	}
	return nodes
}

// apportion gives every node one worker first when there are enough,
// then the rest in proportion to the CPUs left (largest remainder), and
// never loses or adds a worker.
func TestApportion(t *testing.T) {
	for _, tc := range []struct {
		workers int
		sizes   []int
		want    []int
	}{
		{4, []int{2, 2}, []int{2, 2}},
		{3, []int{2, 2}, []int{2, 1}},
		{1, []int{4, 4}, []int{1, 0}},
		{2, []int{1, 7}, []int{1, 1}},
		{8, []int{1, 7}, []int{1, 7}},
		{5, []int{1, 1, 6}, []int{1, 1, 3}},
		{16, []int{2, 2}, []int{8, 8}},
		{3, []int{6, 3, 1}, []int{1, 1, 1}},
		{10, []int{6, 3, 1}, []int{6, 3, 1}},
	} {
		got := apportion(tc.workers, nodesOf(tc.sizes...))
		if !slices.Equal(got, tc.want) {
			t.Errorf("apportion(%d, nodes of %v) = %v, want %v", tc.workers, tc.sizes, got, tc.want)
		}
		sum := 0
		for _, c := range got {
			sum += c
		}
		if sum != tc.workers {
			t.Errorf("apportion(%d, nodes of %v) gives %d workers", tc.workers, tc.sizes, sum)
		}
	}
}

// A plan on a synthetic machine has one node plan per node, a CPU per
// worker inside its node, distances by index, and a claim that is given
// back whole.
func TestNewPlanSynthetic(t *testing.T) {
	before := ClaimedCPUs()
	p, err := NewPlan(Request{Spec: "2x2", Binding: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 2 {
		t.Fatalf("%d node plans, want 2", len(p.Nodes))
	}
	for i, n := range p.Nodes {
		if len(n.CPUs) != 2 {
			t.Errorf("node %d: %d workers, want 2", n.Node.ID, len(n.CPUs))
		}
		for _, c := range n.CPUs {
			if !n.Node.CPUs.Has(c) {
				t.Errorf("node %d: worker on CPU %d outside its CPUs %s", n.Node.ID, c, n.Node.CPUs)
			}
		}
		if n.Dist[i] != 10 || n.Dist[1-i] <= 10 {
			t.Errorf("node %d: distances %v", n.Node.ID, n.Dist)
		}
	}
	p.Claim.Release()
	p.Claim.Release() // once only
	if got := ClaimedCPUs(); got != before {
		t.Errorf("%d CPUs claimed after the release, %d before the plan", got, before)
	}
	if _, err := NewPlan(Request{Spec: "2x", SpecFrom: "NUMAPOOL_TOPOLOGY=\"2x\": "}); err == nil {
		t.Error("a bad spec planned")
	} else if want := `pool: NUMAPOOL_TOPOLOGY="2x": `; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("bad spec: %v, want it to start %q", err, want)
	}
}

// A node is degraded by more starting workers than its CPUs, not by
// workers in reserve beyond them (Request.Max), which take no CPU until
// they run; WithRequiredPlacement follows the same rule.
func TestPlanDegradedByStartingWorkers(t *testing.T) {
	crowded := func(p *Plan) []string {
		var out []string
		for _, d := range p.Degraded {
			if strings.Contains(d, " workers on ") {
				out = append(out, d)
			}
		}
		return out
	}
	for _, tc := range []struct {
		workers, max int
		degraded     bool
	}{
		{2, 8, false}, // 1 per node of 1 CPU starts, 3 wait in reserve
		{4, 8, true},  // 2 per node of 1 CPU start
		{2, 0, false}, // no reserve
		{4, 0, true},
	} {
		p, err := NewPlan(Request{Spec: "2x1", Workers: tc.workers, Max: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		p.Claim.Release()
		if got := crowded(p); (len(got) > 0) != tc.degraded {
			t.Errorf("2x1, %d workers starting of %d placed: degraded %q, want degraded %v", tc.workers, max(tc.max, tc.workers), got, tc.degraded)
		}
		if tc.degraded || len(p.Degraded) > 0 {
			continue // the spec itself may be degraded on this machine
		}
		p, err = NewPlan(Request{Spec: "2x1", Workers: tc.workers, Max: tc.max, Required: true})
		if err != nil {
			t.Errorf("2x1, %d workers starting of %d placed, required: %v", tc.workers, max(tc.max, tc.workers), err)
			continue
		}
		p.Claim.Release()
	}
}
