// Command quickstart is the README's first program: a loop over memory
// first touched by the same split, so each node processes the pages it
// holds, and the pool's own account of where its workers are.
//
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
	ctx := context.Background()
	p, err := pool.New() // one worker group per NUMA node; NUMAPOOL_* settings apply
	check(err)
	defer p.Close()

	const n = 1 << 22
	s, release, err := pool.AllocFirstTouch[float64](3 * n) // pages land where first written
	check(err)
	defer release()
	a, b, c := s[:n], s[n:2*n], s[2*n:]
	check(p.ParallelFor(ctx, n, 0, func(_ *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ { // first touch: each node writes its own block
			a[i], b[i], c[i] = 0, 1, 2
		}
		return nil
	}))

	done := map[int]*atomic.Int64{} // by OS node ID (-1: CPUs on no node)
	for _, id := range p.Nodes() {
		done[id] = new(atomic.Int64)
	}
	check(p.ParallelFor(ctx, n, 0, func(w *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ { // the same n: the same blocks on the same nodes
			a[i] = b[i] + 3*c[i]
		}
		done[w.Node()].Add(int64(hi - lo))
		return nil
	}))

	fmt.Println("a[0] =", a[0], "a[n-1] =", a[n-1])
	for _, blk := range p.Split(n) {
		fmt.Printf("node %d: block [%d, %d), %d elements done on node %d\n",
			blk.Node, blk.Lo, blk.Hi, done[blk.Node].Load(), blk.Node)
	}
	fmt.Print(p.Explain())
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
