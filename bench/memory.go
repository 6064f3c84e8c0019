package bench

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/topology"
)

// The memory workloads size their arrays from the machine: together they
// take llcMultiple times the last-level caches of the allowed CPUs at the
// full size (scale 1), so that at the quick size (0.5) they are still four
// times the caches and every pass streams from memory, not from cache. A
// memory budget bounds them: budgetShare of the memory of the nodes the
// process may allocate from, at most budgetCap, or Config.MemoryBudget.
const (
	llcMultiple = 8
	budgetShare = 4 // a quarter of the allowed nodes' memory
	budgetCap   = 16 << 30
	// assumedLLC stands in for a last-level cache nobody reports: the L3
	// of one socket of a current server.
	assumedLLC = 32 << 20
	// minArrayBytes keeps a tiny test size an array of many pages.
	minArrayBytes = 512 << 10
)

// memorySizing is what the memory workloads are sized against.
type memorySizing struct {
	llc    int64 // bytes of last-level cache of the allowed CPUs, all domains together
	budget int64 // bytes the workload's arrays may take together
	nodes  int   // memory nodes the process may allocate from
}

// sizingFor returns the sizing for topology t, with llc or budget, when
// positive, instead of what t says.
func sizingFor(t *topology.Topology, llc, budget int64) memorySizing {
	s := memorySizing{llc: llc, budget: budget, nodes: max(1, t.AllowedMems.Len())}
	if s.llc <= 0 {
		s.llc = lastLevelCaches(t)
	}
	if s.budget <= 0 {
		s.budget = memoryBudget(t)
	}
	return s
}

// lastLevelCaches returns the bytes of every last-level cache instance
// that serves an allowed CPU, each counted once (an L3 domain per CCX or
// per socket); from cpuid's L3 once per package when sysfs gives no
// caches, and assumedLLC when nothing does.
func lastLevelCaches(t *topology.Topology) int64 {
	seen := map[int]bool{}
	var sum int64
	for _, c := range t.CPUs {
		if !c.Allowed || c.LastLevelCache < 0 || seen[c.LastLevelCache] {
			continue
		}
		seen[c.LastLevelCache] = true
		sum += t.Caches[c.LastLevelCache].SizeBytes
	}
	if sum > 0 {
		return sum
	}
	if t.Machine.L3 > 0 {
		return t.Machine.L3 * int64(max(1, len(t.Packages)))
	}
	return assumedLLC
}

// memoryBudget returns budgetShare of the memory of the nodes the
// process may allocate from (of the machine's, when nodes do not say),
// at most budgetCap.
func memoryBudget(t *topology.Topology) int64 {
	var mem int64
	for _, n := range t.Nodes {
		if n.Allowed && n.HasMemory && n.MemoryBytes > 0 {
			mem += n.MemoryBytes
		}
	}
	if mem <= 0 {
		mem = t.Machine.MemoryBytes
	}
	if mem <= 0 {
		return budgetCap
	}
	return min(mem/budgetShare, budgetCap)
}

// arrayElems returns the length of each of k float64 arrays that together
// take at least llcMultiple*scale times s.llc, within s.budget, at least
// minArrayBytes each; a multiple of a huge page's elements when it is
// longer, so that first touch by node blocks splits no huge page more
// than it must (rounded up, or down where up would pass the budget).
func (s memorySizing) arrayElems(k int, scale float64) int {
	budget := s.budget / int64(k) / 8
	per := int64(math.Ceil(float64(llcMultiple*s.llc) * scale / float64(k) / 8))
	per = max(min(per, budget), minArrayBytes/8)
	if huge := int64(pin.HugePageSize() / 8); per > huge {
		if up := (per + huge - 1) / huge * huge; up <= budget {
			per = up
		} else {
			per -= per % huge
		}
	}
	return int(per)
}

// facts returns the MemoryFacts of arrays of bytes together sized by s
// and allocated as how says, without the locality.
func (s memorySizing) facts(bytes int64, how string) *MemoryFacts {
	return &MemoryFacts{Bytes: bytes, LLCBytes: s.llc, BudgetBytes: s.budget, MemoryNodes: s.nodes, Allocation: how}
}

// A chunkSample is one chunk of a memory workload's pass: the bytes it
// processed, the node pin.CurrentCPU reported at its start and at its end (-1
// when it failed), and the nodes of its sampled pages (-1 for a page
// not present).
type chunkSample struct {
	bytes              int64
	startNode, endNode int
	pages              []int
}

// localShare returns the share (%) of the samples' bytes processed on the
// node that holds them. A chunk runs on a node when pin.CurrentCPU reports that
// node at both its start and its end; one that moved, or whose CurrentCPU
// failed, ran on no node and counts as remote. A chunk's bytes count as
// local in proportion to its sampled pages on the node it ran on. No
// bytes give 0.
func localShare(samples []chunkSample) float64 {
	var local, all float64
	for _, c := range samples {
		all += float64(c.bytes)
		if c.startNode < 0 || c.startNode != c.endNode || len(c.pages) == 0 {
			continue
		}
		on := 0
		for _, n := range c.pages {
			if n == c.startNode {
				on++
			}
		}
		local += float64(c.bytes) * float64(on) / float64(len(c.pages))
	}
	if all == 0 {
		return 0
	}
	return 100 * local / all
}

// A localityRecorder collects the chunks of one pass over arrays of
// float64. The pages it samples per chunk are, in each array, the pages
// of the chunk's first, middle and last element.
type localityRecorder struct {
	arrays [][]float64
	mu     sync.Mutex
	chunks []chunkSample
	err    error
}

// run runs body over [lo, hi) and records the chunk: pin.CurrentCPU right before
// and right after body, then the sampled pages' nodes.
func (rec *localityRecorder) run(lo, hi int, body func(lo, hi int)) {
	_, start, err0 := pin.CurrentCPU()
	body(lo, hi)
	_, end, err1 := pin.CurrentCPU()
	if err := errors.Join(err0, err1); err != nil {
		start, end = -1, -1
		rec.fail(err)
	}
	if hi <= lo {
		return
	}
	c := chunkSample{bytes: int64(hi-lo) * 8 * int64(len(rec.arrays)), startNode: start, endNode: end}
	for _, a := range rec.arrays {
		for _, i := range [3]int{lo, lo + (hi-lo)/2, hi - 1} {
			nodes, err := pin.PageNodes(unsafe.Slice((*byte)(unsafe.Pointer(&a[i])), 8))
			if err != nil || len(nodes) != 1 {
				rec.fail(fmt.Errorf("bench: page of element %d: %v", i, err))
				c.pages = append(c.pages, -1)
				continue
			}
			c.pages = append(c.pages, nodes[0])
		}
	}
	rec.mu.Lock()
	rec.chunks = append(rec.chunks, c)
	rec.mu.Unlock()
}

func (rec *localityRecorder) fail(err error) {
	rec.mu.Lock()
	if rec.err == nil {
		rec.err = err
	}
	rec.mu.Unlock()
}

// share returns localShare of the recorded chunks, or the first error.
func (rec *localityRecorder) share() (float64, error) {
	if rec.err != nil {
		return 0, rec.err
	}
	return localShare(rec.chunks), nil
}

// allocArrays returns k arrays of n float64 allocated as the contender's
// users would, first-touched by the split the contender then processes
// them with (parallelFor), and a function that frees them:
//   - numapool: pool.AllocFirstTouch, touched by the pool's ParallelFor;
//   - every other contender: fresh pages from pin.Map (anonymous memory
//     no one has touched, where make could hand out reused heap that Go
//     zeroes on the allocating thread), touched by the contender's own
//     workers, one contiguous chunk each, as a careful Go user writes it;
//     a plain make off Linux, where there is no placement to get right.
func allocArrays(r *runner, k, n int) (arrays [][]float64, release func(), how string, err error) {
	var frees []func() error
	release = func() {
		for _, f := range frees {
			_ = f()
		}
	}
	how = "pin.Map (fresh pages), first touch by its own workers"
	for range k {
		var a []float64
		var free func() error
		if r.c.kind == kindNumapool {
			a, free, err = pool.AllocFirstTouch[float64](n)
			how = "pool.AllocFirstTouch, first touch by ParallelFor"
		} else {
			a, free, err = freshFloats(n)
			if r.c.kind == kindSequential {
				how = "pin.Map (fresh pages), first touch by the one goroutine"
			}
			if errors.Is(err, pin.ErrUnsupported) {
				a, free, err = make([]float64, n), func() error { return nil }, nil
				how = "make (no placement on this system), first touch by its own workers"
			}
		}
		if err != nil {
			release()
			return nil, nil, "", err
		}
		frees = append(frees, free)
		arrays = append(arrays, a)
	}
	parallelFor(r, n, func(lo, hi int) {
		for _, a := range arrays {
			for i := lo; i < hi; i++ {
				a[i] = 0
			}
		}
	})
	return arrays, release, how, nil
}

// freshFloats maps n float64 of anonymous memory with pin.Map.
func freshFloats(n int) ([]float64, func() error, error) {
	b, release, err := pin.Map(n * 8)
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), n), release, nil
}

// Locality is the share of a memory workload's bytes processed on the
// node that holds them, for one contender.
type Locality struct {
	Contender string
	Bytes     int64   // the arrays together
	Chunks    int     // chunks the pass was cut into
	LocalPct  float64 // share of the bytes processed on their node, %
	How       string  // how the arrays were allocated and placed
}

// TriadLocality measures the triad's locality for contender c over arrays
// of bytes together (rounded as the suite rounds them): it starts c,
// allocates and first-touches the arrays as the suite does, runs one
// pass recording every chunk, and stops c. It is the suite's measure,
// for tests on a machine with several nodes.
func TriadLocality(c Contender, bytes int64) (Locality, error) {
	r, err := start(c)
	if err != nil {
		return Locality{}, err
	}
	defer r.stop()
	s := memorySizing{llc: bytes, budget: bytes, nodes: 1}
	n := s.arrayElems(3, 1.0/llcMultiple)
	arrays, release, how, err := allocArrays(r, 3, n)
	if err != nil {
		return Locality{}, err
	}
	defer release()
	rec := &localityRecorder{arrays: arrays}
	a, b, cc := arrays[0], arrays[1], arrays[2]
	parallelFor(r, n, func(lo, hi int) { rec.run(lo, hi, func(lo, hi int) { triadKernel(a, b, cc, lo, hi) }) })
	pct, err := rec.share()
	return Locality{Contender: c.Name, Bytes: int64(n) * 24, Chunks: len(rec.chunks), LocalPct: pct, How: how}, err
}

// triadKernel is the triad's loop over [lo, hi).
func triadKernel(a, b, c []float64, lo, hi int) {
	for i := lo; i < hi; i++ {
		a[i] = b[i] + 3*c[i]
	}
}
