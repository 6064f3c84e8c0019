package launch

import (
	"fmt"
	"slices"

	"github.com/numapool/numapool/topology"
)

// Synthetic builds the synthetic topology spec (topology.Synthetic: "2x4",
// "2x4x2", "0-1;2-3") over all of real's online CPUs, as every process on
// the node would, and then allows only the synthetic CPUs that run on
// real's allowed CPUs. Ranks bound to different CPUs of one node thus
// agree on which synthetic node each CPU is in, and a rank given the CPUs
// of one synthetic node gets one worker group there:
//
//	t, err := launch.Synthetic("2x1", topology.Discover())
//	p, err := pool.New(pool.WithTopology(t))
//
// This is what a pool made with WithSpec or NUMAPOOL_TOPOLOGY does when
// the process has only some of the online CPUs (falling back to
// topology.Synthetic when that leaves it none). topology.Synthetic itself
// maps the spec onto the allowed CPUs only, wrapping around them, so a
// process sees the whole synthetic machine on its own CPUs. It is an
// error when none of the spec's CPUs is allowed.
func Synthetic(spec string, real *topology.Topology) (*topology.Topology, error) {
	if real == nil {
		return nil, fmt.Errorf("launch: Synthetic(%q, nil)", spec)
	}
	whole := *real
	whole.Allowed = real.Online
	whole.CPUs = slices.Clone(real.CPUs)
	for i := range whole.CPUs {
		whole.CPUs[i].Allowed = true
	}
	t, err := topology.Synthetic(spec, &whole)
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	var allowed topology.CPUSet
	for i := range t.CPUs {
		c := &t.CPUs[i]
		c.Allowed = real.Allowed.Has(c.OS)
		if c.Allowed {
			allowed.Add(c.ID)
		}
	}
	if allowed.IsEmpty() {
		return nil, fmt.Errorf("launch: synthetic topology %q has no CPU on the allowed CPUs %s", spec, real.Allowed)
	}
	t.Allowed = allowed
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	return t, nil
}
