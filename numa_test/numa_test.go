// Package numa_test proves numapool's NUMA behaviour on a kernel that sees
// several nodes: the qemu VM of scripts/numa-vm.sh (see
// scripts/numa-vm-suite.sh). On a machine with one node every test skips
// and says why.
package numa_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/klauspost/cpuid/v2"

	"github.com/numapool/numapool/bench"
	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/steal"
	"github.com/numapool/numapool/topology"
)

// The layout the VM was given, to check discovery against.
var (
	wantNodes   = flag.Int("vm.nodes", 0, "nodes with CPUs the VM was given (0: do not check)")
	wantCPUs    = flag.Int("vm.cpus", 0, "CPUs per node")
	wantMemOnly = flag.Int("vm.memonly", 0, "memory-only nodes")
	wantDist    = flag.String("vm.dist", "", "distances a-b=v,... (others 20, local 10)")
	hostCPUs    = flag.Int("vm.hostcpus", 0, "CPUs of the host that runs the VM (0: unknown)")
)

func multiNode(t *testing.T) *topology.Topology {
	t.Helper()
	topo := topology.Discover()
	if len(topo.ComputeNodes()) < 2 {
		t.Skipf("this kernel sees %d node(s) with CPUs: run under scripts/numa-vm.sh", len(topo.ComputeNodes()))
	}
	return topo
}

func newPool(t *testing.T, opts ...pool.Option) *pool.Pool {
	t.Helper()
	p, err := pool.New(append(opts, pool.WithoutEnv())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestDiscoveryMatchesLayout(t *testing.T) {
	topo := multiNode(t)
	if *wantNodes == 0 {
		t.Skip("no -vm.nodes given")
	}
	total := *wantNodes + *wantMemOnly
	if len(topo.Nodes) != total {
		t.Fatalf("%d nodes, want %d", len(topo.Nodes), total)
	}
	for i, n := range topo.Nodes {
		if n.ID != i {
			t.Errorf("node %d has ID %d", i, n.ID)
		}
		if i < *wantNodes {
			want := topology.RangeCPUSet(i**wantCPUs, (i+1)**wantCPUs-1)
			if !n.CPUs.Equal(want) || n.MemoryOnly() {
				t.Errorf("node %d: CPUs %s, want %s", i, n.CPUs, want)
			}
		} else if !n.MemoryOnly() || !n.CPUs.IsEmpty() {
			t.Errorf("node %d should be memory-only, has CPUs %s", i, n.CPUs)
		}
		if n.MemoryBytes <= 0 {
			t.Errorf("node %d: memory %d", i, n.MemoryBytes)
		}
	}
	want := map[[2]int]int{}
	if *wantDist != "" {
		for _, p := range strings.Split(*wantDist, ",") {
			var a, b, v int
			if _, err := fmt.Sscanf(p, "%d-%d=%d", &a, &b, &v); err != nil {
				t.Fatalf("-vm.dist %q: %v", p, err)
			}
			want[[2]int{a, b}], want[[2]int{b, a}] = v, v
		}
	}
	for a := range total {
		for b := range total {
			exp := 10
			if a != b {
				exp = 20
				if v, ok := want[[2]int{a, b}]; ok {
					exp = v
				}
			}
			if got, ok := topo.Distances.Between(a, b); !ok || got != exp {
				t.Errorf("distance %d->%d = %d, want %d", a, b, got, exp)
			}
		}
	}
}

// pin.CurrentCPU names the CPU and the node of a thread pinned to each
// CPU in turn: on x86-64 it reads them from a register (TSC_AUX), whose
// node bits only a kernel of several nodes sets.
func TestCurrentCPUNamesCPUAndNode(t *testing.T) {
	topo := multiNode(t)
	t.Logf("RDTSCP: %v", cpuid.CPU.Has(cpuid.RDTSCP))
	for _, cpu := range topo.Allowed.List() {
		c, ok := topo.CPU(cpu)
		if !ok {
			continue
		}
		done := make(chan error)
		go func() {
			th, err := pin.Lock(topology.NewCPUSet(cpu))
			if err != nil {
				done <- err
				return
			}
			defer func() { _ = th.Restore() }()
			got, node, err := pin.CurrentCPU()
			if err == nil && (got != cpu || node != c.Node) {
				err = fmt.Errorf("pinned to CPU %d of node %d, CurrentCPU says CPU %d of node %d", cpu, c.Node, got, node)
			}
			done <- err
		}()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// Every worker runs on its node's CPUs, sampled with getcpu inside tasks,
// for each binding.
func TestWorkersRunOnTheirNode(t *testing.T) {
	topo := multiNode(t)
	for _, b := range []pin.Binding{pin.NUMADomains, pin.Cores, pin.Threads, pin.LLCaches} {
		t.Run(b.String(), func(t *testing.T) {
			p := newPool(t, pool.WithBinding(b), pool.WithRequiredPlacement())
			var wrong, samples atomic.Int64
			var wg sync.WaitGroup
			for i := range 400 {
				wg.Add(1)
				node := p.Nodes()[i%len(p.Nodes())]
				_ = p.Node(node).Submit(context.Background(), func(w *pool.Worker) {
					defer wg.Done()
					for range 20 {
						cpu, _, err := pin.CurrentCPU()
						if err != nil {
							t.Error(err)
							return
						}
						c, _ := topo.CPU(cpu)
						samples.Add(1)
						if c.Node != w.Node() {
							wrong.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if wrong.Load() > 0 {
				t.Errorf("%d of %d samples ran off the worker's node", wrong.Load(), samples.Load())
			}
		})
	}
}

// AllocOnNode places a slice on each of the pool's nodes, and pin.Alloc
// on a node without CPUs (which has no workers, so no pool Node).
func TestAllocOnNodePlacesPages(t *testing.T) {
	topo := multiNode(t)
	p := newPool(t)
	for _, n := range topo.Nodes {
		if !n.HasMemory {
			continue
		}
		var s []float64
		var release func() error
		var err error
		if n.MemoryOnly() {
			var b []byte
			b, release, err = pin.Alloc(8<<16, n.ID)
			if err == nil {
				s = unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), 1<<16)
			}
		} else {
			s, release, err = pool.AllocOnNode[float64](p.Node(n.ID), 1<<16)
		}
		if err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
		nodes, err := pin.PageNodes(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*8))
		if err != nil {
			t.Fatal(err)
		}
		for i, got := range nodes {
			if got != n.ID {
				t.Errorf("node %d: page %d is on node %d", n.ID, i, got)
				break
			}
		}
		_ = release()
	}
}

// A slice first touched by ParallelFor and then processed by ParallelFor
// has its blocks' pages on the node that processed them: always with the
// default options; WithCrossNodeLoops, which lets a dry node help a
// lagging one, is measured and logged.
func TestFirstTouchLocality(t *testing.T) {
	multiNode(t)
	// The VM's kernel has transparent huge pages set to "always": a huge
	// page goes wholly to the node that touches it first, which is why
	// pool.AllocFirstTouch starts its slice on a huge page boundary.
	for _, c := range []struct {
		name       string
		crossLoops bool
		mode       steal.Mode
	}{
		{"default, hierarchical", false, steal.Hierarchical},
		{"default, flat", false, steal.Flat},
		{"cross-node loops", true, steal.Hierarchical},
	} {
		opts := []pool.Option{pool.WithSteal(c.mode)}
		if c.crossLoops {
			opts = append(opts, pool.WithCrossNodeLoops())
		}
		p := newPool(t, opts...)
		good, total := firstTouch(t, p)
		var allGood, all int
		for node := range total {
			allGood += good[node]
			all += total[node]
			t.Logf("%s: node %d's block: %d of %d pages on node %d (%.2f%%)",
				c.name, node, good[node], total[node], node, 100*float64(good[node])/float64(total[node]))
			if !c.crossLoops && good[node]*100 < total[node]*99 {
				t.Errorf("%s: only %d of node %d's %d pages on that node", c.name, good[node], node, total[node])
			}
		}
		t.Logf("%s: %d of %d pages on the node that processed them (%.2f%%)", c.name, allGood, all, 100*float64(allGood)/float64(all))
	}
}

// The benchmark suite's triad locality (bench.TriadLocality: one pass of
// a = b + 3c over arrays allocated and first-touched as each contender's
// users would; a chunk counts for the node getcpu reports at both its
// start and its end, and its bytes as local in proportion to its sampled
// pages on that node) for numapool with its default options, which must
// keep at least 99 % of the bytes on their node, and, reported, for
// numapool-cross (WithCrossNodeLoops) and for plain goroutines, what a Go
// program gets without numapool.
//
// numapool-cross is reported, not judged: it lets a node that ran dry
// take pieces of a lagging node's block, in the first-touch loop as in
// the next, and how many it takes depends on how the host runs the
// virtual CPUs (a VM with more of them than its host has CPUs lags by
// whole host time slices).
func TestTriadLocalityAgainstGoroutines(t *testing.T) {
	multiNode(t)
	const asserted = "numapool"
	cs, err := bench.Select(bench.Contenders(""), "numapool,numapool-cross,goroutines")
	if err != nil {
		t.Fatal(err)
	}
	// 3 x 32 MiB: well past the VM's caches, within its memory per node.
	const bytes = 96 << 20
	for _, c := range cs {
		loc, err := bench.TriadLocality(c, bytes)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		t.Logf("triad locality, %s: %.2f%% of %d MiB processed on the node that holds them (%d chunks; %s)",
			c.Name, loc.LocalPct, loc.Bytes>>20, loc.Chunks, loc.How)
		if c.Name == asserted && loc.LocalPct < 99 {
			t.Errorf("%s: %.2f%% of the triad's bytes processed on their node, want at least 99%%", c.Name, loc.LocalPct)
		}
	}
}

// firstTouch initialises a slice with one ParallelFor and processes it
// with another; for each node, it counts the pages that node processed
// (total) and those of them that are on it (good).
func firstTouch(t *testing.T, p *pool.Pool) (good, total map[int]int) {
	const n = 1 << 21
	data, release, err := pool.AllocFirstTouch[float64](n)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_ = p.ParallelFor(context.Background(), n, 0, func(_ *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			data[i] = 1
		}
		return nil
	})
	page := os.Getpagesize() / 8
	ran := make([]int32, n/page+1) // node that processed each page, by the second loop
	_ = p.ParallelFor(context.Background(), n, 0, func(w *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			data[i] *= 2
		}
		for pg := lo / page; pg <= (hi-1)/page; pg++ {
			atomic.StoreInt32(&ran[pg], int32(w.Node()))
		}
		return nil
	})
	good, total = map[int]int{}, map[int]int{}
	for pg := range n / page {
		got, err := pin.NodeOf(unsafe.Pointer(&data[pg*page]))
		if err != nil {
			t.Fatal(err)
		}
		node := int(ran[pg])
		total[node]++
		if got == node {
			good[node]++
		}
	}
	return good, total
}

func spinFor(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// balancedLoad keeps every node busy with its own work for d: each node
// has two tasks per worker in flight, and each task, when done, submits
// its successor to the same node with submit, until d has passed. The
// offered load follows each node's capacity, so no node runs dry before
// the end (under TCG the vCPUs' speeds differ and drift, which a fixed
// batch per node turns into imbalance). It returns the tasks run and
// those that ran off their node.
func balancedLoad(p *pool.Pool, d time.Duration, submit func(node int, fn func(*pool.Worker)) error) (total, off int64, err error) {
	var nOff, nTotal atomic.Int64
	var wg sync.WaitGroup
	var errOnce sync.Once
	deadline := time.Now().Add(d)
	var task func(node int) func(*pool.Worker)
	task = func(node int) func(*pool.Worker) {
		return func(w *pool.Worker) {
			nTotal.Add(1)
			if w.Node() != node {
				nOff.Add(1)
			}
			spinFor(20 * time.Microsecond)
			if time.Now().After(deadline) {
				wg.Done()
				return
			}
			if e := submit(node, task(node)); e != nil {
				errOnce.Do(func() { err = e })
				wg.Done()
			}
		}
	}
	for _, node := range p.Nodes() {
		for range 2 * p.Workers() / len(p.Nodes()) {
			wg.Add(1)
			if err := submit(node, task(node)); err != nil {
				return 0, 0, err
			}
		}
	}
	wg.Wait()
	return nTotal.Load(), nOff.Load(), err
}

// Node.Submit tasks run on their node: under balanced load at least 99% of
// them (soft affinity lets a dry node help), a Strict Node's all of
// them, always. A fixed batch per node, queued before the workers start,
// is also run and its figures logged: there the node that finishes first
// helps the others at the end.
func TestSubmitToRunsOnNode(t *testing.T) {
	multiNode(t)
	for _, c := range []struct {
		name   string
		strict bool
		mode   steal.Mode
	}{
		{"Node.Submit, hierarchical", false, steal.Hierarchical},
		{"Node.Submit, flat", false, steal.Flat},
		{"Node.Strict.Submit", true, steal.Hierarchical},
	} {
		p := newPool(t, pool.WithSteal(c.mode))
		submit := func(node int, fn func(*pool.Worker)) error {
			n := p.Node(node)
			if c.strict {
				n = n.Strict()
			}
			return n.Submit(context.Background(), fn)
		}
		total, off, err := balancedLoad(p, 200*time.Millisecond, submit)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, balanced load: %d of %d tasks off their node (%.2f%%)", c.name, off, total, 100*float64(off)/float64(total))
		if c.strict && off != 0 || off*100 > total {
			t.Errorf("%s, balanced load: %d of %d tasks ran off their node", c.name, off, total)
		}

		off, total, steals, stolen := fixedBatch(t, p, submit)
		t.Logf("%s, fixed batch: %d of %d tasks off their node (%.2f%%); %d cross-node steals took %d tasks",
			c.name, off, total, 100*float64(off)/float64(total), steals, stolen)
		if c.strict && off != 0 {
			t.Errorf("%s, fixed batch: %d of %d tasks ran off their node", c.name, off, total)
		}
	}
}

// Soft Node.Submit from one goroutine outside the pool, to the nodes in turn
// (tasks of 2µs): the submitter shares a CPU with one node's workers, so
// that node falls behind now and then and the others run dry first. The
// patience rule (pool/soft.go) leaves a node's tasks to it while it keeps
// up: at least 95% run on their node. Measured in VMs (figures logged),
// before the rule: 2x2 1-13% off node, 2x1 0.4-13%, 4x1 7-36%; with it
// (six suite runs): 2x2 0-2.5%, 2x1 0-0.3%, 4x1 0-15%. What still moves,
// moves after the last submission: in a VM a submission costs
// microseconds, and with one worker per node all of the submitter's CPU
// time can come out of one node's worker, which then has tens of
// milliseconds of backlog left when the others run dry, and gets help as
// any backlog does. So with one worker per node a tenth may move, and
// a fifth when the VM has more vCPUs than its host has CPUs (-vm.hostcpus),
// where the host also holds workers off for longer than the patience.
// The test runs three streams and holds their median to these bounds. A
// node with a backlog well beyond the patience (100ms of tasks) gets help
// from idle nodes: at least a twentieth of its tasks run elsewhere.
// softStreamTasks is the length of softStream's stream.
const softStreamTasks = 20000

// softStream submits softStreamTasks soft tasks of 2µs from this
// goroutine to the nodes in turn, waits for them and returns how many ran
// off their node.
func softStream(t *testing.T, p *pool.Pool, nodes []int) int64 {
	t.Helper()
	const n = softStreamTasks
	var nOff, offLate atomic.Int64
	var submitted atomic.Bool
	var wg sync.WaitGroup
	wg.Add(n)
	start := time.Now()
	for i := range n {
		node := nodes[i%len(nodes)]
		if err := p.Node(node).Submit(context.Background(), func(w *pool.Worker) {
			if w.Node() != node {
				nOff.Add(1)
				if submitted.Load() {
					offLate.Add(1)
				}
			}
			spinFor(2 * time.Microsecond)
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	submitted.Store(true)
	took := time.Since(start)
	wg.Wait()
	off := nOff.Load()
	t.Logf("stream of %d soft tasks of 2µs from one outside goroutine (submitted in %v, run in %v): %d (%.2f%%) ran off their node, %d of them after the last submission",
		n, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), off, 100*float64(off)/n, offLate.Load())
	return off
}

func TestSoftLocalityOutsideSubmitter(t *testing.T) {
	multiNode(t)
	p := newPool(t)
	nodes := p.Nodes()
	limit := 5 // percent off node
	if p.Workers() < 2*len(nodes) {
		limit = 10 // one worker per node: see above
		if *hostCPUs > 0 && runtime.NumCPU() > *hostCPUs {
			limit = 20
		}
	}
	// Three streams, judged by the median: the tail after the last
	// submission depends on how long the host held a vCPU off, and one
	// stream in about a hundred in the 2x2 VM on CI's two CPUs moved more
	// than 5% (0.01% at the median of 90).
	var offs [3]int64
	for i := range offs {
		offs[i] = softStream(t, p, nodes)
	}
	slices.Sort(offs[:])
	if median := offs[len(offs)/2]; median*100 > int64(limit*softStreamTasks) {
		t.Errorf("streams of %d soft tasks: %v ran off their node, median %d, want at most %d%%", softStreamTasks, offs, median, limit)
	}

	const backlog = 2000
	var elsewhere atomic.Int64
	var wg sync.WaitGroup
	wg.Add(backlog)
	for range backlog {
		if err := p.Node(nodes[0]).Submit(context.Background(), func(w *pool.Worker) {
			if w.Node() != nodes[0] {
				elsewhere.Add(1)
			}
			spinFor(50 * time.Microsecond)
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	t.Logf("backlog of %d soft tasks of 50µs on node %d: %d (%.1f%%) ran on other nodes",
		backlog, nodes[0], elsewhere.Load(), 100*float64(elsewhere.Load())/backlog)
	if elsewhere.Load()*20 < backlog {
		t.Errorf("backlog of %d on node %d: idle nodes ran only %d of its tasks", backlog, nodes[0], elsewhere.Load())
	}
}

// fixedBatch blocks every worker, queues 1000 tasks of 20µs per node,
// lets the workers go and waits for the tasks.
func fixedBatch(t *testing.T, p *pool.Pool, submit func(int, func(*pool.Worker)) error) (off, total int64, steals, stolen uint64) {
	before := p.Stats().Total
	gate := make(chan struct{})
	var started sync.WaitGroup
	for _, node := range p.Nodes() {
		for range p.Workers() / len(p.Nodes()) {
			started.Add(1)
			if err := p.Node(node).Strict().Submit(context.Background(), func(*pool.Worker) { started.Done(); <-gate }); err != nil {
				t.Fatal(err)
			}
		}
	}
	started.Wait()
	var nOff, nTotal atomic.Int64
	var wg sync.WaitGroup
	for i := range 1000 * len(p.Nodes()) {
		node := p.Nodes()[i%len(p.Nodes())]
		wg.Add(1)
		err := submit(node, func(w *pool.Worker) {
			defer wg.Done()
			nTotal.Add(1)
			if w.Node() != node {
				nOff.Add(1)
			}
			spinFor(20 * time.Microsecond)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	wg.Wait()
	_ = p.Close() // publishes every worker's counters
	after := p.Stats().Total
	// Takes from other nodes: steals from their workers and pulls from
	// their inject shards.
	steals = after.StealsCrossNode + after.InjectPullsCrossNode - before.StealsCrossNode - before.InjectPullsCrossNode
	stolen = after.TasksStolenCrossNode + after.TasksPulledCrossNode - before.TasksStolenCrossNode - before.TasksPulledCrossNode
	return nOff.Load(), nTotal.Load(), steals, stolen
}

// With work only on node 0, all of node 0's workers take part and other
// nodes help (their steals show as cross-node); with balanced work
// cross-node steals stay near zero (at most 1% of the tasks). Figures for
// hierarchical and flat stealing are logged, with those of bursts of work
// per node, where nodes that finish early help.
func TestHierarchicalStealing(t *testing.T) {
	multiNode(t)
	spin := func(*pool.Worker) { spinFor(50 * time.Microsecond) }
	for _, mode := range []steal.Mode{steal.Hierarchical, steal.Flat} {
		p := newPool(t, pool.WithSteal(mode))
		nodes := p.Nodes()
		var wg sync.WaitGroup
		wg.Add(1)
		_ = p.Node(nodes[0]).Submit(context.Background(), func(w *pool.Worker) {
			defer wg.Done()
			for range 2000 {
				w.Spawn(spin)
			}
		})
		wg.Wait()
		_ = p.Close()
		st := p.Stats()
		var onNode0 uint64
		idle0 := 0
		for _, ws := range st.Workers {
			if ws.Node == nodes[0] {
				onNode0 += ws.TasksRun
				if ws.TasksRun == 0 {
					idle0++
				}
			}
		}
		t.Logf("%v, work on node %d only: %d of %d tasks ran there; steals in-node %d, cross-node %d (%d tasks)",
			mode, nodes[0], onNode0, st.Total.TasksRun, st.Total.StealsInNode, st.Total.StealsCrossNode, st.Total.TasksStolenCrossNode)
		if mode == steal.Hierarchical {
			if st.Total.StealsCrossNode == 0 {
				t.Errorf("no cross-node steal although only node %d had work", nodes[0])
			}
			if idle0 > 0 {
				t.Errorf("%d of node %d's workers ran nothing while other nodes helped", idle0, nodes[0])
			}
		}

		// Balanced: on every node, chains of spawned tasks (each spawns
		// its successor) keep the node's workers busy for 200 ms.
		p = newPool(t, pool.WithSteal(mode))
		deadline := time.Now().Add(200 * time.Millisecond)
		var chain func(w *pool.Worker)
		chain = func(w *pool.Worker) {
			spin(w)
			if time.Now().Before(deadline) {
				w.Spawn(chain)
			} else {
				wg.Done()
			}
		}
		for _, node := range nodes {
			for range 2 * p.Workers() / len(nodes) {
				wg.Add(1)
				_ = p.Node(node).Strict().Submit(context.Background(), chain)
			}
		}
		wg.Wait()
		_ = p.Close()
		st = p.Stats()
		t.Logf("%v, balanced: %d tasks; steals in-node %d (%d tasks), cross-node %d (%d tasks)",
			mode, st.Total.TasksRun, st.Total.StealsInNode, st.Total.TasksStolenInNode, st.Total.StealsCrossNode, st.Total.TasksStolenCrossNode)
		if mode == steal.Hierarchical && st.Total.TasksStolenCrossNode*100 > st.Total.TasksRun {
			t.Errorf("balanced work: %d of %d tasks stolen across nodes", st.Total.TasksStolenCrossNode, st.Total.TasksRun)
		}

		// Bursts: every node gets 100 tasks at once, 20 times; nodes that
		// finish a burst early help the others (logged: where the steals
		// went is what tells hierarchical from flat).
		p = newPool(t, pool.WithSteal(mode))
		for range 20 {
			for _, node := range nodes {
				wg.Add(1)
				_ = p.Node(node).Strict().Submit(context.Background(), func(w *pool.Worker) {
					defer wg.Done()
					for range 100 {
						w.Spawn(spin)
					}
				})
			}
			wg.Wait()
		}
		_ = p.Close()
		st = p.Stats()
		t.Logf("%v, bursts: steals in-node %d (%d tasks), cross-node %d (%d tasks): %.0f%% of steals cross-node",
			mode, st.Total.StealsInNode, st.Total.TasksStolenInNode, st.Total.StealsCrossNode, st.Total.TasksStolenCrossNode,
			100*float64(st.Total.StealsCrossNode)/float64(max(1, st.Total.StealsInNode+st.Total.StealsCrossNode)))
	}
}

// Threads that are not workers keep the process's mask.
func TestNoAffinityLeak(t *testing.T) {
	topo := multiNode(t)
	p := newPool(t, pool.WithBinding(pin.Threads))
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		_ = p.Submit(context.Background(), func(*pool.Worker) { wg.Done() })
	}
	wg.Wait()
	bound := map[string]bool{}
	for _, ws := range p.Stats().Workers {
		bound[ws.Bound] = true
	}
	all := topo.Allowed.String()
	files, _ := filepath.Glob("/proc/self/task/*/status")
	narrowed := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				v = strings.TrimSpace(v)
				if v != all {
					if !bound[v] {
						t.Errorf("thread %s has mask %s: neither the process's %s nor a worker's", f, v, all)
					}
					narrowed++
				}
			}
		}
	}
	if narrowed > p.Workers() {
		t.Errorf("%d threads narrowed, but only %d workers", narrowed, p.Workers())
	}
	_ = p.Close()
	b, err := os.ReadFile("/proc/self/status") // the main thread's mask
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Cpus_allowed_list:\t"+all+"\n") {
		t.Errorf("after Close the main thread's mask is not the process's %s:\n%s", all, b)
	}
}

// handOffBound is how many times a goroutine and a channel's round trip a
// pool.Run from outside may take on several nodes: twice the ratio on one
// node (about 2x). A pool that wakes a parked worker's thread on every
// call is far above it.
const handOffBound = 4

// pool.Run from ordinary code, back to back, on a real multi-node kernel:
// its median round trip against a goroutine and a channel's in the same
// run (the VM makes both slow alike).
func TestHandOffAgainstAGoroutine(t *testing.T) {
	multiNode(t)
	p := newPool(t)
	const calls = 4000
	median := func(call func()) time.Duration {
		lat := make([]time.Duration, 0, calls)
		for range calls {
			start := time.Now()
			call()
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		return lat[len(lat)/2]
	}
	fn := func(*pool.Worker) (int, error) { return 1, nil }
	done := make(chan struct{})
	run := median(func() { _, _ = pool.Run(p, fn) })
	gor := median(func() { go func() { done <- struct{}{} }(); <-done })
	ratio := float64(run) / float64(max(gor, 1))
	t.Logf("hand-off on %d nodes: pool.Run p50 %v, a goroutine and a channel p50 %v: %.1fx", len(p.Nodes()), run, gor, ratio)
	if ratio > handOffBound {
		t.Errorf("pool.Run's round trip is %.1fx a goroutine's, want at most %dx", ratio, handOffBound)
	}
}

// Spares stay on their node: with every worker of every node blocked in
// Worker.Block, strict work for each node runs on that node's spares,
// on that node's CPUs, under every binding.
func TestSparesRunOnTheirNode(t *testing.T) {
	topo := multiNode(t)
	for _, b := range []pin.Binding{pin.NUMADomains, pin.Cores} {
		t.Run(b.String(), func(t *testing.T) {
			p := newPool(t, pool.WithBinding(b), pool.WithRequiredPlacement())
			release := make(chan struct{})
			var blocked sync.WaitGroup
			for _, node := range p.Nodes() {
				for range p.Stats().Nodes[nodeIndex(p, node)].Workers {
					blocked.Add(1)
					_ = p.Node(node).Strict().Submit(context.Background(), func(w *pool.Worker) {
						blocked.Done()
						w.Block(func() { <-release })
					})
				}
			}
			blocked.Wait()
			wrong, samples := strictOffNode(t, p, topo, 200)
			close(release)
			if st := p.Stats(); st.Total.Blocks == 0 || wrong > 0 {
				t.Errorf("%d of %d tasks run on spares (%d blocks) ran off their node", wrong, samples, st.Total.Blocks)
			}
		})
	}
}

// TestStandInsRunOnTheirNode: every running worker of every node blocks,
// unmarked, in a strict task; workers in reserve stand in for them
// (pool/standin.go), and the strict tasks that follow run on their node's
// CPUs.
func TestStandInsRunOnTheirNode(t *testing.T) {
	topo := multiNode(t)
	cpus := computeCPUs(topo)
	for _, b := range []pin.Binding{pin.NUMADomains, pin.Cores} {
		t.Run(b.String(), func(t *testing.T) {
			nodes := len(topo.ComputeNodes())
			// Two workers per CPU, of which one per node starts: a reserve
			// on every node, also of one CPU.
			p := newPool(t, pool.WithBinding(b), pool.WithRequiredPlacement(), pool.WithWorkers(nodes), pool.WithMaxWorkers(2*cpus))
			release := make(chan struct{})
			var blocked sync.WaitGroup
			for _, node := range p.Nodes() {
				for range p.Stats().Nodes[nodeIndex(p, node)].Workers {
					blocked.Add(1)
					_ = p.Node(node).Strict().Submit(context.Background(), func(*pool.Worker) {
						blocked.Done()
						<-release // unmarked
					})
				}
			}
			blocked.Wait()
			wrong, samples := strictOffNode(t, p, topo, 200)
			close(release)
			if st := p.Stats(); st.StandInsStarted == 0 {
				t.Errorf("no stand-in started, yet %d strict tasks ran with every running worker blocked", samples)
			}
			if wrong > 0 {
				t.Errorf("%d of %d strict tasks run beside blocked workers ran off their node", wrong, samples)
			}
		})
	}
}

// computeCPUs is the number of CPUs of topo's nodes that have CPUs.
func computeCPUs(topo *topology.Topology) int {
	cpus := 0
	for _, n := range topo.ComputeNodes() {
		cpus += n.CPUs.Len()
	}
	return cpus
}

// strictOffNode submits n strict tasks to p's nodes in turn, each reading
// the CPU it runs on, and returns how many ran off their node, of those
// that read their CPU.
func strictOffNode(t *testing.T, p *pool.Pool, topo *topology.Topology, n int) (wrong, samples int64) {
	t.Helper()
	var off, read atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		node := p.Nodes()[i%len(p.Nodes())]
		_ = p.Node(node).Strict().Submit(context.Background(), func(w *pool.Worker) {
			defer wg.Done()
			cpu, _, err := pin.CurrentCPU()
			if err != nil {
				t.Error(err)
				return
			}
			c, _ := topo.CPU(cpu)
			read.Add(1)
			if c.Node != node {
				off.Add(1)
			}
		})
	}
	wg.Wait()
	return off.Load(), read.Load()
}

func nodeIndex(p *pool.Pool, node int) int {
	for i, n := range p.Stats().Nodes {
		if n.Node == node {
			return i
		}
	}
	return -1
}

// TestResizedWorkersRunOnTheirNode: workers a Resize brings back, never
// started by New (WithMaxWorkers) or retired before, are bound to their
// node's CPUs, and strict work runs on its node throughout.
func TestResizedWorkersRunOnTheirNode(t *testing.T) {
	topo := multiNode(t)
	cpus := computeCPUs(topo)
	for _, b := range []pin.Binding{pin.NUMADomains, pin.Cores} {
		t.Run(b.String(), func(t *testing.T) {
			nodes := len(topo.ComputeNodes())
			p := newPool(t, pool.WithBinding(b), pool.WithRequiredPlacement(), pool.WithWorkers(nodes), pool.WithMaxWorkers(cpus))
			for round, size := range []int{cpus, nodes, cpus} {
				if err := p.Resize(size); err != nil {
					t.Fatal(err)
				}
				st := p.Stats()
				for _, ws := range st.Workers {
					if ws.Retired {
						continue
					}
					bound, err := topology.ParseCPUList([]byte(ws.Bound))
					node := topo.Nodes[slices.IndexFunc(topo.Nodes, func(n topology.Node) bool { return n.ID == ws.Node })]
					if err != nil || bound.IsEmpty() || !bound.IsSubsetOf(node.CPUs) {
						t.Errorf("round %d: worker %d of node %d bound to %q (%v), outside the node's CPUs %s", round, ws.Worker, ws.Node, ws.Bound, err, node.CPUs)
					}
				}
				if wrong, samples := strictOffNode(t, p, topo, 400); wrong > 0 {
					t.Errorf("round %d (size %d): %d of %d strict tasks ran off their node", round, size, wrong, samples)
				}
			}
		})
	}
}
