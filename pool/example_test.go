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

// A function that returns a value runs on the pool, and Run hands back
// its value and error.
func ExampleRun() {
	p, _ := pool.New(pool.WithWorkers(2), pool.WithoutEnv())
	defer p.Close()
	answer, err := pool.Run(p, func(w *pool.Worker) (int, error) {
		return 6 * 7, nil
	})
	fmt.Println(answer, err)
	// Output: 42 <nil>
}

// Async starts functions at once and returns their futures; Wait collects
// the results. From inside a task, Wait runs other tasks meanwhile.
func ExampleAsync() {
	p, _ := pool.New(pool.WithWorkers(2), pool.WithoutEnv())
	defer p.Close()
	var squares []*pool.Future[int]
	for i := 1; i <= 4; i++ {
		squares = append(squares, pool.Async(p, func(*pool.Worker) (int, error) { return i * i, nil }))
	}
	sum := 0
	for _, f := range squares {
		v, err := f.Wait()
		if err != nil {
			panic(err)
		}
		sum += v
	}
	fmt.Println(sum)
	// Output: 30
}

// A caller that stops waiting selects on Done beside its context; the
// function runs on, and the future completes later.
func ExampleFuture_Done() {
	p, _ := pool.New(pool.WithWorkers(1), pool.WithoutEnv())
	defer p.Close()
	release := make(chan struct{})
	f := pool.Async(p, func(*pool.Worker) (string, error) {
		<-release // slow work
		return "done", nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller stops waiting
	select {
	case <-f.Done():
		fmt.Println(f.Wait())
	case <-ctx.Done():
		fmt.Println(ctx.Err())
	}

	close(release)
	<-f.Done()
	fmt.Println(f.Wait())
	// Output:
	// context canceled
	// done <nil>
}

// A node is a place to send work: softly (idle workers of other nodes may
// help), or strictly (only its own workers run it).
func ExamplePool_Node() {
	p, _ := pool.New(pool.WithSpec("2x1"), pool.WithoutEnv()) // two NUMA nodes, even on one
	defer p.Close()
	node, _ := pool.Run(p.Node(1).Strict(), func(w *pool.Worker) (int, error) { return w.Node(), nil })
	fmt.Println("ran on node", node)

	done := make(chan int)
	_ = p.Node(0).Strict().Submit(context.Background(), func(w *pool.Worker) { done <- w.Node() })
	fmt.Println("ran on node", <-done)

	err := p.Node(7).Submit(context.Background(), func(*pool.Worker) {})
	fmt.Println(errors.Is(err, pool.ErrUnknownNode))
	// Output:
	// ran on node 1
	// ran on node 0
	// true
}

// A loop whose body can fail: the first error stops handing out pieces
// and is returned.
func ExamplePool_ParallelFor_error() {
	p, _ := pool.New(pool.WithWorkers(2), pool.WithoutEnv())
	defer p.Close()
	records := make([]string, 1000)
	for i := range records {
		records[i] = "ok"
	}
	records[617] = "corrupt"
	err := p.ParallelFor(context.Background(), len(records), 10, func(_ *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			if records[i] != "ok" {
				return fmt.Errorf("record %d: %s", i, records[i])
			}
		}
		return nil
	})
	fmt.Println(err)
	// Output: record 617: corrupt
}

// A float sum that comes out the same on every run: the chunks depend
// only on n and grain, and their sums are combined in chunk order.
func ExampleMapReduce() {
	p, _ := pool.New(pool.WithoutEnv())
	defer p.Close()
	x := make([]float64, 1_000_000)
	for i := range x {
		x[i] = 1 / float64(i+1)
	}
	harmonic := func() float64 {
		h, err := pool.MapReduce(context.Background(), p, len(x), 10_000,
			func(_ *pool.Worker, lo, hi int) (float64, error) {
				s := 0.0
				for _, v := range x[lo:hi] {
					s += v
				}
				return s, nil
			},
			func(a, b float64) float64 { return a + b })
		if err != nil {
			panic(err)
		}
		return h
	}
	first := harmonic()
	fmt.Println(first)
	fmt.Println(harmonic() == first) // bit for bit, whichever workers ran which chunks
	// Output:
	// 14.392726722865685
	// true
}

// Each worker counts in a value of its own, on cache lines of its own;
// the values are added up once the work is done.
func ExamplePerWorker() {
	p, _ := pool.New(pool.WithoutEnv())
	defer p.Close()
	counts := pool.NewPerWorker[int](p, nil)
	_ = p.ParallelFor(context.Background(), 1_000_000, 0, func(w *pool.Worker, lo, hi int) error {
		c := counts.Get(w) // only tasks on w touch it: no atomics, no sharing
		for i := lo; i < hi; i++ {
			if i%3 == 0 {
				*c++
			}
		}
		return nil
	})
	total := 0
	for _, c := range counts.All() {
		total += *c
	}
	fmt.Println(total)
	// Output: 333334
}

// The first error cancels the group: functions that have not begun are
// skipped. Functions started from outside begin in the order of the
// calls, so a failure early in the order saves the rest.
func ExamplePool_Group_cancel() {
	p, _ := pool.New(pool.WithWorkers(1), pool.WithoutEnv())
	defer p.Close()
	g := p.Group(context.Background())
	var began []int
	for i := range 10 {
		g.Go(func(*pool.Worker) error {
			began = append(began, i) // one worker: no two functions at once
			if i == 3 {
				return errors.New("step 3 failed")
			}
			return nil
		})
	}
	err := g.Wait()
	fmt.Println(err)
	fmt.Println("began:", began)
	// Output:
	// step 3 failed
	// began: [0 1 2 3]
}

// A panic comes back as a *PanicError: one line with %v, the stack too
// with %+v.
func ExamplePanicError() {
	p, _ := pool.New(pool.WithWorkers(1), pool.WithoutEnv())
	defer p.Close()
	_, err := pool.Run(p, func(*pool.Worker) (int, error) {
		panic("record 42: no closing quote")
	})
	var pe *pool.PanicError
	fmt.Println(errors.As(err, &pe))
	fmt.Println(err)
	// Output:
	// true
	// pool: task panicked: record 42: no closing quote
}

// Spawn queues work from inside a task on the task's own worker, where
// idle workers of its node steal it first.
func ExampleWorker_Spawn() {
	p, _ := pool.New(pool.WithWorkers(2), pool.WithoutEnv())
	var sum atomic.Int64
	_ = p.Submit(context.Background(), func(w *pool.Worker) {
		for i := range 10 {
			w.Spawn(func(*pool.Worker) { sum.Add(int64(i)) })
		}
	})
	_ = p.Close() // runs what the task spawned too
	fmt.Println(sum.Load())
	// Output: 45
}

// addTo is a function value made once: SpawnWith passes it its argument
// without a closure, so a spawned task allocates nothing.
func addTo(_ *pool.Worker, x int) { total.Add(int64(x)) }

var total atomic.Int64

func ExampleSpawnWith() {
	p, _ := pool.New(pool.WithWorkers(2), pool.WithoutEnv())
	_ = p.Submit(context.Background(), func(w *pool.Worker) {
		for i := 1; i <= 100; i++ {
			pool.SpawnWith(w, addTo, i)
		}
	})
	_ = p.Close()
	fmt.Println(total.Load())
	// Output: 5050
}

// Split says which node's workers process which part of a ParallelFor's
// range: the same blocks on every call with the same n.
func ExamplePool_Split() {
	p, _ := pool.New(pool.WithSpec("2x1"), pool.WithoutEnv()) // two NUMA nodes, even on one
	defer p.Close()
	for _, b := range p.Split(1000) {
		fmt.Printf("node %d: [%d, %d)\n", b.Node, b.Lo, b.Hi)
	}
	// Output:
	// node 0: [0, 500)
	// node 1: [500, 1000)
}

// AllocFirstTouch leaves each page to the worker that first writes it:
// initialise the slice with the ParallelFor that later processes it, and
// each node's block stays in that node's memory.
func ExampleAllocFirstTouch() {
	p, _ := pool.New(pool.WithoutEnv())
	defer p.Close()
	const n = 1 << 20
	data, release, err := pool.AllocFirstTouch[float64](n)
	if err != nil {
		panic(err)
	}
	defer release()
	ctx := context.Background()
	_ = p.ParallelFor(ctx, n, 0, func(_ *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			data[i] = 1 // the first touch: the page lands on this worker's node
		}
		return nil
	})
	sum, _ := pool.MapReduce(ctx, p, n, 0, func(_ *pool.Worker, lo, hi int) (float64, error) {
		s := 0.0
		for _, v := range data[lo:hi] {
			s += v
		}
		return s, nil
	}, func(a, b float64) float64 { return a + b })
	fmt.Println(sum)
	// Output: 1.048576e+06
}

// AllocOnNode binds a slice to one of the pool's nodes' memory.
func ExampleAllocOnNode() {
	p, _ := pool.New(pool.WithoutEnv())
	defer p.Close()
	node := p.Node(p.Nodes()[0])
	s, release, err := pool.AllocOnNode[int64](node, 4096)
	if errors.Is(err, pin.ErrUnsupported) {
		fmt.Println(4096) // no NUMA placement on this system
		return
	}
	if err != nil {
		panic(err)
	}
	defer release()
	fmt.Println(len(s))
	// Output: 4096
}

// Shutdown gives up when its context is done: what has not started is
// dropped and counted, and its waiters get ErrAbandoned.
func ExamplePool_Shutdown() {
	p, _ := pool.New(pool.WithWorkers(1), pool.WithoutEnv())
	release := make(chan struct{})
	started := make(chan struct{})
	_ = p.Submit(context.Background(), func(*pool.Worker) { close(started); <-release })
	<-started
	f := pool.Async(p, func(*pool.Worker) (int, error) { return 1, nil }) // queued behind it
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dropped, err := p.Shutdown(ctx)
	_, ferr := f.Wait()
	fmt.Println(dropped, errors.Is(err, pool.ErrAbandoned), errors.Is(ferr, pool.ErrAbandoned))
	close(release)
	_ = p.Close()
	// Output: 1 true true
}

// Stats counts what the workers did; Explain says where they are.
func ExamplePool_Stats() {
	p, _ := pool.New(pool.WithWorkers(2), pool.WithoutEnv())
	for range 100 {
		_ = p.Submit(context.Background(), func(*pool.Worker) {})
	}
	_ = p.Close() // after Close the counts are exact
	st := p.Stats()
	fmt.Println(st.Submitted, st.Total.TasksRun, st.Total.Completed, st.BusyWorkers)
	// Output: 100 100 100 0
}

func ExamplePool_Explain() {
	p, _ := pool.New(pool.WithSpec("2x1"), pool.WithoutEnv())
	defer p.Close()
	fmt.Println(strings.SplitN(p.Explain(), ";", 2)[0])
	// Output: numapool: 2 workers on 2 nodes
}

// Two pools split a hybrid machine by CPU kind (here a synthetic one of
// two performance and two efficiency cores): latency-bound work goes to
// the performance pool, background work to the efficiency one.
func ExampleWithCPUKind() {
	fast, err := pool.New(pool.WithSpec("1x2p+2e"), pool.WithCPUKind("performance"), pool.WithoutEnv())
	if err != nil {
		panic(err)
	}
	defer fast.Close()
	slow, err := pool.New(pool.WithSpec("1x2p+2e"), pool.WithCPUKind("efficiency"), pool.WithoutEnv())
	if err != nil {
		panic(err)
	}
	defer slow.Close()
	kind := func(w *pool.Worker) (string, error) { return w.Kind(), nil }
	a, _ := pool.Run(fast, kind)
	b, _ := pool.Run(slow, kind)
	fmt.Println(fast.Workers(), a)
	fmt.Println(slow.Workers(), b)
	// Output:
	// 2 performance
	// 2 efficiency
}
