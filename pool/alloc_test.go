package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/place"
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

// wantUnknownMemoryNode fails unless err wraps ErrUnknownNode and says
// each of want.
func wantUnknownMemoryNode(t *testing.T, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("AllocOnNode: %v, want ErrUnknownNode", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// AllocOnNode takes a node of the pool: one the pool does not have is
// ErrUnknownNode naming the pool's nodes; a node whose memory the process
// may not allocate from is ErrUnknownNode naming the memory nodes there
// are; the pool's own nodes allocate, a synthetic one on the real node
// its CPUs are on, and a synthetic node on several real nodes is an
// error that names them.
func TestAllocOnNodeChecksTheNode(t *testing.T) {
	nodes := realMemoryNodes(t)
	p := newTestPool(t)
	defer p.Close()
	past := slices.Max(p.Nodes()) + 1
	t.Run("not the pool's", func(t *testing.T) {
		_, _, err := AllocOnNode[float64](p.Node(past), 1000)
		wantUnknownMemoryNode(t, err, fmt.Sprintf("pool: unknown node: %d (the pool's nodes: %v), in AllocOnNode(node %d, 1000)", past, p.Nodes(), past))
	})
	t.Run("memory not allowed", func(t *testing.T) {
		defer func(old func() topology.CPUSet) { place.MemoryNodes = old }(place.MemoryNodes)
		place.MemoryNodes = func() topology.CPUSet { return topology.CPUSet{} }
		_, _, err := AllocOnNode[float64](p.Node(p.Nodes()[0]), 0)
		wantUnknownMemoryNode(t, err, fmt.Sprintf("node %d is not a memory node", p.Nodes()[0]), "memory nodes: none")
	})
	t.Run("pool's nodes", func(t *testing.T) {
		for _, id := range p.Nodes() {
			s, release, err := AllocOnNode[int32](p.Node(id), 1000)
			if errors.Is(err, pin.ErrUnsupported) {
				t.Skip(err)
			}
			if err != nil || len(s) != 1000 {
				t.Fatalf("node %d: %d elements, %v", id, len(s), err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("synthetic nodes", func(t *testing.T) {
		sp := newTestPool(t, WithSpec(fmt.Sprintf("%dx1", past+1)), WithWorkers(past+1))
		defer sp.Close()
		for _, id := range sp.Nodes() {
			s, release, err := AllocOnNode[byte](sp.Node(id), 1<<14)
			if errors.Is(err, pin.ErrUnsupported) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatalf("synthetic node %d: %v", id, err)
			}
			got, err := pin.PageNodes(s)
			if err == nil && !slices.Contains(nodes, got[0]) {
				t.Errorf("synthetic node %d: page on node %d, not a real memory node %v", id, got[0], nodes)
			}
			_ = release()
		}
	})
	t.Run("synthetic node on two real nodes", func(t *testing.T) {
		sp := newTestPool(t, WithSpec("1x2"), WithWorkers(1))
		defer sp.Close()
		cpus := sp.topo.OSCPUs(sp.domains[0].node.CPUs)
		if cpus.Len() < 2 {
			t.Skipf("synthetic node on OS CPUs %s: needs two", cpus)
		}
		defer func(old func() *topology.Topology) { place.RealTopology = old }(place.RealTopology)
		var a, b topology.CPUSet
		a.Add(cpus.First())
		b = cpus.AndNot(a)
		place.RealTopology = func() *topology.Topology {
			return &topology.Topology{Nodes: []topology.Node{{ID: 0, CPUs: a}, {ID: 3, CPUs: b}}}
		}
		_, _, err := AllocOnNode[byte](sp.Node(sp.Nodes()[0]), 1<<14)
		want := fmt.Sprintf("runs on OS CPUs %s, which are on real nodes [0 3]", cpus)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("AllocOnNode: %v, want an error saying %q", err, want)
		}
	})
}

// A length that is negative or whose byte count overflows an int is an
// error naming it (and the element size); n == 0 is an empty slice whose
// release succeeds.
func TestAllocLengths(t *testing.T) {
	realMemoryNodes(t)
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	node := p.Node(p.Nodes()[0])
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
	realMemoryNodes(t)
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	node := p.Node(p.Nodes()[0])
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
// own and that AllocOnNode places theirs on the real memory nodes; a real
// one says nothing of the kind.
func TestExplainSaysWhereSyntheticMemoryIs(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	ex := p.Explain()
	want := "memory: synthetic nodes have none of their own; AllocOnNode places a node's on the real node its CPUs are on (memory nodes " + p.topo.AllowedMems.String() + ")"
	if !strings.Contains(ex, want) || p.topo.AllowedMems.IsEmpty() {
		t.Errorf("Explain of a 2x1 pool does not say %q:\n%s", want, ex)
	}
	_, release, err := AllocOnNode[byte](p.Node(p.Nodes()[1]), 4096)
	switch {
	case err == nil:
		_ = release()
	case !errors.Is(err, pin.ErrUnsupported):
		t.Errorf("AllocOnNode on synthetic node 1: %v", err)
	}
	real := newTestPool(t, WithWorkers(1))
	defer real.Close()
	if ex := real.Explain(); strings.Contains(ex, "synthetic nodes") {
		t.Errorf("Explain of a real topology speaks of synthetic nodes:\n%s", ex)
	}
}

func TestAllocOnNode(t *testing.T) {
	p := newTestPool(t)
	defer p.Close()
	for _, node := range p.Nodes() {
		if node < 0 {
			continue
		}
		s, release, err := AllocOnNode[float64](p.Node(node), 1<<18)
		if errors.Is(err, pin.ErrUnsupported) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := pin.PageNodes(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*8))
		if err != nil {
			t.Fatal(err)
		}
		for i, got := range nodes {
			if got != node {
				t.Fatalf("page %d on node %d, want %d", i, got, node)
			}
		}
		s[len(s)-1] = 1
		if err := release(); err != nil {
			t.Fatal(err)
		}
	}
}

// First touch by ParallelFor puts each node's block on its node. Needs a
// kernel with several nodes (the VM run); on one node it checks nothing
// more than TestParallelForSplitIsStable.
func TestFirstTouchPlacement(t *testing.T) {
	p := newTestPool(t)
	defer p.Close()
	if len(p.Nodes()) < 2 {
		t.Skipf("one NUMA node here (%v): placement needs several", p.Nodes())
	}
	const n = 1 << 22
	data := make([]float64, n) // not yet touched: the kernel places pages at first write
	if err := p.ParallelFor(context.Background(), n, 0, func(_ *Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			data[i] = 1
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize() / 8
	for _, b := range p.Split(n) {
		wrong, total := 0, 0
		for i := b.Lo + page; i < b.Hi-page; i += page {
			got, err := pin.NodeOf(unsafe.Pointer(&data[i]))
			if err != nil {
				t.Fatal(err)
			}
			total++
			if got != b.Node {
				wrong++
			}
		}
		if wrong*10 > total {
			t.Errorf("node %d's block: %d of %d pages elsewhere", b.Node, wrong, total)
		}
	}
}

// Where the platform cannot map memory for placement, AllocFirstTouch
// still gives a zeroed slice of n elements (from make) and a release that
// succeeds; any other failure is returned.
func TestAllocFirstTouchWithoutPlacement(t *testing.T) {
	unsupported := func(int) ([]byte, func() error, error) { return nil, nil, pin.ErrUnsupported }
	s, release, err := firstTouch[float64](1000, unsupported)
	if err != nil || len(s) != 1000 || release == nil || release() != nil {
		t.Fatalf("firstTouch without placement: %d elements, %v", len(s), err)
	}
	for i, v := range s {
		if v != 0 {
			t.Fatalf("s[%d] = %v, want 0", i, v)
		}
	}
	failing := errors.New("mmap: cannot allocate memory")
	broken := func(int) ([]byte, func() error, error) { return nil, nil, failing }
	if _, _, err := firstTouch[float64](1000, broken); !errors.Is(err, failing) {
		t.Fatalf("firstTouch with a failing map returned %v, want %v", err, failing)
	}
}

func TestAllocFirstTouch(t *testing.T) {
	s, release, err := AllocFirstTouch[int32](1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	if err := p.ParallelFor(context.Background(), len(s), 0, func(_ *Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			s[i] = int32(i)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range s {
		if s[i] != int32(i) {
			t.Fatalf("s[%d] = %d", i, s[i])
		}
	}
	nodes, err := pin.PageNodes(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*4))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(nodes, -1) {
		t.Error("a page written by ParallelFor is not present")
	}
}

// AllocOnNode of more than the node's free memory is an error wrapping
// ErrNodeMemory that names the node, the size asked and the free memory,
// before anything is bound: binding more than there is gets the process
// killed by the kernel's OOM killer. Within the free memory, or with the
// free memory unknown, it allocates as before. The free figure here is
// the seam's (place.NodeFree); the last case asks the real node for four times
// its whole memory, only where the free figure can be read (else it
// would bind it).
func TestAllocOnNodeRefusesMoreThanIsFree(t *testing.T) {
	p := newTestPool(t)
	defer p.Close()
	node := -1
	for _, id := range p.Nodes() {
		if id >= 0 {
			node = id
			break
		}
	}
	if node < 0 {
		t.Skip("the pool has no node with an OS ID")
	}
	real := place.NodeFree
	defer func() { place.NodeFree = real }()

	const free = 1 << 20
	place.NodeFree = func(id int) (int64, bool) { return free, id == node }
	const n = 1 << 18 // 2 MiB of float64
	_, _, err := AllocOnNode[float64](p.Node(node), n)
	if errors.Is(err, pin.ErrUnsupported) {
		t.Skip(err)
	}
	if !errors.Is(err, ErrNodeMemory) {
		t.Fatalf("AllocOnNode of 2 MiB with 1 MiB free = %v, want ErrNodeMemory", err)
	}
	for _, want := range []string{fmt.Sprintf("node %d", node), strconv.Itoa(n * 8), strconv.Itoa(free)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for _, c := range []struct {
		name string
		free func(int) (int64, bool)
	}{
		{"within the free memory", func(int) (int64, bool) { return 4 << 20, true }},
		{"free memory unknown", func(int) (int64, bool) { return 0, false }},
	} {
		place.NodeFree = c.free
		s, release, err := AllocOnNode[float64](p.Node(node), n)
		if err != nil {
			t.Errorf("AllocOnNode of 2 MiB, %s = %v, want a slice", c.name, err)
			continue
		}
		s[n-1] = 1
		if err := release(); err != nil {
			t.Error(err)
		}
	}

	place.NodeFree = real
	if mem, ok := real(node); ok {
		var total int64
		for _, nd := range topology.Discover().Nodes {
			if nd.ID == node {
				total = nd.MemoryBytes
			}
		}
		ask := 4 * max(total, mem) / 8
		_, _, err := AllocOnNode[float64](p.Node(node), int(ask))
		if !errors.Is(err, ErrNodeMemory) {
			t.Errorf("AllocOnNode of %d bytes, four times node %d's memory = %v, want ErrNodeMemory", ask*8, node, err)
		}
	}
}
