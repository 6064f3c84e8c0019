package pool

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// realMemoryNodes is what AllocOnNode accepts: the nodes with memory the
// process may allocate from, as discovery reads them.
func realMemoryNodes(t *testing.T) []int {
	t.Helper()
	var ids []int
	for _, n := range topology.Discover().Nodes {
		if n.HasMemory && n.Allowed {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) == 0 {
		t.Skip("discovery finds no memory node this process may allocate from")
	}
	return ids
}

// wantUnknownMemoryNode fails unless err wraps ErrUnknownNode and names
// the node and the memory nodes there are.
func wantUnknownMemoryNode(t *testing.T, err error, node int, nodes []int) {
	t.Helper()
	var set topology.CPUSet
	for _, n := range nodes {
		set.Add(n)
	}
	if !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("AllocOnNode on node %d: %v, want ErrUnknownNode", node, err)
	}
	for _, want := range []string{fmt.Sprintf("node %d ", node), "memory nodes: " + set.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A node that is none of the machine's memory nodes is ErrUnknownNode,
// named with the nodes there are: one past the last, a negative one, and
// a synthetic node with no real node of its ID. The nodes there are still
// allocate.
func TestAllocOnNodeChecksTheNode(t *testing.T) {
	nodes := realMemoryNodes(t)
	past := slices.Max(nodes) + 1
	t.Run("past the last node", func(t *testing.T) {
		_, _, err := AllocOnNode[float64](past, 1000)
		wantUnknownMemoryNode(t, err, past, nodes)
	})
	t.Run("negative node", func(t *testing.T) {
		_, _, err := AllocOnNode[float64](-1, 1000)
		wantUnknownMemoryNode(t, err, -1, nodes)
	})
	t.Run("empty slice on no node", func(t *testing.T) {
		_, _, err := AllocOnNode[float64](past, 0)
		wantUnknownMemoryNode(t, err, past, nodes)
	})
	t.Run("synthetic node", func(t *testing.T) {
		spec := fmt.Sprintf("%dx1", past+1)
		p := newTestPool(t, WithSpec(spec), WithWorkers(past+1))
		defer p.Close()
		if !slices.Contains(p.Nodes(), past) {
			t.Fatalf("spec %s: nodes %v, want node %d among them", spec, p.Nodes(), past)
		}
		_, _, err := AllocOnNode[float64](past, 1000)
		wantUnknownMemoryNode(t, err, past, nodes)
	})
	t.Run("memory nodes", func(t *testing.T) {
		for _, node := range nodes {
			s, release, err := AllocOnNode[int32](node, 1000)
			if errors.Is(err, pin.ErrUnsupported) {
				t.Skip(err)
			}
			if err != nil || len(s) != 1000 {
				t.Fatalf("node %d: %d elements, %v", node, len(s), err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A length that is negative or whose byte count overflows an int is an
// error naming it (and the element size); n == 0 is an empty slice whose
// release succeeds.
func TestAllocLengths(t *testing.T) {
	node := realMemoryNodes(t)[0]
	// 8 * wraps is 2^IntSize + 8: it wraps around to 8 bytes.
	wraps := 1<<(strconv.IntSize-3) + 1
	allocs := map[string]func(n int) ([]float64, func() error, error){
		"AllocOnNode":     func(n int) ([]float64, func() error, error) { return AllocOnNode[float64](node, n) },
		"AllocFirstTouch": AllocFirstTouch[float64],
	}
	for name, alloc := range allocs {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				n    int
				want []string
			}{
				{-1, []string{"negative length -1"}},
				{wraps, []string{fmt.Sprintf("%d elements of 8 bytes", wraps)}},
			} {
				s, _, err := alloc(tc.n)
				if err == nil {
					t.Errorf("%s of %d elements: %d elements, no error", name, tc.n, len(s))
					continue
				}
				for _, want := range append(tc.want, "pool: "+name+"(") {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s of %d elements: error %q does not say %q", name, tc.n, err, want)
					}
				}
			}
			s, release, err := alloc(0)
			if errors.Is(err, pin.ErrUnsupported) {
				t.Skip(err)
			}
			if err != nil || len(s) != 0 || release == nil || release() != nil {
				t.Fatalf("%s of 0 elements: %d elements, %v", name, len(s), err)
			}
		})
	}
}

// A second release frees nothing and says the slice was released already,
// whichever way the slice was made.
func TestAllocReleaseTwice(t *testing.T) {
	node := realMemoryNodes(t)[0]
	unsupported := func(int) ([]byte, func() error, error) { return nil, nil, pin.ErrUnsupported }
	for _, tc := range []struct {
		name  string
		alloc func() ([]float64, func() error, error)
	}{
		{"AllocOnNode", func() ([]float64, func() error, error) { return AllocOnNode[float64](node, 1<<12) }},
		{"AllocOnNode empty", func() ([]float64, func() error, error) { return AllocOnNode[float64](node, 0) }},
		{"AllocFirstTouch", func() ([]float64, func() error, error) { return AllocFirstTouch[float64](1 << 12) }},
		{"AllocFirstTouch without placement", func() ([]float64, func() error, error) { return firstTouch[float64](1<<12, unsupported) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, release, err := tc.alloc()
			if errors.Is(err, pin.ErrUnsupported) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := release(); err != nil {
				t.Fatalf("first release: %v", err)
			}
			if err := release(); err == nil || err.Error() != "pool: slice already released" {
				t.Fatalf("second release: %v, want \"pool: slice already released\"", err)
			}
		})
	}
}

// A synthetic topology's Explain says its nodes have no memory of their
// own and names the real memory nodes AllocOnNode takes; a real one says
// nothing of the kind.
func TestExplainSaysWhereSyntheticMemoryIs(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	ex := p.Explain()
	want := "memory: synthetic nodes have none of their own; AllocOnNode takes the real memory nodes " + p.topo.AllowedMems.String()
	if !strings.Contains(ex, want) || p.topo.AllowedMems.IsEmpty() {
		t.Errorf("Explain of a 2x1 pool does not say %q:\n%s", want, ex)
	}
	_, release, err := AllocOnNode[byte](p.topo.AllowedMems.First(), 4096)
	switch {
	case err == nil:
		_ = release()
	case !errors.Is(err, pin.ErrUnsupported):
		t.Errorf("AllocOnNode on the memory node Explain names: %v", err)
	}
	real := newTestPool(t, WithWorkers(1))
	defer real.Close()
	if ex := real.Explain(); strings.Contains(ex, "synthetic nodes") {
		t.Errorf("Explain of a real topology speaks of synthetic nodes:\n%s", ex)
	}
}
