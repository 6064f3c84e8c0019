// Command quickstart is the README's first program: a pool with one worker
// group per NUMA node, an array first touched by the loop that later reads
// it, and the pool's own account of where its workers are.
//
//	go run ./examples/quickstart
//	NUMAPOOL_TOPOLOGY=2x1 go run ./examples/quickstart   # two synthetic nodes on any machine
package main

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"

	"github.com/numapool/numapool/pool"
)

func main() {
	p, err := pool.New() // one worker group per NUMA node; NUMAPOOL_* settings apply
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	const n = 1 << 22
	// Pages not yet allocated: each lands on the node of the worker that
	// first writes it.
	s, release, err := pool.AllocFirstTouch[float64](3 * n)
	if err != nil {
		log.Fatal(err)
	}
	defer release()
	a, b, c := s[:n], s[n:2*n], s[2*n:]

	ctx := context.Background()
	// First touch: each node's workers write the block they will process.
	if err := p.ParallelFor(ctx, n, 0, func(_ *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			a[i], b[i], c[i] = 0, 1, 2
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}

	// The same n gives the same blocks to the same nodes, so each node
	// reads memory it holds. Count the elements each node processed.
	nodes := p.Nodes() // OS node IDs, ascending
	perNode := make([]atomic.Int64, nodes[len(nodes)-1]+1)
	if err := p.ParallelFor(ctx, n, 0, func(w *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			a[i] = b[i] + 3*c[i]
		}
		perNode[w.Node()].Add(int64(hi - lo))
		return nil
	}); err != nil {
		log.Fatal(err)
	}

	fmt.Printf("a[0] = %v, a[n-1] = %v\n", a[0], a[n-1])
	for _, blk := range p.Split(n) {
		fmt.Printf("node %d: block [%d, %d), processed %d elements on node %d\n",
			blk.Node, blk.Lo, blk.Hi, perNode[blk.Node].Load(), blk.Node)
	}
	fmt.Print(p.Explain())
}
