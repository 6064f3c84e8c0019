package numa_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/topology"
)

// hotplugWatch is the monitor's interval in the hotplug test, and
// hotplugBound how long after a CPU goes or comes back every worker must
// be bound as the test wants: two looks and room for a VM on a busy host.
const (
	hotplugWatch = 200 * time.Millisecond
	hotplugBound = 2*hotplugWatch + 2*time.Second
)

// setOnline writes a CPU's sysfs online file (root only).
func setOnline(cpu int, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	return os.WriteFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/online", cpu), []byte(v), 0)
}

// nodeMasks runs strict tasks on each node of p until every worker has
// reported its own thread's mask (read by the thread itself, not from
// the pool's records); it returns them by worker ID.
func nodeMasks(t *testing.T, p *pool.Pool) map[int]topology.CPUSet {
	t.Helper()
	out := map[int]topology.CPUSet{}
	var mu sync.Mutex
	for end := time.Now().Add(10 * time.Second); len(out) < p.Workers() && time.Now().Before(end); {
		var wg sync.WaitGroup
		for _, id := range p.Nodes() {
			for range 8 {
				wg.Add(1)
				err := p.Node(id).Strict().Submit(context.Background(), func(w *pool.Worker) {
					defer wg.Done()
					m, err := topology.ThreadAffinity(0)
					if err != nil {
						return
					}
					time.Sleep(time.Millisecond) // let the node's other workers take some
					mu.Lock()
					out[w.ID()] = m
					mu.Unlock()
				})
				if err != nil {
					wg.Done()
					t.Fatal(err)
				}
			}
		}
		wg.Wait()
	}
	return out
}

// TestCPUOfflineAndBack takes the last CPU of the last node offline
// under a counted stream, with cores binding (one CPU per core in the
// VM), and brings it back: meanwhile no worker's mask holds it and the
// worker placed on it runs on the rest of its node or on the nearest
// node; once back, every worker is bound to its own CPUs again. Every
// task runs once.
func TestCPUOfflineAndBack(t *testing.T) {
	topo := multiNode(t)
	nodes := topo.ComputeNodes()
	list := nodes[len(nodes)-1].CPUs.List()
	cpu := list[len(list)-1]
	if cpu == 0 {
		t.Skip("the only CPU left to take offline is CPU 0")
	}
	if err := setOnline(cpu, true); err != nil {
		t.Skipf("CPU %d's online file is not writable: %v (run as root in the VM)", cpu, err)
	}
	p := newPool(t, pool.WithBinding(pin.Cores), pool.WithMachineWatch(hotplugWatch))
	planned := nodeMasks(t, p)
	if len(planned) != p.Workers() {
		t.Fatalf("%d of %d workers reported their masks", len(planned), p.Workers())
	}

	var ran, accepted atomic.Int64
	var twice atomic.Int64
	seen := make([]atomic.Int32, 1<<20)
	stop := make(chan struct{})
	var feeder sync.WaitGroup
	feeder.Add(1)
	go func() {
		defer feeder.Done()
		for i := 0; i < len(seen); i++ {
			select {
			case <-stop:
				return
			default:
			}
			if p.Submit(context.Background(), func(*pool.Worker) {
				if seen[i].Add(1) != 1 {
					twice.Add(1)
				}
				ran.Add(1)
			}) == nil {
				accepted.Add(1)
			}
			if i%64 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	defer func() { _ = setOnline(cpu, true) }()

	if err := setOnline(cpu, false); err != nil {
		t.Fatalf("CPU %d offline: %v", cpu, err)
	}
	gone := topology.NewCPUSet(cpu)
	// The worker placed on the CPU that went runs on the rest of its
	// node, or with none left on one other node: not on the kernel's
	// fallback, every CPU left.
	rest := nodes[len(nodes)-1].CPUs.AndNot(gone)
	placed := func(s topology.CPUSet) bool {
		if !rest.IsEmpty() {
			return s.AndNot(rest).IsEmpty()
		}
		for _, n := range nodes[:len(nodes)-1] {
			if s.AndNot(n.CPUs).IsEmpty() {
				return true
			}
		}
		return false
	}
	off := func(m map[int]topology.CPUSet) bool {
		for id, s := range m {
			if s.IsEmpty() || !s.And(gone).IsEmpty() || planned[id].Equal(gone) && !placed(s) {
				return false
			}
		}
		return true
	}
	start := time.Now()
	var during map[int]topology.CPUSet
	for during = nodeMasks(t, p); !off(during) && time.Since(start) < hotplugBound; during = nodeMasks(t, p) {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("CPU %d offline: worker masks %v", cpu, during)
	for id, s := range during {
		if !s.And(gone).IsEmpty() {
			t.Errorf("CPU %d offline: worker %d's mask %s holds it", cpu, id, s)
		}
		if planned[id].Equal(gone) && !placed(s) {
			t.Errorf("CPU %d offline: worker %d, bound to it, has mask %s: want the rest of its node (%s) or one other node", cpu, id, s, rest)
		}
		if s.Len() > 1 && planned[id].Len() == 1 && !planned[id].Equal(gone) {
			t.Errorf("CPU %d offline: worker %d, bound to %s, now has %s", cpu, id, planned[id], s)
		}
	}

	if err := setOnline(cpu, true); err != nil {
		t.Fatalf("CPU %d online: %v", cpu, err)
	}
	back := func(m map[int]topology.CPUSet) bool {
		for id, s := range m {
			if !s.Equal(planned[id]) {
				return false
			}
		}
		return true
	}
	start = time.Now()
	var after map[int]topology.CPUSet
	for after = nodeMasks(t, p); !back(after) && time.Since(start) < hotplugBound; after = nodeMasks(t, p) {
		time.Sleep(50 * time.Millisecond)
	}
	if !back(after) {
		t.Errorf("%v after CPU %d came back: worker masks %v, want the plan's %v", hotplugBound, cpu, after, planned)
	}
	close(stop)
	feeder.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if twice.Load() != 0 || ran.Load() != accepted.Load() {
		t.Errorf("%d tasks accepted, %d ran, %d ran twice", accepted.Load(), ran.Load(), twice.Load())
	}
	t.Logf("%d tasks, each ran once; Explain after:\n%s", ran.Load(), p.Explain())
}
