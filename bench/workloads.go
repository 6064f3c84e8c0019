package bench

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/pool"
)

// A Workload is one measured job. Its run returns the figure for one
// repetition in Unit, and extra figures by name.
type Workload struct {
	Name   string
	Unit   string
	Higher bool // higher is better (throughput); otherwise lower (time)
	About  string
	run    func(r *runner, scale float64) (float64, map[string]float64, error)
}

// Workloads returns the suite in order.
func Workloads() []Workload {
	return []Workload{
		{"spawn", "ns/task", false, "10^6 empty tasks submitted from one goroutine", runSpawn},
		{"spawn-local", "ns/task", false, "the same spawned from inside tasks", runSpawnLocal},
		{"fib-12", "ms", false, "fork-join fib(32), sequential below 12", func(r *runner, s float64) (float64, map[string]float64, error) { return runFib(r, s, 12) }},
		{"fib-20", "ms", false, "fork-join fib(32), sequential below 20", func(r *runner, s float64) (float64, map[string]float64, error) { return runFib(r, s, 20) }},
		{"triad", "GB/s", true, "a = b + 3c over 3 arrays sized from the last-level caches, first touched by the same split", runTriad},
		{"reduce", "ms", false, "sum of square roots over 2^24 indexes (compute bound)", runReduce},
		{"uts", "Mnodes/s", true, "unbalanced tree search, geometric branching, fixed seed, ~10^6 nodes", runUTS},
		{"pingpong", "µs", false, "hand one task over and wait for it, repeat: pool.Run for numapool, a channel for the others (median; p99 in extras)", runPingPong},
		{"pingpong-2x1", "µs", false, "the same with numapool's pool on two synthetic one-CPU nodes (a 2x1 spec over this machine's CPUs), the others as in pingpong", runPingPong2x1},
		{"pingpong-spaced", "µs", false, "pingpong with a pause of 200µs before each hand-off, longer than the default block time: a passive pool's workers sleep in between, as a service's do between requests", func(r *runner, s float64) (float64, map[string]float64, error) {
			return runHandOffs(r, s, pauseRounds, pause)
		}},
		{"pingpong-spaced-2x1", "µs", false, "the same on the 2x1 pool of pingpong-2x1", func(r *runner, s float64) (float64, map[string]float64, error) {
			return on2x1(r, func() (float64, map[string]float64, error) { return runHandOffs(r, s, pauseRounds, pause) })
		}},
		{"pipeline", "Mitems/s", true, "parse -> transform -> reduce over chunks of ~1µs, at most 256 in flight", func(r *runner, s float64) (float64, map[string]float64, error) { return runPipeline(r, s, 32) }},
		{"pipeline-10us", "Mitems/s", true, "the same over chunks of ~10µs (closer to real parsing)", func(r *runner, s float64) (float64, map[string]float64, error) { return runPipeline(r, s, 320) }},
		{"blocking", "ms", false, "20,000 tasks submitted from one goroutine, each 10µs of compute, every tenth blocked 1ms in a system call (nanosleep) first, marked on numapool (Worker.Block)", func(r *runner, s float64) (float64, map[string]float64, error) {
			return runBlocking(r, s, func() { blockIn(time.Millisecond) })
		}},
		{"blocking-sleep", "ms", false, "the same blocked in time.Sleep, which the Go runtime sees (as a channel, a lock or a network read)", func(r *runner, s float64) (float64, map[string]float64, error) {
			return runBlocking(r, s, func() { time.Sleep(time.Millisecond) })
		}},
	}
}

func scaled(n int, s float64) int { return max(1, int(float64(n)*s)) }

func since(start time.Time) float64 { return float64(time.Since(start).Nanoseconds()) }

func runSpawn(r *runner, s float64) (float64, map[string]float64, error) {
	n := scaled(1_000_000, s)
	var sink atomic.Int64
	start := time.Now()
	for range n {
		r.submit(func() { sink.Add(1) })
	}
	r.wait()
	return since(start) / float64(n), nil, nil
}

func runSpawnLocal(r *runner, s float64) (float64, map[string]float64, error) {
	n := scaled(1_000_000, s)
	roots := r.workers
	per := n / roots
	var wg sync.WaitGroup
	var sink atomic.Int64
	leaf := func() { sink.Add(1); wg.Done() }
	start := time.Now()
	wg.Add(roots * per)
	switch r.c.kind {
	case kindNumapool:
		leafW := func(*pool.Worker) { leaf() } // one function value, as the others spawn
		for range roots {
			_ = r.p.Submit(context.Background(), func(w *pool.Worker) {
				for range per {
					w.Spawn(leafW)
				}
			})
		}
	case kindGoroutines:
		for range roots {
			go func() {
				for range per {
					go leaf()
				}
			}()
		}
	case kindPond:
		for range roots {
			r.pond.Go(func() {
				for range per {
					r.pond.Go(leaf)
				}
			})
		}
	case kindSequential:
		for range roots * per {
			leaf()
		}
	default:
		return 0, nil, na("submitting from inside a task blocks when the pool is full: its workers would wait on themselves")
	}
	wg.Wait()
	return since(start) / float64(roots*per), nil, nil
}

func fibSeq(n int) int {
	if n < 2 {
		return n
	}
	return fibSeq(n-1) + fibSeq(n-2)
}

// fibArg is fib's input for Fork: the halves take it as an argument, so
// a Fork nobody steals from allocates nothing.
type fibArg struct{ n, cutoff int }

func fibFork(w *pool.Worker, a fibArg) int {
	if a.n <= a.cutoff {
		return fibSeq(a.n)
	}
	x, y, err := pool.Fork(w, fibFork, fibArg{a.n - 1, a.cutoff}, fibFork, fibArg{a.n - 2, a.cutoff})
	if err != nil {
		panic(err)
	}
	return x + y
}

func fibGo(n, cutoff int) int {
	if n <= cutoff {
		return fibSeq(n)
	}
	var a int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a = fibGo(n-1, cutoff) }()
	b := fibGo(n-2, cutoff)
	wg.Wait()
	return a + b
}

func runFib(r *runner, s float64, cutoff int) (float64, map[string]float64, error) {
	n := 32
	if s < 0.5 {
		n = 28
	}
	var got int
	start := time.Now()
	switch r.c.kind {
	case kindNumapool:
		ch := make(chan int)
		_ = r.p.Submit(context.Background(), func(w *pool.Worker) { ch <- fibFork(w, fibArg{n, cutoff}) })
		got = <-ch
	case kindGoroutines:
		got = fibGo(n, cutoff)
	case kindSequential:
		got = fibSeq(n)
	case kindErrgroup:
		return 0, nil, na("nested Wait under SetLimit deadlocks once every slot waits on its children")
	default:
		return 0, nil, na("a task waiting for tasks it submitted to the same fixed-size pool can deadlock")
	}
	ms := since(start) / 1e6
	if got != fibSeq(n) {
		panic("bench: wrong fib result")
	}
	return ms, nil, nil
}

// parallelFor runs body over [0, n) the contender's way: numapool's
// ParallelFor, or one contiguous chunk per worker for the others.
func parallelFor(r *runner, n int, body func(lo, hi int)) {
	switch r.c.kind {
	case kindNumapool:
		_ = r.p.ParallelFor(context.Background(), n, 0, func(_ *pool.Worker, lo, hi int) error { body(lo, hi); return nil })
	case kindSequential:
		body(0, n)
	default:
		parts := r.workers
		for k := range parts {
			lo, hi := n*k/parts, n*(k+1)/parts
			r.submit(func() { body(lo, hi) })
		}
		r.wait()
	}
}

// runTriad times reps passes of a = b + 3c over arrays sized from the
// machine (memorySizing), allocated and first-touched as the contender's
// users would (allocArrays), then runs one more pass, untimed, that
// records where each chunk ran and where its pages are (localShare).
func runTriad(r *runner, s float64) (float64, map[string]float64, error) {
	sz := r.memory()
	n := sz.arrayElems(3, s)
	arrays, release, how, err := allocArrays(r, 3, n)
	if err != nil {
		return 0, nil, err
	}
	defer release()
	a, b, c := arrays[0], arrays[1], arrays[2]
	const reps = 10
	start := time.Now()
	for range reps {
		parallelFor(r, n, func(lo, hi int) { triadKernel(a, b, c, lo, hi) })
	}
	gbs := 24 * float64(n) * reps / since(start) // bytes per ns = GB/s
	rec := &localityRecorder{arrays: arrays}
	parallelFor(r, n, func(lo, hi int) { rec.run(lo, hi, func(lo, hi int) { triadKernel(a, b, c, lo, hi) }) })
	r.facts = sz.facts(24*int64(n), how)
	if pct, err := rec.share(); err == nil {
		r.facts.LocalPct = &pct
	}
	return gbs, nil, nil
}

func runReduce(r *runner, s float64) (float64, map[string]float64, error) {
	n := scaled(1<<24, s)
	var mu sync.Mutex
	total := 0.0
	start := time.Now()
	parallelFor(r, n, func(lo, hi int) {
		sum := 0.0
		for i := lo; i < hi; i++ {
			sum += math.Sqrt(float64(i))
		}
		mu.Lock()
		total += sum
		mu.Unlock()
	})
	return since(start) / 1e6, nil, nil
}

// utsChildren returns how many children node id has: 4 with probability
// q, else none (a subcritical binomial tree, so subtrees vary wildly in
// size); the root has many.
func utsChildren(id uint64, rootKids int) int {
	if id == 0 {
		return rootKids
	}
	z := id + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	if float64(z>>11)/float64(1<<53) < 0.2475 {
		return 4
	}
	return 0
}

func utsChild(id uint64, k int) uint64 { return id*5 + uint64(k) + 1 }

// utsWork stands for UTS's per-node SHA-1: a few hundred nanoseconds of
// hashing, so that the benchmark measures scheduling of real work.
func utsWork(id uint64) uint64 {
	z := id
	for range 256 {
		z ^= z >> 31
		z *= 0xbf58476d1ce4e5b9
	}
	return z
}

var utsSink atomic.Uint64

func runUTS(r *runner, s float64) (float64, map[string]float64, error) {
	rootKids := scaled(12000, s) // about 10^6 nodes at full size (q*m = 0.99)
	var count atomic.Int64
	var pending atomic.Int64
	done := make(chan struct{})
	finish := func() {
		if pending.Add(-1) == 0 {
			close(done)
		}
	}
	// enter visits one tree node and returns its number of children, which
	// the caller hands out (utsChild(id, k)) before it calls finish.
	enter := func(id uint64) int {
		count.Add(1)
		utsSink.Add(utsWork(id))
		kids := utsChildren(id, rootKids)
		pending.Add(int64(kids))
		return kids
	}
	start := time.Now()
	switch r.c.kind {
	case kindNumapool:
		// SpawnWith passes the child's id without a closure per task.
		var visit func(w *pool.Worker, id uint64)
		visit = func(w *pool.Worker, id uint64) {
			for k := range enter(id) {
				pool.SpawnWith(w, visit, utsChild(id, k))
			}
			finish()
		}
		pending.Store(1)
		_ = r.p.Submit(context.Background(), func(w *pool.Worker) { visit(w, 0) })
	case kindGoroutines, kindPond:
		var visit func(id uint64)
		visit = func(id uint64) {
			for k := range enter(id) {
				c := utsChild(id, k)
				if r.c.kind == kindPond {
					r.pond.Go(func() { visit(c) })
				} else {
					go visit(c)
				}
			}
			finish()
		}
		pending.Store(1)
		go visit(0)
	case kindSequential:
		stack := []uint64{0}
		for len(stack) > 0 {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			count.Add(1)
			utsSink.Add(utsWork(id))
			for k := range utsChildren(id, rootKids) {
				stack = append(stack, utsChild(id, k))
			}
		}
		return float64(count.Load()) / since(start) * 1e3, map[string]float64{"nodes": float64(count.Load())}, nil
	default:
		return 0, nil, na("submitting from inside a task blocks when the pool is full: its workers would wait on themselves")
	}
	<-done
	return float64(count.Load()) / since(start) * 1e3, map[string]float64{"nodes": float64(count.Load())}, nil
}

func pong(*pool.Worker) (struct{}, error) { return struct{}{}, nil }

func runPingPong(r *runner, s float64) (float64, map[string]float64, error) {
	return runHandOffs(r, s, 10000, 0)
}

// The pause case: hand-offs pause apart, longer than DefaultBlockTime, so
// that each one finds a passive pool asleep.
const (
	pause       = 200 * time.Microsecond
	pauseRounds = 2000
)

// runHandOffs hands one task over rounds (scaled by s) times, gap apart,
// and reports the median round trip in µs and the 99th percentile.
func runHandOffs(r *runner, s float64, rounds int, gap time.Duration) (float64, map[string]float64, error) {
	if r.c.kind == kindSequential {
		return 0, nil, na("nothing is handed to another thread")
	}
	rounds = scaled(rounds, s)
	lat := make([]float64, rounds)
	ch := make(chan struct{})
	for i := range rounds {
		if gap > 0 {
			time.Sleep(gap)
		}
		start := time.Now()
		switch r.c.kind {
		case kindNumapool: // the pool's own waiting primitive
			if _, err := pool.Run(r.p, pong); err != nil {
				return 0, nil, err
			}
		default:
			r.submit(func() { ch <- struct{}{} })
			<-ch
			r.wait()
		}
		lat[i] = since(start) / 1e3
	}
	slices.Sort(lat)
	return lat[rounds/2], map[string]float64{"p99": lat[rounds*99/100]}, nil
}

// runPingPong2x1 is runPingPong with the numapool contenders on a pool of
// two synthetic nodes of one CPU each.
func runPingPong2x1(r *runner, s float64) (float64, map[string]float64, error) {
	return on2x1(r, func() (float64, map[string]float64, error) { return runPingPong(r, s) })
}

// on2x1 runs run with the numapool contenders on a pool of two synthetic
// nodes of one CPU each, made with the contender's options: the hand-off
// across nodes that a multi-node machine has. The other contenders run
// as they are.
func on2x1(r *runner, run func() (float64, map[string]float64, error)) (float64, map[string]float64, error) {
	if r.c.kind != kindNumapool {
		return run()
	}
	p, err := pool.New(append(slices.Clone(r.c.opts), pool.WithSpec("2x1"))...)
	if err != nil {
		return 0, nil, err
	}
	defer p.Close()
	own := r.p
	r.p = p
	defer func() { r.p = own }()
	return run()
}

// runPipeline parses, transforms and reduces chunks of perChunk numbers:
// perChunk sets the task size (the workloads' descriptions give the
// sizes they aim at).
func runPipeline(r *runner, s float64, perChunk int) (float64, map[string]float64, error) {
	chunks := scaled(20000*32/perChunk, s)
	line := strings.TrimSpace(strings.Repeat("12345 ", perChunk))
	var sum atomic.Int64
	var wg sync.WaitGroup
	transform := func(vals []int) int {
		t := 0
		for _, v := range vals {
			t += v * v % 1000
		}
		return t
	}
	transformAndReduce := func(vals []int) {
		sum.Add(int64(transform(vals))) // reduce
		wg.Done()
	}
	parse := func() []int {
		fields := strings.Fields(line)
		vals := make([]int, len(fields))
		for i, f := range fields {
			vals[i], _ = strconv.Atoi(f)
		}
		return vals
	}
	start := time.Now()
	wg.Add(chunks)
	switch r.c.kind {
	case kindNumapool:
		// The producer is a task, as a numapool user writes it: a Group
		// limited to the same 256 chunks in flight, whose Go runs other
		// tasks while the limit is reached (a producer outside the pool
		// would wait for a processor held by the workers). Each worker
		// reduces into its own padded cell (PerWorker), added up at the
		// end.
		p := r.p
		sums := pool.NewPerWorker(p, func() int64 { return 0 })
		task := func(w *pool.Worker) error {
			*sums.Get(w) += int64(transform(parse()))
			wg.Done()
			return nil
		}
		_, _ = pool.Run(p, func(w *pool.Worker) (struct{}, error) {
			g := p.Group(context.Background())
			g.SetLimit(256)
			for range chunks {
				g.Go(task)
			}
			return struct{}{}, g.Wait()
		})
		wg.Wait()
		for _, s := range sums.All() {
			sum.Add(*s)
		}
	case kindGoroutines:
		sem := make(chan struct{}, 256) // the same bound, as a semaphore
		for range chunks {
			sem <- struct{}{}
			go func() {
				vals := parse()
				<-sem
				go transformAndReduce(vals)
			}()
		}
		wg.Wait()
	case kindPond:
		for range chunks {
			r.pond.Go(func() {
				vals := parse()
				r.pond.Go(func() { transformAndReduce(vals) })
			})
		}
		wg.Wait()
	case kindSequential:
		for range chunks {
			transformAndReduce(parse())
		}
	default:
		for range chunks {
			r.submit(func() { transformAndReduce(parse()) }) // both stages in one task
		}
		wg.Wait()
		r.wait()
	}
	return float64(chunks*perChunk) / since(start) * 1e3, nil, nil
}

// runBlocking is a pipeline stage whose tasks now and then wait in the
// kernel (a read, a call to a service): a pool whose workers are locked to
// their threads waits with them, goroutines do not.
func runBlocking(r *runner, s float64, block func()) (float64, map[string]float64, error) {
	const compute = 10 * time.Microsecond
	n := scaled(20_000, s)
	var sink atomic.Int64
	work := func() {
		x := int64(0)
		for t := time.Now(); time.Since(t) < compute; x++ {
		}
		sink.Add(x)
	}
	start := time.Now()
	for i := range n {
		if i%10 == 9 {
			r.submitBlocking(block, work)
		} else {
			r.submit(work)
		}
	}
	r.wait()
	return since(start) / 1e6, nil, nil
}
