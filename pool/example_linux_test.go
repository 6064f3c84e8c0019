package pool_test

import (
	"context"
	"fmt"

	"github.com/numapool/numapool/pool"
)

// A task that waits, without Worker.Block, for a task queued after it:
// on a pool of one running worker that would never end. With workers in
// reserve (WithMaxWorkers above WithWorkers), one stands in while the
// first is blocked, and runs the second. (Linux: the block watch reads
// the threads' CPU clocks.)
func ExampleWithMaxWorkers_standIns() {
	p, err := pool.New(pool.WithSpec("1x1"), pool.WithWorkers(1), pool.WithMaxWorkers(4), pool.WithoutEnv())
	if err != nil {
		panic(err)
	}
	release, done := make(chan struct{}), make(chan struct{})
	_ = p.Submit(context.Background(), func(*pool.Worker) {
		<-release // holds the only running worker
		close(done)
	})
	_ = p.Submit(context.Background(), func(*pool.Worker) { close(release) })
	<-done
	_ = p.Close()
	fmt.Println("released by a stand-in:", p.Stats().StandInsStarted > 0)
	// Output: released by a stand-in: true
}
