package pool

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/ants/v2"
)

// Benchmarks of the pool against the usual alternatives, in the same run:
// a goroutine per task with a WaitGroup, and ants. ns/op is per task.

func benchPool(b *testing.B, opts ...Option) *Pool {
	b.Helper()
	p, err := New(append(opts, WithoutEnv())...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// External submission: one goroutine submits b.N empty tasks.
func BenchmarkSubmit(b *testing.B) { benchSubmit(b, context.Background()) }

// BenchmarkSubmitLabels is BenchmarkSubmit under pprof labels: each task
// is queued as its record, with its label set, and its worker switches to
// the set's labels and back (labels.go).
func BenchmarkSubmitLabels(b *testing.B) { benchSubmit(b, benchLabels) }

// benchLabels is a context with pprof labels, as pprof.Do makes.
var benchLabels = pprof.WithLabels(context.Background(), pprof.Labels("job", "bench"))

func benchSubmit(b *testing.B, ctx context.Context) {
	p := benchPool(b)
	var wg sync.WaitGroup
	wg.Add(b.N)
	task := func(*Worker) { wg.Done() }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = p.Submit(ctx, task)
	}
	wg.Wait()
}

func BenchmarkSubmitGoroutine(b *testing.B) {
	var wg sync.WaitGroup
	wg.Add(b.N)
	b.ReportAllocs()
	for range b.N {
		go wg.Done()
	}
	wg.Wait()
}

func BenchmarkSubmitAnts(b *testing.B) {
	ap, err := ants.NewPool(runtime.GOMAXPROCS(0))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ap.ReleaseTimeout(5 * time.Second) }()
	var wg sync.WaitGroup
	wg.Add(b.N)
	task := func() { wg.Done() }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = ap.Submit(task)
	}
	wg.Wait()
}

// Spawning from inside tasks: roots each spawn 1000 children, submitted
// in waves of 64 roots, each wave waited for before the next: a backlog
// of up to 64 000 tasks, the same whatever b.N. (With every root
// submitted at once the backlog grew to b.N tasks, and each task paid for
// growing it: 16-22 B/op of shard segments, 55-70 ns/op, and 120 ns/op at
// -benchtime 2s; in waves, 0 B/op.)
func BenchmarkSpawn(b *testing.B) { benchSpawn(b, context.Background(), spawnWave) }

// BenchmarkSpawnLabels is BenchmarkSpawn with the roots submitted under
// pprof labels, which every child inherits: each child is queued as its
// record, with the root's label set.
func BenchmarkSpawnLabels(b *testing.B) { benchSpawn(b, benchLabels, spawnWave) }

// Tokio's spawn_many shape: a root spawns 1000 children and the caller
// waits for them before the next root, so about a thousand tasks are in
// flight at a time.
func BenchmarkSpawnMany(b *testing.B) { benchSpawn(b, context.Background(), 1) }

func BenchmarkSpawnManyGoroutine(b *testing.B) { benchSpawnGoroutine(b, 1) }

func BenchmarkSpawnGoroutine(b *testing.B) { benchSpawnGoroutine(b, spawnWave) }

// spawnFan is how many children a root spawns; spawnWave how many roots
// BenchmarkSpawn and its peers keep in flight.
const spawnFan, spawnWave = 1000, 64

// spawnRoots runs b.N children in roots of up to spawnFan: root(n)
// starts a root that spawns n children, each of which calls wg.Done.
// It waits for the children after every wave roots.
func spawnRoots(b *testing.B, wg *sync.WaitGroup, wave int, root func(n int)) {
	b.ReportAllocs()
	b.ResetTimer()
	for i, r := 0, 1; i < b.N; i, r = i+spawnFan, r+1 {
		n := min(spawnFan, b.N-i)
		wg.Add(n)
		root(n)
		if r%wave == 0 {
			wg.Wait()
		}
	}
	wg.Wait()
}

// A chain: each task spawns the next, on one worker, with no counter
// shared between workers: what a spawn and its run cost the pool itself
// (the benchmarks above add a WaitGroup every task updates, contended by
// both workers, as their peers' versions do).
func BenchmarkSpawnChain(b *testing.B) {
	p := benchPool(b, WithSpec("1x1"))
	done := make(chan struct{})
	left := b.N
	var hop func(w *Worker)
	hop = func(w *Worker) {
		if left--; left <= 0 {
			close(done)
			return
		}
		w.Spawn(hop)
	}
	b.ReportAllocs()
	b.ResetTimer()
	_ = p.Submit(context.Background(), hop)
	<-done
}

// The same chain with a goroutine per task.
func BenchmarkSpawnChainGoroutine(b *testing.B) {
	done := make(chan struct{})
	left := b.N
	var hop func()
	hop = func() {
		if left--; left <= 0 {
			close(done)
			return
		}
		go hop()
	}
	b.ReportAllocs()
	go hop()
	<-done
}

// benchSpawn is spawnRoots on the pool, each root a task that spawns
// its children.
func benchSpawn(b *testing.B, ctx context.Context, wave int) {
	p := benchPool(b)
	var wg sync.WaitGroup
	leaf := func(*Worker) { wg.Done() }
	spawnRoots(b, &wg, wave, func(n int) {
		_ = p.Submit(ctx, func(w *Worker) {
			for range n {
				w.Spawn(leaf)
			}
		})
	})
}

// benchSpawnGoroutine is benchSpawn with a goroutine per root and child.
func benchSpawnGoroutine(b *testing.B, wave int) {
	var wg sync.WaitGroup
	spawnRoots(b, &wg, wave, func(n int) {
		go func() {
			for range n {
				go wg.Done()
			}
		}()
	})
}

func BenchmarkSpawnAnts(b *testing.B) {
	ap, err := ants.NewPool(runtime.GOMAXPROCS(0), ants.WithNonblocking(false))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ap.ReleaseTimeout(5 * time.Second) }()
	var wg sync.WaitGroup
	leaf := func() { wg.Done() }
	spawnRoots(b, &wg, spawnWave, func(n int) {
		// ants has no spawn-from-inside: a task submitting to its own pool
		// can deadlock a full pool, so the fan-out runs on a goroutine.
		go func() {
			for range n {
				_ = ap.Submit(leaf)
			}
		}()
	})
}

// Ping-pong: submit one task, wait for it, repeat; ns/op is the round
// trip, including waking a parked worker.
func BenchmarkPingPong(b *testing.B) {
	p := benchPool(b)
	done := make(chan struct{})
	task := func(*Worker) { done <- struct{}{} }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = p.Submit(context.Background(), task)
		<-done
	}
}

// The layouts every hand-off benchmark runs on: the machine as it is,
// two synthetic nodes of one worker each, of two workers each (four
// locked workers on this machine's CPUs, whatever their number), and one
// node of four workers, 2x2's one-node counterpart.
var handOffLayouts = []struct {
	name string
	opts []Option
}{
	{"real", nil},
	{"2x1", []Option{WithSpec("2x1")}},
	{"2x2", []Option{WithSpec("2x2")}},
	{"1x4", []Option{WithSpec("1x4")}},
}

// onLayouts runs bench on a pool of each hand-off layout, made with opts
// after the layout's own.
func onLayouts(b *testing.B, bench func(b *testing.B, p *Pool), opts ...Option) {
	for _, l := range handOffLayouts {
		b.Run(l.name, func(b *testing.B) { bench(b, benchPool(b, append(slices.Clone(l.opts), opts...)...)) })
	}
}

// Ping-pong through the pool's own waiting primitive: Run submits and
// waits on the Future (a short spin before it blocks), on every layout.
func BenchmarkPingPongRun(b *testing.B) {
	onLayouts(b, func(b *testing.B, p *Pool) { benchRun(b, p, nil, 0) })
}

// The same with workers that never sleep (WithBlockTime(-1)).
func BenchmarkPingPongRunActive(b *testing.B) {
	onLayouts(b, func(b *testing.B, p *Pool) { benchRun(b, p, nil, 0) }, WithBlockTime(-1))
}

// The same with workers that sleep as soon as they run dry: each
// hand-off wakes a thread.
func BenchmarkPingPongRunBlock0(b *testing.B) {
	onLayouts(b, func(b *testing.B, p *Pool) { benchRun(b, p, nil, 0) }, WithBlockTime(0))
}

// Hand-offs 200µs apart, longer than the default block time: a passive
// pool has gone to sleep before each one, an active one has not.
func BenchmarkPingPongRunSpaced(b *testing.B) {
	onLayouts(b, func(b *testing.B, p *Pool) { benchRun(b, p, nil, 200*time.Microsecond) })
}

func BenchmarkPingPongRunSpacedActive(b *testing.B) {
	onLayouts(b, func(b *testing.B, p *Pool) { benchRun(b, p, nil, 200*time.Microsecond) }, WithBlockTime(-1))
}

// Round trips to p.Node(k), soft and strict: to each node in turn, and
// every one to the last node (one), on every layout. In turn, on two
// CPUs, a node's worker is asleep whenever the other node's searches: only
// half the workers search at once.
func BenchmarkPingPongNode(b *testing.B) {
	for _, mode := range []struct {
		name         string
		strict, turn bool
	}{
		{"soft/turn", false, true}, {"soft/one", false, false},
		{"strict/turn", true, true}, {"strict/one", true, false},
	} {
		b.Run(mode.name, func(b *testing.B) {
			onLayouts(b, func(b *testing.B, p *Pool) {
				ids := p.Nodes()
				if !mode.turn {
					ids = ids[len(ids)-1:]
				}
				var targets []Target
				for _, id := range ids {
					n := p.Node(id)
					if mode.strict {
						n = n.Strict()
					}
					targets = append(targets, n)
				}
				benchRun(b, p, targets, 0)
			})
		})
	}
}

// Several goroutines hand off at once, each Run waiting for its own.
func BenchmarkPingPongRunParallel(b *testing.B) {
	onLayouts(b, func(b *testing.B, p *Pool) {
		fn := func(*Worker) (int, error) { return 1, nil }
		b.SetParallelism(2) // 2 x GOMAXPROCS submitters
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := Run(p, fn); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// benchRun hands one function at a time with Run, gap apart, to p or,
// in turn, to each of targets, and reports the median and 99th
// percentile of the round trips. (Stopping the timer for the gap would
// stop the world to read the allocation counts, which parks the spinning
// workers it means to measure.)
func benchRun(b *testing.B, p *Pool, targets []Target, gap time.Duration) {
	fn := func(*Worker) (int, error) { return 1, nil }
	if targets == nil {
		targets = []Target{p}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if gap > 0 {
			time.Sleep(gap) // counted in ns/op; not in p50 and p99
		}
		start := time.Now()
		if _, err := Run(targets[i%len(targets)], fn); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

func BenchmarkPingPongGoroutine(b *testing.B) {
	done := make(chan struct{})
	b.ReportAllocs()
	for range b.N {
		go func() { done <- struct{}{} }()
		<-done
	}
}

func BenchmarkPingPongAnts(b *testing.B) {
	ap, err := ants.NewPool(runtime.GOMAXPROCS(0))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ap.ReleaseTimeout(5 * time.Second) }()
	done := make(chan struct{})
	task := func() { done <- struct{}{} }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = ap.Submit(task)
		<-done
	}
}

// BenchmarkParallelForSmall is a small loop from outside, back to back: n
// the number of workers, grain 1, an empty body (p50 and p99 of a call),
// and, as the yardstick, a goroutine hand-off timed the same way.
func BenchmarkParallelForSmall(b *testing.B) {
	body := func(*Worker, int, int) error { return nil }
	onLayouts(b, func(b *testing.B, p *Pool) {
		n := p.Workers()
		benchLatency(b, func() {
			if err := p.ParallelFor(context.Background(), n, 1, body); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("goroutine", func(b *testing.B) {
		done := make(chan struct{})
		benchLatency(b, func() {
			go func() { done <- struct{}{} }()
			<-done
		})
	})
}

// benchLatency times b.N calls of call and reports their p50 and p99.
func benchLatency(b *testing.B, call func()) {
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		call()
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// Work that blocks (spare.go): 2,000 tasks submitted from one goroutine,
// each 10µs of compute, every tenth blocked 1ms first, in time.Sleep
// (the Go runtime sees it: the thread's processor goes on at once) or in
// nanosleep (it does not: the runtime's monitor takes the processor back
// after one or more of its ticks) or in a read of a pipe written to 1ms later (the
// runtime's network poller waits for it); ns/op is per task. marked wraps the wait in
// Worker.Block, unmarked does not, goroutine starts one goroutine per
// task. unmarked-reserve is unmarked on a pool with workers in reserve
// to stand in for blocked ones (WithMaxWorkers).
func BenchmarkBlocking(b *testing.B) {
	const n, compute, blocked = 2000, 10 * time.Microsecond, time.Millisecond
	for _, kind := range []struct {
		name  string
		block func()
	}{
		{"sleep", func() { time.Sleep(blocked) }},
		{"nanosleep", func() { sleepInKernel(blocked) }},
		{"pipe", func() { readPipeAfter(blocked) }},
	} {
		run := func(b *testing.B, submit func(wg *sync.WaitGroup, i int)) {
			for range b.N {
				var wg sync.WaitGroup
				wg.Add(n)
				for i := range n {
					submit(&wg, i)
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
		}
		b.Run(kind.name+"/marked", func(b *testing.B) {
			p := benchPool(b)
			run(b, func(wg *sync.WaitGroup, i int) {
				_ = p.Submit(context.Background(), func(w *Worker) {
					defer wg.Done()
					if i%10 == 9 {
						w.Block(kind.block)
					}
					spinFor(compute)
				})
			})
		})
		unmarked := func(b *testing.B, p *Pool) {
			run(b, func(wg *sync.WaitGroup, i int) {
				_ = p.Submit(context.Background(), func(*Worker) {
					defer wg.Done()
					if i%10 == 9 {
						kind.block()
					}
					spinFor(compute)
				})
			})
		}
		b.Run(kind.name+"/unmarked", func(b *testing.B) { unmarked(b, benchPool(b)) })
		b.Run(kind.name+"/unmarked-reserve", func(b *testing.B) {
			// Workers in reserve to stand in for blocked ones (standin.go).
			p := benchPool(b, WithMaxWorkers(32))
			unmarked(b, p)
			b.ReportMetric(float64(p.Stats().StandInsStarted)/float64(b.N), "stand-ins/op")
		})
		b.Run(kind.name+"/goroutine", func(b *testing.B) {
			run(b, func(wg *sync.WaitGroup, i int) {
				go func() {
					defer wg.Done()
					if i%10 == 9 {
						kind.block()
					}
					spinFor(compute)
				}()
			})
		})
	}
}

// BenchmarkBlockingLong is BenchmarkBlocking's sleep with waits of 20ms,
// unmarked on a pool with a reserve of 510 workers (its 2 running need
// hundreds to stand in: each worker computes for half a percent of its
// time), against a goroutine per task; ns/task is per task, ns/op per
// run of 2,000.
func BenchmarkBlockingLong(b *testing.B) {
	const n, compute, blocked = 2000, 10 * time.Microsecond, 20 * time.Millisecond
	run := func(b *testing.B, submit func(fn func())) {
		for range b.N {
			var wg sync.WaitGroup
			wg.Add(n)
			for i := range n {
				submit(func() {
					defer wg.Done()
					if i%10 == 9 {
						time.Sleep(blocked)
					}
					spinFor(compute)
				})
			}
			wg.Wait()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
	}
	b.Run("unmarked-reserve", func(b *testing.B) {
		p := benchPool(b, WithWorkers(2), WithMaxWorkers(512))
		run(b, func(fn func()) { _ = p.Submit(context.Background(), func(*Worker) { fn() }) })
		b.ReportMetric(float64(p.Stats().StandInsStarted)/float64(b.N), "stand-ins/op")
	})
	b.Run("goroutine", func(b *testing.B) { run(b, func(fn func()) { go fn() }) })
}

// readPipeAfter reads a byte from a new pipe that gets one after d.
func readPipeAfter(d time.Duration) {
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	defer r.Close()
	defer w.Close()
	t := time.AfterFunc(d, func() { _, _ = w.Write([]byte{1}) })
	defer t.Stop()
	var b [1]byte
	_, _ = r.Read(b[:])
}

// Submission from 8 goroutines at once, as a pipeline's readers do: each
// submits b.N/8 empty tasks; ns/op is per task. ChanPool, the usual
// alternative, is GOMAXPROCS goroutines reading a buffered channel.
func BenchmarkSubmitFrom8(b *testing.B) {
	p := benchPool(b)
	benchFrom8(b, func(done func()) func() {
		task := func(*Worker) { done() } // one closure for all, as for the channel
		return func() { _ = p.Submit(context.Background(), task) }
	})
}

func BenchmarkSubmitFrom8ChanPool(b *testing.B) {
	tasks := make(chan func(), 1024)
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for fn := range tasks {
				fn()
			}
		}()
	}
	benchFrom8(b, func(done func()) func() { return func() { tasks <- done } })
	close(tasks)
	workers.Wait()
}

// benchFrom8 runs b.N submissions from 8 goroutines with the submit
// function that with makes from the task's completion (done), and waits
// for every task.
func benchFrom8(b *testing.B, with func(done func()) (submit func())) {
	const submitters = 8
	var wg, done sync.WaitGroup
	done.Add(b.N)
	submit := with(done.Done)
	b.ReportAllocs()
	b.ResetTimer()
	for s := range submitters {
		n := b.N / submitters
		if s < b.N%submitters {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				submit()
			}
		}()
	}
	wg.Wait()
	done.Wait()
}
