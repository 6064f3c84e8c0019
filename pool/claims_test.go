package pool

import (
	"testing"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/topology"
)

// Pools that run at the same time spread their workers over the CPUs: a
// second one-worker pool bound to cores does not land on the first one's
// core; once the first ends, its CPU is free again.
func TestPoolsSpreadOverCPUs(t *testing.T) {
	topo := topology.Discover()
	if topo.Allowed.Len() < 2 {
		t.Skipf("one CPU allowed (%s): nothing to spread over", topo.Allowed)
	}
	one := func() *Pool {
		return newTestPool(t, WithTopology(topo), WithWorkers(1), WithBinding(pin.Cores))
	}
	a := one()
	b := one()
	if a.workers[0].cpu == b.workers[0].cpu {
		t.Errorf("two pools' only workers share CPU %d", a.workers[0].cpu)
	}
	first := a.workers[0].cpu
	_ = a.Close()
	c := one()
	if c.workers[0].cpu != first {
		t.Errorf("after the first pool closed, a new pool's worker is on CPU %d, not the freed CPU %d", c.workers[0].cpu, first)
	}
	_ = b.Close()
	_ = c.Close()
	if left := place.ClaimedCPUs(); left != 0 {
		t.Errorf("%d CPUs still claimed after every pool closed", left)
	}
}
