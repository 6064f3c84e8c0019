package topology_test

import (
	"fmt"

	"github.com/numapool/numapool/topology"
)

func ExampleParseCPUList() {
	s, err := topology.ParseCPUList([]byte("0-3,8,16-31:2/8\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Len(), s)
	// Output: 9 0-3,8,16-17,24-25
}

func ExampleSynthetic() {
	real := topology.Fallback("example")
	real.Allowed = topology.NewCPUSet(0, 1) // a 2-CPU machine
	t, err := topology.Synthetic("2x2", real)
	if err != nil {
		panic(err)
	}
	for _, n := range t.Nodes {
		fmt.Printf("node %d: CPUs %s on OS CPUs %s\n", n.ID, n.CPUs, t.OSCPUs(n.CPUs))
	}
	// Output:
	// node 0: CPUs 0-1 on OS CPUs 0-1
	// node 1: CPUs 2-3 on OS CPUs 0-1
}

func ExampleDiscover() {
	t := topology.Discover()
	for _, n := range t.ComputeNodes() {
		_ = n // one worker group per node with allowed CPUs
	}
	fmt.Println(len(t.ComputeNodes()) >= 1)
	// Output: true
}
