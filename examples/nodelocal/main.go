// Command nodelocal fills one range with a ParallelFor whose pieces write
// into memory of their own node: a slice per node from pool.AllocOnNode,
// as long as that node's block of the range (Pool.Split), indexed by the
// offset from the block's start. It is the explicit alternative to the
// first touch of examples/quickstart, for data a program places before
// any loop runs.
//
//	NUMAPOOL_TOPOLOGY=2x1 go run ./examples/nodelocal
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
)

func main() {
	p, err := pool.New() // NUMAPOOL_* settings apply
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	if err := run(os.Stdout, p, 1<<20); errors.Is(err, pin.ErrUnsupported) {
		fmt.Println("no NUMA memory placement on this system")
	} else if err != nil {
		log.Fatal(err)
	}
}

// run fills [0, n) with i*i through p, each node into its own slice, and
// prints each node's block and its sum.
func run(out io.Writer, p *pool.Pool, n int) error {
	ctx := context.Background()
	// README.md shows the lines from here to the end of the loop
	// (TestReadmeShowsRun keeps them the same).
	parts, starts := map[int][]float64{}, map[int]int{} // by OS node ID: its block of [0, n), in its memory
	for _, blk := range p.Split(n) {
		s, release, err := pool.AllocOnNode[float64](p.Node(blk.Node), blk.Hi-blk.Lo)
		if err != nil {
			return err
		}
		defer release()
		parts[blk.Node], starts[blk.Node] = s, blk.Lo
	}
	err := p.ParallelFor(ctx, n, 0, func(w *pool.Worker, lo, hi int) error {
		own, start := parts[w.Node()], starts[w.Node()] // no piece leaves its node's block
		for i := lo; i < hi; i++ {
			own[i-start] = float64(i) * float64(i)
		}
		return nil
	})
	if err != nil {
		return err
	}

	for _, blk := range p.Split(n) {
		sum := 0.0
		for _, v := range parts[blk.Node] {
			sum += v
		}
		fmt.Fprintf(out, "node %d: [%d, %d) in its own memory, sum %.0f\n", blk.Node, blk.Lo, blk.Hi, sum)
	}
	return nil
}
