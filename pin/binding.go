package pin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/numapool/numapool/topology"
)

// ErrUnsupported reports placement that this platform cannot do.
var ErrUnsupported = errors.New("pin: not supported on this platform")

// Binding says how tightly a worker is bound, in OpenMP's words
// (OMP_PLACES).
type Binding int

const (
	// NUMADomains binds a worker to every allowed CPU of its node: the OS
	// balances inside the node and never moves the worker off it.
	NUMADomains Binding = iota
	// Cores binds a worker to the SMT siblings of one core.
	Cores
	// Threads binds a worker to one hardware thread.
	Threads
	// LLCaches binds a worker to the CPUs sharing its last-level cache.
	LLCaches
	// None leaves the thread's mask alone.
	None
	// Goroutines binds nothing and locks nothing: a worker is a plain
	// goroutine, which the Go scheduler runs on whichever thread it has,
	// so a task may move between threads when it blocks or is preempted.
	// Not OpenMP's: a pool fed by other goroutines then hands work over
	// as a channel does, without switching OS threads, since a goroutine
	// locked to a thread can run on no other and every hand-off between
	// it and an unlocked one (a submitter, the collector's workers) is a
	// thread switch.
	Goroutines
)

var bindingNames = [...]string{NUMADomains: "numa_domains", Cores: "cores", Threads: "threads", LLCaches: "ll_caches", None: "none", Goroutines: "goroutines"}

// Valid reports whether b is one of the bindings above.
func (b Binding) Valid() bool { return b >= NUMADomains && b <= Goroutines }

// LocksThread reports whether a worker under b is locked to an OS thread
// (every binding but Goroutines), so that a task's body runs on its
// worker's thread from start to end.
func (b Binding) LocksThread() bool { return b != Goroutines }

func (b Binding) String() string {
	if b < 0 || int(b) >= len(bindingNames) {
		return fmt.Sprintf("Binding(%d)", int(b))
	}
	return bindingNames[b]
}

// ParseBinding parses threads, cores, ll_caches, numa_domains, none or
// goroutines, in any case (OpenMP's values are case-insensitive).
func ParseBinding(s string) (Binding, error) {
	for b, name := range bindingNames {
		if strings.EqualFold(strings.TrimSpace(s), name) {
			return Binding(b), nil
		}
	}
	return 0, fmt.Errorf("pin: unknown binding %q (want threads, cores, ll_caches, numa_domains, none or goroutines)", s)
}

// Place returns the OS CPUs a worker that runs on topology CPU cpu binds
// to under b, restricted to the allowed CPUs; an empty set for None and
// Goroutines.
// A cache domain the topology does not know falls back to the node.
func Place(t *topology.Topology, b Binding, cpu int) (topology.CPUSet, error) {
	c, ok := t.CPU(cpu)
	if !ok {
		return topology.CPUSet{}, fmt.Errorf("pin: CPU %d is not an online CPU of the topology", cpu)
	}
	if !c.Allowed {
		return topology.CPUSet{}, fmt.Errorf("pin: CPU %d is not allowed (allowed: %s)", cpu, t.Allowed)
	}
	var set topology.CPUSet
	switch b {
	case None, Goroutines:
		return topology.CPUSet{}, nil
	case Threads:
		set = topology.NewCPUSet(cpu)
	case Cores:
		set = c.Siblings
	case LLCaches:
		if c.LastLevelCache >= 0 {
			set = t.Caches[c.LastLevelCache].CPUs
			break
		}
		fallthrough
	case NUMADomains:
		if n, ok := t.Node(c.Node); ok {
			set = n.CPUs
		} else {
			set = t.Allowed
		}
	default:
		return topology.CPUSet{}, fmt.Errorf("pin: unknown binding %v", b)
	}
	set = set.And(t.Allowed)
	set.Add(cpu)
	return t.OSCPUs(set), nil
}
