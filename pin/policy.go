package pin

import (
	"fmt"

	"github.com/numapool/numapool/topology"
)

// Policy is a memory policy (set_mempolicy(2), mbind(2)).
type Policy int

const (
	// Default: allocate on the node of the CPU that touches the page first.
	Default Policy = iota
	// Preferred: allocate on the given node, elsewhere when it is full.
	Preferred
	// Bind: allocate only on the given nodes; fail when they are full.
	Bind
	// Interleave: spread pages round-robin over the given nodes.
	Interleave
	// Local: allocate on the node of the CPU that touches the page.
	Local
)

var policyNames = [...]string{Default: "default", Preferred: "preferred", Bind: "bind", Interleave: "interleave", Local: "local"}

func (p Policy) String() string {
	if p < 0 || int(p) >= len(policyNames) {
		return fmt.Sprintf("Policy(%d)", int(p))
	}
	return policyNames[p]
}

// mode is the kernel's MPOL_* number; the constants above follow it.
func (p Policy) mode() int { return int(p) }

// check validates the node set for the policy.
func (p Policy) check(nodes topology.CPUSet) error {
	switch p {
	case Default, Local:
		if !nodes.IsEmpty() {
			return fmt.Errorf("pin: policy %v takes no nodes, got %s", p, nodes)
		}
	case Preferred:
		if nodes.Len() != 1 {
			return fmt.Errorf("pin: policy preferred takes one node, got %q", nodes.String())
		}
	case Bind, Interleave:
		if nodes.IsEmpty() {
			return fmt.Errorf("pin: policy %v needs at least one node", p)
		}
	default:
		return fmt.Errorf("pin: unknown policy %v", p)
	}
	return nil
}
