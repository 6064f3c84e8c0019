package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Exact accounting of plain tasks, Futures and Join halves while
// several Shutdowns with tiny deadlines and Closes race the drain.
func TestHardShutdownRacesDrainAccounting(t *testing.T) {
	specs := []string{"", "2x2", "4x1", "2x1"}
	for iter := range 60 {
		spec := specs[iter%len(specs)]
		rng := rand.New(rand.NewPCG(uint64(iter), 7))
		opts := specOpts(spec)
		if iter%3 == 0 {
			opts = append(opts, WithShardBound(1+rng.IntN(8)))
		}
		if iter%5 == 0 {
			opts = append(opts, WithPanicHandler(func(any, []byte) {}))
		}
		p := newTestPool(t, opts...)
		var plainAcc, plainRan atomic.Int64
		var futRan, futAband, futOther atomic.Int64
		var joinBRan, joinBAband atomic.Int64
		var dblRun atomic.Int64
		var futMu sync.Mutex
		var futs []*Future[int]
		nodes := p.Nodes()
		var leaf func(depth int) func(*Worker)
		leaf = func(depth int) func(*Worker) {
			var once atomic.Bool
			return func(w *Worker) {
				if once.Swap(true) {
					dblRun.Add(1)
				}
				plainRan.Add(1)
				if depth > 0 {
					for range 2 {
						plainAcc.Add(1)
						w.Spawn(leaf(depth - 1))
					}
					if depth%2 == 0 {
						var bOnce atomic.Bool
						err := w.Join(func(*Worker) { spinFor(time.Microsecond) }, func(*Worker) {
							if bOnce.Swap(true) {
								dblRun.Add(1)
							}
							joinBRan.Add(1)
						})
						if errors.Is(err, ErrAbandoned) {
							joinBAband.Add(1)
						}
					}
					if depth == 3 {
						f := Async(w, func(*Worker) (int, error) { futRan.Add(1); return 1, nil })
						if _, err := f.Wait(); errors.Is(err, ErrAbandoned) {
							futAband.Add(1)
						} else if err != nil {
							futOther.Add(1)
						}
					}
				}
				if iter%5 == 0 && depth == 1 && rng2(depth) {
					panic("x")
				}
			}
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for c := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					var err error
					fn := leaf(i % 6)
					switch (c + i) % 4 {
					case 0:
						err = p.Submit(context.Background(), fn)
					case 1:
						err = p.Node(nodes[i%len(nodes)]).Strict().Submit(context.Background(), fn)
					case 2:
						err = p.TrySubmit(fn)
						if errors.Is(err, ErrFull) {
							continue
						}
					case 3:
						f := Async(p, func(w *Worker) (int, error) { futRan.Add(1); return 0, nil })
						futMu.Lock()
						futs = append(futs, f)
						futMu.Unlock()
						if f.isDone() && errors.Is(f.err, ErrClosed) {
							return
						}
						continue
					}
					if err != nil {
						return
					}
					plainAcc.Add(1)
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		var exits sync.WaitGroup
		var ns [4]int
		var errs [4]error
		for e := range 4 {
			exits.Add(1)
			go func() {
				defer exits.Done()
				if e == 3 {
					errs[e] = p.Close()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng2i(e, iter))*50*time.Microsecond)
				defer cancel()
				ns[e], errs[e] = p.Shutdown(ctx)
			}()
		}
		within(t, 10*time.Second, "exits", func() { exits.Wait() })
		close(stop)
		within(t, 10*time.Second, "clients", func() { wg.Wait() })
		st := p.Stats()
		// Futures from Async(p): they count in abandoned too.
		within(t, 5*time.Second, "outside futures", func() {
			for _, f := range futs {
				_, err := f.Wait()
				if errors.Is(err, ErrAbandoned) {
					futAband.Add(1)
				} else if err != nil && !errors.Is(err, ErrClosed) {
					futOther.Add(1)
				}
			}
		})
		abandoned := int64(st.Abandoned)
		lost := plainAcc.Load() - plainRan.Load()
		other := futAband.Load() + joinBAband.Load()
		if dblRun.Load() != 0 {
			t.Fatalf("iter %d: %d double runs", iter, dblRun.Load())
		}
		if lost+other != abandoned {
			t.Errorf("iter %d (%s): plain accepted %d ran %d (not run %d); futures aband %d, joinB aband %d; Stats.Abandoned %d; exits %v %v",
				iter, specName(spec), plainAcc.Load(), plainRan.Load(), lost, futAband.Load(), joinBAband.Load(), abandoned, ns, errs)
		}
		for e := range 3 {
			// A Shutdown that gave up with tasks still running counted
			// what was dropped until it returned.
			if ns[e] > int(abandoned) || ns[e] != int(abandoned) && !gaveUpEarly(errs[e]) {
				t.Errorf("iter %d: Shutdown %d returned n=%d, %v; Stats.Abandoned=%d", iter, e, ns[e], errs[e], abandoned)
			}
		}
		if futOther.Load() != 0 {
			t.Errorf("iter %d: %d futures with unexpected errors", iter, futOther.Load())
		}
	}
}

var rngMu sync.Mutex
var grng = rand.New(rand.NewPCG(1, 2))

func rng2(int) bool { rngMu.Lock(); defer rngMu.Unlock(); return grng.IntN(4) == 0 }
func rng2i(e, iter int) int {
	rngMu.Lock()
	defer rngMu.Unlock()
	return grng.IntN(1 + (iter % 7))
}

// ParallelForErr, MapReduce and groups with limits, from outside and
// inside, failing while Shutdown aborts: every waiter returns.
func TestHardLoopsFailingDuringAbort(t *testing.T) {
	specs := []string{"", "2x2", "4x1"}
	for iter := range 40 {
		spec := specs[iter%len(specs)]
		opts := specOpts(spec)
		if iter%2 != 0 {
			opts = append(opts, WithCrossNodeLoops())
		}
		p := newTestPool(t, opts...)
		var wg sync.WaitGroup
		errc := make(chan string, 1000)
		boom := errors.New("boom")
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					fail := (c+i)%3 == 0
					body := func(w *Worker, lo, hi int) error {
						spinFor(5 * time.Microsecond)
						if fail && lo > 500 {
							return boom
						}
						return nil
					}
					var err error
					switch (c + i) % 4 {
					case 0:
						err = p.ParallelFor(context.Background(), 2000, 7, body)
					case 1:
						_, err = MapReduce(context.Background(), p, 2000, 7, func(w *Worker, lo, hi int) (int, error) {
							return hi - lo, body(w, lo, hi)
						}, func(a, b int) int { return a + b })
					case 2:
						_, err = Run(p, func(w *Worker) (int, error) {
							return 0, w.Pool().ParallelFor(context.Background(), 2000, 7, body)
						})
					case 3:
						_, err = Run(p, func(w *Worker) (int, error) {
							g := w.Pool().Group(context.Background())
							g.SetLimit(2)
							for k := range 20 {
								g.Go(func(w *Worker) error { return body(w, k*100, k*100+100) })
							}
							return 0, g.Wait()
						})
					}
					if err != nil && !errors.Is(err, boom) && !errors.Is(err, ErrAbandoned) && !errors.Is(err, ErrClosed) {
						select {
						case errc <- fmt.Sprintf("op %d: %v", (c+i)%4, err):
						default:
						}
					}
					if errors.Is(err, ErrClosed) {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(iter%4) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iter%3)*time.Millisecond)
		within(t, 10*time.Second, "Shutdown", func() { p.Shutdown(ctx) })
		cancel()
		within(t, 10*time.Second, "loop callers", func() { wg.Wait() })
		close(errc)
		for e := range errc {
			t.Errorf("iter %d: %s", iter, e)
		}
	}
}
