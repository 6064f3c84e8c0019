package pool_test

import (
	"fmt"
	"sync/atomic"

	"github.com/numapool/numapool/pool"
)

func Example() {
	p, err := pool.New(pool.WithSpec("2x1"), pool.WithoutEnv()) // two NUMA nodes, even on one
	if err != nil {
		panic(err)
	}
	var sum atomic.Int64
	for _, node := range p.Nodes() {
		// Work for a node's data goes to that node's workers.
		_ = p.SubmitTo(node, func(w *pool.Worker) {
			for i := range 4 {
				w.Spawn(func(*pool.Worker) { sum.Add(int64(i)) }) // runs on this node unless stolen
			}
		})
	}
	_ = p.Close() // runs everything queued and spawned, then stops the workers
	fmt.Println(sum.Load(), p.Stats().Total.TasksRun)
	// Output: 12 10
}

func ExamplePool_TrySubmit() {
	p, _ := pool.New(pool.WithWorkers(1), pool.WithShardBound(100), pool.WithoutEnv())
	defer p.Close()
	if err := p.TrySubmit(func(*pool.Worker) {}); err == pool.ErrFull {
		fmt.Println("back off: the node's queue is full")
	}
	fmt.Println("submitted")
	// Output: submitted
}
