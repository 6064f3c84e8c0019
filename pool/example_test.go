package pool_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/numapool/numapool/pin"
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
		_ = p.Node(node).Submit(context.Background(), func(w *pool.Worker) {
			for i := range 4 {
				w.Spawn(func(*pool.Worker) { sum.Add(int64(i)) }) // runs on this node unless stolen
			}
		})
	}
	_ = p.Close() // runs everything queued and spawned, then stops the workers
	fmt.Println(sum.Load(), p.Stats().Total.TasksRun)
	// Output: 12 10
}

// A pool fed one small task at a time by ordinary goroutines, where
// placement does not matter: with the goroutines binding its workers are
// plain goroutines, locked to no thread, so a hand-off to them costs no
// switch of OS threads (a task may then change threads mid-way).
func ExampleWithBinding_goroutines() {
	p, err := pool.New(pool.WithBinding(pin.Goroutines), pool.WithoutEnv())
	if err != nil {
		panic(err)
	}
	var sum atomic.Int64
	for i := range 1000 {
		if err := p.Submit(context.Background(), func(*pool.Worker) { sum.Add(int64(i)) }); err != nil {
			panic(err)
		}
	}
	if err := p.Close(); err != nil { // runs everything queued
		panic(err)
	}
	fmt.Println(sum.Load())
	// Output: 499500
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

func fib(w *pool.Worker, n int) int {
	if n < 15 { // below the cutoff, plain recursion is cheaper than splitting
		if n < 2 {
			return n
		}
		return fib(w, n-1) + fib(w, n-2)
	}
	var a, b int
	if err := w.Join(func(w *pool.Worker) { a = fib(w, n-1) }, func(w *pool.Worker) { b = fib(w, n-2) }); err != nil {
		panic(err)
	}
	return a + b
}

func ExampleWorker_Join() {
	p, _ := pool.New(pool.WithoutEnv())
	defer p.Close()
	result := make(chan int)
	_ = p.Submit(context.Background(), func(w *pool.Worker) { result <- fib(w, 25) })
	fmt.Println(<-result)
	// Output: 75025
}

// fibFork is fib with Fork: its halves take n as an argument instead of
// capturing variables, so a Fork nobody steals from allocates nothing.
func fibFork(w *pool.Worker, n int) int {
	if n < 10 { // Fork's split costs less than Join's: a lower cutoff pays
		if n < 2 {
			return n
		}
		return fibFork(w, n-1) + fibFork(w, n-2)
	}
	a, b, err := pool.Fork(w, fibFork, n-1, fibFork, n-2)
	if err != nil {
		panic(err)
	}
	return a + b
}

func ExampleFork() {
	p, _ := pool.New(pool.WithoutEnv())
	defer p.Close()
	n, _ := pool.Run(p, func(w *pool.Worker) (int, error) { return fibFork(w, 25), nil })
	fmt.Println(n)
	// Output: 75025
}

func ExamplePool_Group() {
	p, _ := pool.New(pool.WithoutEnv())
	defer p.Close()
	g := p.Group(context.Background())
	g.SetLimit(4)
	var total atomic.Int64
	for _, file := range []string{"a.csv", "b.csv", "c.csv"} {
		g.Go(func(w *pool.Worker) error {
			if file == "" {
				return errors.New("no file")
			}
			total.Add(int64(len(file)))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		fmt.Println(err)
	}
	fmt.Println(total.Load())
	// Output: 15
}

// A triad over slices whose pages live on the nodes that process them:
// the same Split places the data and runs the loop.
func ExamplePool_ParallelFor() {
	p, _ := pool.New(pool.WithoutEnv())
	defer p.Close()
	const n = 1 << 20
	// First touch: each node's workers write the block they will process,
	// so its pages are allocated on that node. (AllocFirstTouch gives
	// untouched pages; make may hand back heap memory Go already zeroed.)
	s, release, err := pool.AllocFirstTouch[float64](3 * n)
	if err != nil {
		panic(err)
	}
	defer release()
	a, b, c := s[:n], s[n:2*n], s[2*n:]
	_ = p.ParallelFor(context.Background(), n, 0, func(_ *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			a[i], b[i], c[i] = 0, 1, 2
		}
		return nil
	})
	// Every later ParallelFor over n gives the same blocks to the same nodes.
	_ = p.ParallelFor(context.Background(), n, 0, func(_ *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			a[i] = b[i] + 3*c[i]
		}
		return nil
	})
	fmt.Println(a[0], a[n-1])
	// Output: 7 7
}

// A two-stage pipeline: parse on whichever node has room, then sum each
// chunk's numbers on the node that parsed it, with a bounded queue for
// back-pressure.
func Example_pipeline() {
	p, _ := pool.New(pool.WithShardBound(64), pool.WithoutEnv())
	chunks := []string{"1 2 3", "4 5", "6"}
	var sum atomic.Int64
	for _, chunk := range chunks {
		_ = p.Submit(context.Background(), func(w *pool.Worker) { // stage 1: parse
			fields := strings.Fields(chunk)
			w.Spawn(func(*pool.Worker) { // stage 2: reduce, on the same node
				for _, f := range fields {
					v, _ := strconv.Atoi(f)
					sum.Add(int64(v))
				}
			})
		})
	}
	_ = p.Close()
	fmt.Println(sum.Load())
	// Output: 21
}
