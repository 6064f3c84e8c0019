package pool

import (
	"fmt"

	"github.com/numapool/numapool/pool/internal/place"
)

// CPU kinds (topology.Kind): the performance and efficiency cores of a
// hybrid machine. The pool uses them three ways:
//
//   - WithCPUKind (or NUMAPOOL_PLACES=cores:performance) keeps a pool's
//     workers to one kind, as oneTBB's core-type constraint keeps an
//     arena and libomp's cores:intel_core its places: a pool is a Target,
//     so work sent to it runs on that kind, and two pools of one process
//     may split the machine by kind;
//   - ParallelFor and MapReduce split their range over the nodes in
//     proportion to each node's capacity (the sum of its workers' CPU
//     capacities), not its worker count, so that on a node of slower
//     CPUs the block lasts as long as on the others; inside a node the
//     lazy split already gives the faster workers more;
//   - Worker.Kind, the Kind in WorkerStats and the per-kind sums in
//     Stats.Kinds say where work ran, and Explain warns where a node's
//     workers are all of the least efficient kind.
//
// The kinds and their names ("performance", "efficiency") are the
// topology's (topology.Kind). A machine whose CPUs are all alike, or
// whose kinds differ too little to name, has no such names, and a kind
// setting then keeps every CPU (Explain says so).

// WithCPUKind keeps the pool's workers to CPUs of one kind: "performance"
// (a hybrid machine's full-speed cores: Intel's P-cores, Arm's big cores)
// or "efficiency" (its slower ones: E-cores, little cores), as the
// topology names its kinds (topology.Kind.Name). Nodes without a CPU of
// the kind get no worker. On a machine whose CPUs are all alike (one kind,
// or kinds too alike to name) every CPU is kept.
func WithCPUKind(kind string) Option {
	return optionFunc(func(c *config) error {
		k, err := place.ParseKind(kind)
		if err != nil {
			return fmt.Errorf("pool: WithCPUKind: %w", err)
		}
		c.kind, c.kindSet = k, true
		return nil
	})
}

// Kind returns the name of the kind of the worker's CPU: "performance" or
// "efficiency" on a hybrid machine, "" where the CPUs are all alike.
func (w *Worker) Kind() string { return place.KindName(w.pool.topo, w.cpu) }

// kindStats sums the workers' counters by kind; nil when no worker's CPU
// has a named kind.
func kindStats(ws []WorkerStats) map[string]Counters {
	var out map[string]Counters
	for _, w := range ws {
		if w.Kind == "" {
			continue
		}
		if out == nil {
			out = make(map[string]Counters)
		}
		c := out[w.Kind]
		c.add(w.Counters)
		out[w.Kind] = c
	}
	return out
}
