package pool

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/topology"
)

// A kind setting keeps every worker on CPUs of that kind, from the option
// and from NUMAPOOL_PLACES=BINDING:KIND, on synthetic hybrid layouts of
// one and two nodes; the work the pool runs is counted under that kind
// alone, and Explain names each worker's kind.
func TestCPUKindKeepsWorkersToOneKind(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []Option
		env     map[string]string
		kind    string
		workers int
		binding pin.Binding
	}{
		{"option performance, 1x2p+2e", []Option{WithSpec("1x2p+2e"), WithCPUKind("performance")}, nil, "performance", 2, pin.NUMADomains},
		{"option efficiency, 1x2p+2e", []Option{WithSpec("1x2p+2e"), WithCPUKind("Efficiency")}, nil, "efficiency", 2, pin.NUMADomains},
		{"option performance, 2x1p+2e", []Option{WithSpec("2x1p+2e"), WithCPUKind("performance")}, nil, "performance", 2, pin.NUMADomains},
		{"env cores:performance, 1x4p+4e", nil, map[string]string{envTopology: "1x4p+4e", envPlaces: "cores:performance"}, "performance", 4, pin.Cores},
		{"env threads:efficiency, 2x1p+1e", nil, map[string]string{envTopology: "2x1p+1e", envPlaces: "THREADS:efficiency"}, "efficiency", 2, pin.Threads},
		{"option beats env", []Option{WithCPUKind("efficiency")}, map[string]string{envTopology: "1x2p+2e", envPlaces: "cores:performance"}, "efficiency", 2, pin.Cores},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPool(tc.opts, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if len(p.workers) != tc.workers {
				t.Errorf("%d workers, want %d (the %s CPUs)\n%s", len(p.workers), tc.workers, tc.kind, p.Explain())
			}
			if p.cfg.binding != tc.binding {
				t.Errorf("binding %v, want %v", p.cfg.binding, tc.binding)
			}
			for _, w := range p.workers {
				if got := w.Kind(); got != tc.kind {
					t.Errorf("worker %d on CPU %d is of kind %q, want %q", w.id, w.cpu, got, tc.kind)
				}
			}
			const n = 1000
			var ran atomic.Int64
			if err := p.ParallelFor(context.Background(), n, 1, func(w *Worker, lo, hi int) error {
				if k := w.Kind(); k != tc.kind {
					return fmt.Errorf("indexes %d-%d ran on a worker of kind %q", lo, hi, k)
				}
				ran.Add(int64(hi - lo))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if ran.Load() != n {
				t.Fatalf("ran %d indexes, want %d", ran.Load(), n)
			}
			_ = p.Close()
			st := p.Stats()
			if len(st.Kinds) != 1 || st.Kinds[tc.kind].TasksRun != st.Total.TasksRun || st.Total.TasksRun == 0 {
				t.Errorf("Stats.Kinds = %v, want only %q with all %d tasks", st.Kinds, tc.kind, st.Total.TasksRun)
			}
			for _, ws := range st.Workers {
				if ws.Kind != tc.kind {
					t.Errorf("WorkerStats of worker %d has kind %q, want %q", ws.Worker, ws.Kind, tc.kind)
				}
			}
			if ex := p.Explain(); !strings.Contains(ex, "a "+tc.kind+" CPU)") || !strings.Contains(ex, "CPU kind "+tc.kind+": CPUs ") {
				t.Errorf("Explain does not name the kind of each worker and the setting:\n%s", ex)
			}
		})
	}
}

// Without a kind setting a hybrid pool has workers of both kinds, counted
// apart.
func TestStatsSumByKind(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1p+1e"))
	var perWorker [2]atomic.Int64
	if err := p.ParallelFor(context.Background(), 2000, 1, func(w *Worker, lo, hi int) error {
		perWorker[w.ID()].Add(int64(hi - lo))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	st := p.Stats()
	if len(st.Kinds) != 2 {
		t.Fatalf("Stats.Kinds = %v, want performance and efficiency", st.Kinds)
	}
	var sum uint64
	for _, ws := range st.Workers {
		if ws.Kind != p.workers[ws.Worker].Kind() || ws.Kind == "" {
			t.Errorf("worker %d: WorkerStats.Kind %q, Worker.Kind %q", ws.Worker, ws.Kind, p.workers[ws.Worker].Kind())
		}
		if got := st.Kinds[ws.Kind].TasksRun; got != ws.TasksRun {
			t.Errorf("kind %s ran %d tasks, its only worker %d", ws.Kind, got, ws.TasksRun)
		}
		sum += ws.TasksRun
	}
	if sum != st.Total.TasksRun {
		t.Errorf("the kinds ran %d tasks, the pool %d", sum, st.Total.TasksRun)
	}
}

// Where the CPUs are all alike a kind setting keeps every CPU and says
// so; no worker has a kind and Stats has no kinds.
func TestCPUKindOnAlikeCPUs(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"), WithCPUKind("performance"))
	defer p.Close()
	if len(p.workers) != 4 {
		t.Errorf("%d workers, want all 4 CPUs", len(p.workers))
	}
	if ex := p.Explain(); !strings.Contains(ex, "CPU kind performance: the CPUs are all alike") {
		t.Errorf("Explain does not say the setting kept every CPU:\n%s", ex)
	}
	for _, w := range p.workers {
		if w.Kind() != "" {
			t.Errorf("worker %d has kind %q on a machine of one kind", w.id, w.Kind())
		}
	}
	if st := p.Stats(); st.Kinds != nil {
		t.Errorf("Stats.Kinds = %v, want nil", st.Kinds)
	}
}

func TestCPUKindErrors(t *testing.T) {
	_, err := New(WithoutEnv(), WithCPUKind("big"))
	if err == nil || !strings.Contains(err.Error(), `WithCPUKind: unknown CPU kind "big" (want performance or efficiency)`) {
		t.Errorf("WithCPUKind(big): %v", err)
	}
	// A node filter that leaves no CPU of the kind.
	topo := hybrid(t, "2x1p+1e")
	eff := topo.Kinds[0].CPUs
	for _, c := range topo.CPUs {
		if !eff.Has(c.ID) {
			topo.CPUs[c.ID].Allowed = false
			topo.Allowed.Remove(c.ID)
		}
	}
	for i := range topo.Nodes {
		topo.Nodes[i].CPUs = topo.Nodes[i].CPUs.And(topo.Allowed)
	}
	_, err = New(WithoutEnv(), WithTopology(topo), WithCPUKind("performance"))
	if err == nil || !strings.Contains(err.Error(), "CPU kind performance: no allowed CPU of that kind (efficiency CPUs ") {
		t.Errorf("performance workers on a topology whose performance CPUs are not allowed: %v", err)
	}
}

// hybrid is the synthetic topology of spec over this machine's CPUs.
func hybrid(t *testing.T, spec string) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(spec, topology.Discover())
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Kinds) != 2 || topo.Kinds[0].Name != "efficiency" {
		t.Fatalf("%s has kinds %+v, want efficiency then performance", spec, topo.Kinds)
	}
	return topo
}

// Loops split the range over the nodes by capacity: a node of CPUs at
// half capacity gets half the indexes per worker. A node of efficiency
// workers alone is warned about.
func TestSplitFollowsCapacity(t *testing.T) {
	topo := hybrid(t, "2x1p+1e")
	// Node 0 all performance, node 1 all efficiency.
	for i, c := range topo.CPUs {
		cpu := &topo.CPUs[i]
		cpu.Kind, cpu.Capacity = 1, 1024
		if c.Node == 1 {
			cpu.Kind, cpu.Capacity = 0, 512
		}
	}
	topo.Kinds[0].CPUs, topo.Kinds[1].CPUs = topo.Nodes[1].CPUs, topo.Nodes[0].CPUs
	p := newTestPool(t, WithTopology(topo))
	defer p.Close()
	got := p.Split(300)
	if len(got) != 2 || got[0] != (NodeBlock{Node: 0, Lo: 0, Hi: 200}) || got[1] != (NodeBlock{Node: 1, Lo: 200, Hi: 300}) {
		t.Errorf("Split(300) = %v, want 2/3 to node 0 (performance), 1/3 to node 1 (efficiency)", got)
	}
	if ex := p.Explain(); !strings.Contains(ex, "warning: the workers of node 1 are all on efficiency CPUs") {
		t.Errorf("Explain does not warn about the node of efficiency CPUs:\n%s", ex)
	}
	// Alike CPUs: by worker count, as before.
	q := newTestPool(t, WithSpec("2x2"), WithWorkers(3))
	defer q.Close()
	if got := q.Split(300); got[0].Hi != 200 {
		t.Errorf("2x2 with 3 workers: Split(300) = %v, want node 0 (2 workers) up to 200", got)
	}
}

// On one node of a performance and an efficiency worker (1p+1e), whose
// efficiency worker does twice the work per index (its CPU's capacity is
// half), the lazy split keeps both busy to the end, so each worker's
// share of the indexes follows its share of the capacity: 2/3 and 1/3,
// within 10 %, on CPUs that each give their worker the same time. Both
// are counted, not timed:
//
//   - when a worker's last body call ends, at most a tenth of the range
//     has not started: a static half-and-half split would leave the
//     performance worker idle with a quarter of it still to start on the
//     other. (The bound is loose because on a busy machine an efficiency
//     worker whose thread waited for a CPU takes back the half it offered
//     when no thief came for it, and runs it itself.)
//   - the expected share weighs each worker's capacity by the CPU time its
//     thread got inside the loop, since a busy machine need not give the
//     two threads the same (on a quiet one they get the same, and the
//     shares are the capacities'). So a worker's share also falls short
//     if it spent its CPU searching while indexes were left.
func TestLoopSharesFollowCapacity(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no per-thread CPU time on this platform")
	}
	p := newTestPool(t, WithSpec("1p+1e"))
	defer p.Close()
	if len(p.workers) != 2 {
		t.Fatalf("%d workers, want 2", len(p.workers))
	}
	const n = 2000
	type account struct {
		done          int
		left          int64 // indexes not started when its last call ended
		first, latest time.Duration
		seen          bool
	}
	var acct [2]account // each written by its own worker only
	var started atomic.Int64
	var sink atomic.Uint64
	spin := func(k int) {
		x := uint64(k)
		for i := range 50000 * k {
			x = x*6364136223846793005 + uint64(i)
		}
		sink.Add(x & 1)
	}
	if err := p.ParallelFor(context.Background(), n, 1, func(w *Worker, lo, hi int) error {
		a := &acct[w.ID()]
		if !a.seen {
			a.first, _ = threadCPU()
			a.seen = true
		}
		k := 1
		if w.Kind() == "efficiency" {
			k = 2
		}
		for range hi - lo {
			started.Add(1)
			spin(k)
		}
		a.done += hi - lo
		a.latest, _ = threadCPU()
		a.left = n - started.Load()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var weight [2]float64
	var total float64
	for _, w := range p.workers {
		a := acct[w.id]
		weight[w.id] = float64(place.Capacity(p.topo, w.cpu)) * (a.latest - a.first).Seconds()
		total += weight[w.id]
		if a.left > n/10 {
			t.Errorf("worker %d (%s) ran out of work with %d of %d indexes not started", w.id, w.Kind(), a.left, n)
		}
	}
	for _, w := range p.workers {
		a := acct[w.id]
		share := float64(a.done) / n
		want := weight[w.id] / total
		t.Logf("worker %d (%s): %.3f of the indexes; capacity %d, %v of CPU in the loop: %.3f expected", w.id, w.Kind(), share, place.Capacity(p.topo, w.cpu), a.latest-a.first, want)
		if share < want*0.9 || share > want*1.1 {
			t.Errorf("worker %d (%s) ran %.3f of the indexes, want %.3f within 10 %%", w.id, w.Kind(), share, want)
		}
	}
}
