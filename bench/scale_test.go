package bench

import (
	"math"
	"testing"

	"github.com/numapool/numapool/topology"
)

// Speedup is over sequential at the first point, inverted for times;
// efficiency is speedup per worker; a contender that cannot run gets
// neither.
func TestScaleRowsSpeedupAndEfficiency(t *testing.T) {
	wls := []Workload{{Name: "t", Unit: "ms"}, {Name: "bw", Unit: "GB/s", Higher: true}}
	byPoint := map[int][]Result{
		1: {{Workload: "t", Contender: "sequential", Value: 100}, {Workload: "t", Contender: "p", Value: 110},
			{Workload: "bw", Contender: "sequential", Value: 10}, {Workload: "bw", Contender: "p", Value: 9},
			{Workload: "t", Contender: "q", NA: "cannot"}},
		4: {{Workload: "t", Contender: "p", Value: 30}, {Workload: "t", Contender: "p", Value: 20}, {Workload: "t", Contender: "p", Value: 25},
			{Workload: "bw", Contender: "p", Value: 20}},
	}
	rows := ScaleRows(byPoint, wls)
	want := map[[2]string]struct {
		workers    int
		speedup, e float64
	}{
		{"t", "p@4"}:  {4, 4, 1},
		{"t", "p@1"}:  {1, 100.0 / 110, 100.0 / 110},
		{"bw", "p@4"}: {4, 2, 0.5},
		{"t", "q@1"}:  {1, 0, 0},
	}
	if len(rows) != 7 {
		t.Fatalf("%d rows, want 7: %+v", len(rows), rows)
	}
	for _, r := range rows {
		key := [2]string{r.Workload, r.Contender + "@" + string(rune('0'+r.Workers))}
		w, ok := want[key]
		if !ok {
			continue
		}
		if math.Abs(r.Speedup-w.speedup) > 1e-9 || math.Abs(r.Efficiency-w.e) > 1e-9 {
			t.Errorf("%v: speedup %.3f efficiency %.3f, want %.3f %.3f", key, r.Speedup, r.Efficiency, w.speedup, w.e)
		}
	}
}

// Compact takes a node's cores before their second threads and fills a
// node before the next; scatter alternates nodes; the last point has
// every CPU even when their count is no power of two.
func TestScalePlanPlacements(t *testing.T) {
	real := topology.Fallback("test")
	syn, err := topology.Synthetic("2x3x2", real) // per node 3 cores of 2 threads: 0,1 | 2,3 | 4,5
	if err != nil {
		t.Fatal(err)
	}
	check := func(pl Placement, want []string) {
		t.Helper()
		pts := ScalePlan(syn, pl, 0)
		if len(pts) != len(want) {
			t.Fatalf("%v: %d points, want %d", pl, len(pts), len(want))
		}
		for i, p := range pts {
			if p.CPUs.String() != want[i] || p.Workers != p.CPUs.Len() {
				t.Errorf("%v point %d: CPUs %s (%d workers), want %s", pl, i, p.CPUs, p.Workers, want[i])
			}
		}
	}
	check(Compact, []string{"0", "0,2", "0-2,4", "0-6,8", "0-11"})
	check(Scatter, []string{"0", "0,6", "0,2,6,8", "0-2,4,6-8,10", "0-11"})
	if pts := ScalePlan(syn, Compact, 3); len(pts) != 3 || pts[2].Workers != 3 {
		t.Errorf("max 3 CPUs: %+v", pts)
	}
}
