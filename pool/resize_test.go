package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/topology"
)

func TestResizeShares(t *testing.T) {
	mk := func(sizes ...int) []*domain {
		var ds []*domain
		for _, n := range sizes {
			ds = append(ds, &domain{workers: make([]*Worker, n)})
		}
		return ds
	}
	for _, c := range []struct {
		sizes []int
		n     int
		want  []int
	}{
		{[]int{4, 4}, 8, []int{4, 4}},
		{[]int{4, 4}, 2, []int{1, 1}},
		{[]int{4, 4}, 3, []int{2, 1}},
		{[]int{4, 4}, 5, []int{3, 2}},
		{[]int{6, 2}, 4, []int{3, 1}},
		{[]int{7, 1}, 2, []int{1, 1}},
		{[]int{7, 1}, 3, []int{2, 1}},
		{[]int{1, 1, 6}, 3, []int{1, 1, 1}},
		{[]int{1, 1, 6}, 4, []int{1, 1, 2}},
		{[]int{3}, 1, []int{1}},
	} {
		if got := shares(c.n, mk(c.sizes...)); !slices.Equal(got, c.want) {
			t.Errorf("shares(%d, %v) = %v, want %v", c.n, c.sizes, got, c.want)
		}
	}
	// Every n in range: one at least per domain, none over, the sum n.
	for _, sizes := range [][]int{{5, 3, 1}, {2, 2, 2, 2}, {64, 1}} {
		ds, total := mk(sizes...), 0
		for _, s := range sizes {
			total += s
		}
		for n := len(sizes); n <= total; n++ {
			got, sum := shares(n, ds), 0
			for i, g := range got {
				if g < 1 || g > sizes[i] {
					t.Fatalf("shares(%d, %v) = %v: domain %d out of [1, %d]", n, sizes, got, i, sizes[i])
				}
				sum += g
			}
			if sum != n {
				t.Fatalf("shares(%d, %v) = %v: sums to %d", n, sizes, got, sum)
			}
		}
	}
}

func TestResizeRange(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"))
	for _, n := range []int{0, 1, 5, -1} {
		err := p.Resize(n)
		if err == nil || !errors.Is(err, errResize) || !strings.Contains(err.Error(), "between 2") {
			t.Errorf("Resize(%d) = %v, want an error that names the range", n, err)
		}
	}
	if p.Size() != 4 {
		t.Errorf("Size after refused resizes = %d, want 4", p.Size())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Resize(2); !errors.Is(err, ErrClosed) {
		t.Errorf("Resize after Close = %v, want ErrClosed", err)
	}
	if n := p.Size(); n != 0 {
		t.Errorf("Size after Close = %d, want 0", n)
	}
}

// retiredIDs waits until the pool's retired workers are want (by ID) and
// their goroutines have ended, and reports whether they were.
func retiredIDs(p *Pool, want []int) bool {
	return eventually(hangBound, func() bool {
		var got []int
		for _, ws := range p.Stats().Workers {
			if ws.Retired {
				got = append(got, ws.Worker)
			}
		}
		if !slices.Equal(got, want) {
			return false
		}
		for _, id := range want {
			if !p.workers[id].owner.ended.Load() || p.workers[id].th.TID() != 0 {
				return false
			}
		}
		for _, ws := range p.Stats().Workers {
			if ws.Retired != (ws.Bound == "") {
				return false // a retired worker has no thread to be bound; a running one is
			}
		}
		return true
	})
}

// TestResizeRetiresAndBringsBack: a shrink retires the highest workers of
// each node, idle or busy, and their threads end; the running ones take
// all the work, and a grow brings the retired back to take it too.
func TestResizeRetiresAndBringsBack(t *testing.T) {
	p := newTestPool(t, WithSpec("2x4"))
	defer p.Close()
	before := threads()
	if err := p.Resize(4); err != nil {
		t.Fatal(err)
	}
	want := []int{2, 3, 6, 7}
	if !retiredIDs(p, want) {
		t.Fatalf("after Resize(4): stats %+v, want workers %v retired", p.Stats().Workers, want)
	}
	if p.Size() != 4 {
		t.Errorf("Size = %d, want 4", p.Size())
	}
	if ex := p.Explain(); !strings.Contains(ex, "resized: 4 of 8 workers run; retired: workers 2-3,6-7") {
		t.Errorf("Explain does not say which workers are retired:\n%s", ex)
	}
	for _, ns := range p.Stats().Nodes {
		if ns.Workers != 2 {
			t.Errorf("node %d runs %d workers, want 2", ns.Node, ns.Workers)
		}
	}
	if after := threads(); before > 0 && after > before-4 {
		// The runtime keeps idle threads, but a locked one ends with its
		// goroutine.
		t.Logf("threads %d → %d", before, after)
	}
	// Work runs on the running workers only, loops split over them.
	var on [8]atomic.Int64
	var wg sync.WaitGroup
	for range 2000 {
		wg.Add(1)
		if err := p.Submit(context.Background(), func(w *Worker) { on[w.ID()].Add(1); wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ParallelFor(context.Background(), 4000, 10, func(w *Worker, lo, hi int) error {
		on[w.ID()].Add(int64(hi - lo))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, id := range want {
		if n := on[id].Load(); n != 0 {
			t.Errorf("retired worker %d ran %d tasks", id, n)
		}
	}
	growAll(t, p, "growing back") // every worker takes work again
}

// growAll resizes p to all its workers and checks that none is left
// retired and that every one runs work.
func growAll(t *testing.T, p *Pool, what string) {
	t.Helper()
	if err := p.Resize(p.Workers()); err != nil {
		t.Fatal(err)
	}
	if !retiredIDs(p, nil) {
		t.Fatalf("after %s: stats %+v, want none retired", what, p.Stats().Workers)
	}
	if runs, ok := everyWorkerRuns(t, p); !ok {
		t.Errorf("after %s, the workers' runs: %v", what, runs)
	}
}

// everyWorkerRuns runs loops of spinning blocks on p, whose node blocks go
// to every node's pinned shard, until each worker has run some, and
// reports the runs per worker and whether every one ran.
func everyWorkerRuns(t *testing.T, p *Pool) ([]int64, bool) {
	t.Helper()
	on := make([]atomic.Int64, p.Workers())
	ok := eventually(hangBound, func() bool {
		if err := p.ParallelFor(context.Background(), 64, 1, func(w *Worker, lo, hi int) error {
			on[w.ID()].Add(1)
			spinFor(200 * time.Microsecond)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i := range on {
			if on[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	runs := make([]int64, len(on))
	for i := range on {
		runs[i] = on[i].Load()
	}
	return runs, ok
}

// TestResizeMaxWorkers: WithMaxWorkers places more workers than New
// starts; Resize starts them, and they run work.
func TestResizeMaxWorkers(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"), WithWorkers(2), WithMaxWorkers(8))
	defer p.Close()
	if p.Workers() != 8 || p.Size() != 2 {
		t.Fatalf("Workers %d, Size %d: want 8 placed, 2 running", p.Workers(), p.Size())
	}
	if !retiredIDs(p, []int{1, 2, 3, 5, 6, 7}) {
		t.Fatalf("at New: %+v, want workers 0 and 4 running", p.Stats().Workers)
	}
	growAll(t, p, "growing past New's workers")
	for _, bad := range [][]Option{{WithWorkers(8), WithMaxWorkers(4)}, {WithMaxWorkers(0)}} {
		if _, err := newPool(append(bad, WithSpec("2x2"), WithoutEnv()), nil); err == nil || !strings.Contains(err.Error(), "WithMaxWorkers") {
			t.Errorf("New with %d options: %v, want an error naming WithMaxWorkers", len(bad), err)
		}
	}
	// Without WithWorkers, New starts the default count, at most the
	// maximum.
	q := newTestPool(t, WithSpec("2x2"), WithMaxWorkers(12))
	defer q.Close()
	if q.Workers() != 12 || q.Size() != 4 {
		t.Errorf("2x2 with WithMaxWorkers(12): Workers %d, Size %d, want 12 and 4", q.Workers(), q.Size())
	}
}

// onWorker1 submits fn to p until it runs on worker 1, and returns what
// the run that did returned.
func onWorker1[T any](p *Pool, fn func(w *Worker) T) (T, error) {
	for range 10000 {
		got := make(chan T, 1)
		ran := make(chan bool, 1)
		if err := p.Submit(context.Background(), func(w *Worker) {
			if w.ID() != 1 {
				ran <- false
				return
			}
			ran <- true
			got <- fn(w)
		}); err != nil {
			var zero T
			return zero, err
		}
		if <-ran {
			return <-got, nil
		}
	}
	var zero T
	return zero, errors.New("no task ran on worker 1")
}

// TestResizeKeepsQueuedWork: a busy worker that retires hands the tasks
// queued on it to its node; none is lost or run twice.
func TestResizeKeepsQueuedWork(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	const n = 600 // past a run queue's capacity: some overflow to the node
	l := newLedger(n)
	started, release := make(chan struct{}), make(chan struct{})
	go onWorker1(p, func(w *Worker) bool {
		for range n {
			i := l.id()
			l.accepted[i].Store(true)
			w.Spawn(func(*Worker) { l.ran(i) })
		}
		close(started)
		<-release
		return true
	})
	<-started
	if err := p.Resize(1); err != nil {
		t.Fatal(err)
	}
	close(release)
	if !retiredIDs(p, []int{1}) {
		t.Fatalf("worker 1 did not retire: %+v", p.Stats().Workers)
	}
	within(t, hangBound, "Close", func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	acc, ran, notRun, stray := l.tally()
	if acc != n || ran != n || notRun != 0 || stray != 0 || l.dbl.Load() != 0 {
		t.Errorf("accepted %d, ran %d, not run %d, stray %d, twice %d", acc, ran, notRun, stray, l.dbl.Load())
	}
}

// TestResizeFromInsideTask: a task may resize its own pool, retiring
// its own worker, which retires once the task returns.
func TestResizeFromInsideTask(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	if err, err2 := onWorker1(p, func(w *Worker) error { return w.Pool().Resize(1) }); err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	if !retiredIDs(p, []int{1}) {
		t.Fatalf("worker 1 did not retire after its task: %+v", p.Stats().Workers)
	}
	// And back, from a task on the worker that stayed.
	if _, err := Run(p, func(w *Worker) (struct{}, error) { return struct{}{}, w.Pool().Resize(2) }); err != nil {
		t.Fatal(err)
	}
	if !retiredIDs(p, nil) {
		t.Fatalf("worker 1 did not come back: %+v", p.Stats().Workers)
	}
	within(t, hangBound, "Close", func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
}

// TestResizeCountedStream: a stream of every kind of work through grow
// and shrink cycles between one worker per node and 4 per CPU of a 2x2
// layout, from a pool that starts with one per CPU (WithMaxWorkers): plain submissions, strict work for each node, tasks that spawn
// and join, groups and loops. Every task runs exactly once.
func TestResizeCountedStream(t *testing.T) {
	cycles := 100
	if testing.Short() {
		cycles = 20
	}
	p := newTestPool(t, WithSpec("2x2"), WithWorkers(4), WithMaxWorkers(16))
	const n = 1 << 22
	l := newLedger(n)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var loops, loopErrs atomic.Int64
	submit := func(on Target, strictNode int) bool {
		i := l.id()
		if i < 0 {
			return false
		}
		fn := func(w *Worker) {
			if strictNode >= 0 && w.Node() != strictNode {
				t.Errorf("strict task for node %d ran on node %d", strictNode, w.Node())
			}
			l.ran(i)
		}
		var err error
		switch x := on.(type) {
		case *Pool:
			err = x.Submit(ctx, fn)
		case Node:
			err = x.Submit(ctx, fn)
		}
		if err == nil {
			l.accepted[i].Store(true)
		}
		return err == nil
	}
	// Plain and strict submitters.
	for k := range 2 {
		wg.Go(func() {
			for !isDone(stop) {
				if k == 0 && !submit(p, -1) {
					return
				}
				if n := p.Nodes()[l.next.Load()%2]; k == 1 && !submit(p.Node(n).Strict(), n) {
					return
				}
			}
		})
	}
	// Tasks that spawn and join, groups, and loops whose indexes are each
	// counted once per loop.
	wg.Go(func() {
		for !isDone(stop) {
			a, b, c := l.id(), l.id(), l.id()
			if a < 0 || b < 0 || c < 0 {
				return
			}
			err := p.Submit(ctx, func(w *Worker) {
				l.ran(a)
				l.accepted[b].Store(true)
				l.accepted[c].Store(true)
				if err := w.Join(func(*Worker) { l.ran(b) }, func(w *Worker) {
					g := p.Group(ctx)
					g.Go(func(*Worker) error { l.ran(c); return nil })
					if err := g.Wait(); err != nil {
						t.Error(err)
					}
				}); err != nil {
					t.Error(err)
				}
			})
			if err == nil {
				l.accepted[a].Store(true)
			} else {
				return
			}
			var seen [512]atomic.Int32
			if err := p.ParallelFor(ctx, len(seen), 4, func(w *Worker, lo, hi int) error {
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
				return nil
			}); err != nil {
				return
			}
			loops.Add(1)
			for i := range seen {
				if seen[i].Load() != 1 {
					loopErrs.Add(1)
				}
			}
		}
	})
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := map[int]bool{}
	for c := range cycles {
		m := 2 + rng.IntN(15)
		if c%2 == 1 {
			m = 2 + rng.IntN(3) // shrink hard every other cycle
		}
		if err := p.Resize(m); err != nil {
			t.Fatalf("cycle %d: Resize(%d): %v", c, m, err)
		}
		sizes[m] = true
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
	}
	if l.next.Load() >= n {
		t.Fatalf("the ledger of %d tasks filled before the cycles ended", n)
	}
	close(stop)
	wg.Wait()
	within(t, hangBound, "Close", func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	acc, ran, notRun, stray := l.tally()
	t.Logf("%d cycles over %d sizes; %d tasks accepted, %d loops", cycles, len(sizes), acc, loops.Load())
	if notRun != 0 || stray != 0 || l.dbl.Load() != 0 || ran != acc {
		t.Errorf("accepted %d, ran %d, not run %d, stray %d, twice %d (first %v)", acc, ran, notRun, stray, l.dbl.Load(), l.dblIDs)
	}
	if loopErrs.Load() != 0 {
		t.Errorf("%d loop indexes not run exactly once", loopErrs.Load())
	}
	if acc < 1000 {
		t.Errorf("only %d tasks accepted: the stream did not run", acc)
	}
}

// TestResizeRacesClose: resizes racing Close and Shutdown end with the
// pool: Close returns, every worker and spare has ended, nothing accepted
// is lost.
func TestResizeRacesClose(t *testing.T) {
	for round := range 20 {
		p := newTestPool(t, WithSpec("2x2"), WithWorkers(8))
		l := newLedger(1 << 14)
		var wg sync.WaitGroup
		wg.Go(func() {
			for k := 0; ; k++ {
				if err := p.Resize(2 + k%7); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
			}
		})
		wg.Go(func() {
			for {
				i := l.id()
				if i < 0 {
					return
				}
				if p.Submit(context.Background(), func(*Worker) { l.ran(i) }) != nil {
					return
				}
				l.accepted[i].Store(true)
			}
		})
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		within(t, hangBound, "Close", func() {
			if round%2 == 0 {
				if err := p.Close(); err != nil {
					t.Error(err)
				}
			} else if _, err := p.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		}, idleState{p.sched})
		wg.Wait()
		for _, w := range p.workers {
			if !w.owner.ended.Load() {
				t.Fatalf("round %d: worker %d has not ended after Close", round, w.id)
			}
		}
		if live := p.live.Load(); live != 0 {
			t.Fatalf("round %d: %d workers live after Close", round, live)
		}
		acc, ran, notRun, stray := l.tally()
		if notRun != 0 || stray != 0 || l.dbl.Load() != 0 || ran != acc {
			t.Fatalf("round %d: accepted %d, ran %d, not run %d, stray %d, twice %d", round, acc, ran, notRun, stray, l.dbl.Load())
		}
	}
}

// settleSize waits until Size() == n, the stats agree and the retired
// workers' goroutines have ended; returns a description of what is off.
func settleSize(p *Pool, n int) string {
	var why string
	ok := eventually(hangBound, func() bool {
		why = ""
		if s := p.Size(); s != n {
			why = fmt.Sprintf("Size() = %d, want %d", s, n)
			return false
		}
		st := p.Stats()
		notRetired, sum := 0, 0
		for _, ws := range st.Workers {
			if !ws.Retired {
				notRetired++
			} else if !p.workers[ws.Worker].owner.ended.Load() {
				why = fmt.Sprintf("worker %d retired but its goroutine has not ended", ws.Worker)
				return false
			}
		}
		for _, ns := range st.Nodes {
			sum += ns.Workers
			if ns.Workers < 1 {
				why = fmt.Sprintf("node %d has %d workers", ns.Node, ns.Workers)
				return false
			}
		}
		if notRetired != n || sum != n {
			why = fmt.Sprintf("not retired %d, nodes sum %d, want %d", notRetired, sum, n)
			return false
		}
		if st.BusyWorkers != 0 {
			why = fmt.Sprintf("BusyWorkers %d", st.BusyWorkers)
			return false
		}
		return true
	})
	if ok {
		return ""
	}
	return why + ": " + idleState{p.sched}.String()
}

// TestResizeWhileCallerHoldsSeat: a caller from outside holds worker 1's
// seat (Run) when Resize(1) marks worker 1; when the caller gives the
// seat back, parked, worker 1 retires.
func TestResizeWhileCallerHoldsSeat(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	defer p.Close()
	parkAll(t, p)
	// Keep worker 0 busy so that the caller joins worker 1's seat.
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	for {
		on := make(chan int, 1)
		if err := p.Submit(context.Background(), func(w *Worker) {
			on <- w.ID()
			if w.ID() == 0 {
				<-release
			}
		}); err != nil {
			t.Fatal(err)
		}
		if <-on == 0 {
			break
		}
	}
	parkWorker1 := eventually(hangBound, func() bool { return p.idle.isParked(p.workers[1]) })
	if !parkWorker1 {
		t.Fatal("worker 1 did not park")
	}
	var seat int
	var onSeat bool
	_, err := Run(p, func(w *Worker) (int, error) {
		seat, onSeat = w.ID(), w.out.on
		return 0, p.Resize(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if seat != 1 || !onSeat {
		t.Skipf("the caller ran on worker %d (joined %v), not on worker 1's seat", seat, onSeat)
	}
	once.Do(func() { close(release) })
	if why := settleSize(p, 1); why != "" {
		t.Errorf("after Resize(1) from a caller on worker 1's seat: %s", why)
	}
}

// TestResizeActivePolicy: with WithBlockTime(-1) idle workers spin
// instead of parking; Resize retires them while the pool is idle.
func TestResizeActivePolicy(t *testing.T) {
	p := newTestPool(t, WithWorkers(4), WithBlockTime(-1))
	defer p.Close()
	if err := p.Resize(1); err != nil {
		t.Fatal(err)
	}
	if why := settleSize(p, 1); why != "" {
		t.Errorf("active policy, after Resize(1): %s", why)
	}
}

// TestResizeBlockAfterComeback: a worker that used Block, retired and
// was brought back blocks again in its new goroutine and uses its
// *Worker after.
func TestResizeBlockAfterComeback(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	defer p.Close()
	if _, err := onWorker1(p, func(w *Worker) bool { w.Block(func() {}); return true }); err != nil {
		t.Fatal(err)
	}
	if err := p.Resize(1); err != nil {
		t.Fatal(err)
	}
	if !retiredIDs(p, []int{1}) {
		t.Fatal("worker 1 did not retire")
	}
	if err := p.Resize(2); err != nil {
		t.Fatal(err)
	}
	got, err := onWorker1(p, func(w *Worker) string {
		w.Block(func() {})
		if r := recovered(func() { w.Spawn(func(*Worker) {}) }); r != nil {
			return fmt.Sprint(r)
		}
		return ""
	})
	if err != nil || got != "" {
		t.Errorf("Spawn after Block on a worker brought back: %v %s", err, got)
	}
}

// poolGoroutines returns the stacks of goroutines still in a worker's or
// a spare's main, or in the block watch.
func poolGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "pool.(*Worker).main") || strings.Contains(g, "pool.(*spare).main") || strings.Contains(g, "pool.(*sched).watchBlocked") {
			out = append(out, g)
		}
	}
	return out
}

// TestResizeCloseLeavesNothing: Resize cycles with Block (spares) and
// Goexit (replaced threads), then Close, also racing the resizes: no
// narrowed thread, no worker or spare goroutine left.
func TestResizeCloseLeavesNothing(t *testing.T) {
	onThreads(t)
	mask, err := topology.ThreadAffinity(os.Getpid())
	if err != nil {
		t.Skip(err)
	}
	for round := range 6 {
		p := newTestPool(t, WithSpec("2x2"), WithWorkers(8))
		ctx := context.Background()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for i := 0; !isDone(stop); i++ {
				err := p.Submit(ctx, func(w *Worker) {
					switch i % 4 {
					case 0:
						w.Block(func() { time.Sleep(100 * time.Microsecond) })
					case 1:
						runtime.Goexit()
					case 2:
						for range 50 {
							w.Spawn(func(w *Worker) { w.Block(func() {}) })
						}
					}
				})
				if err != nil {
					return
				}
				if i%8 == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		})
		rng := rand.New(rand.NewPCG(uint64(round), 5))
		for range 200 {
			if err := p.Resize(2 + rng.IntN(7)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		}
		if round%2 == 0 {
			close(stop)
			wg.Wait()
			closeUnnarrowed(t, p, mask)
		} else {
			// Close racing the resizes and the submitter.
			wg.Go(func() {
				for k := 0; p.Resize(2+k%7) == nil; k++ {
				}
			})
			closeUnnarrowed(t, p, mask)
			close(stop)
			wg.Wait()
		}
		var left []string
		if !eventually(hangBound, func() bool { left = poolGoroutines(); return len(left) == 0 }) {
			t.Fatalf("round %d: after Close, %d pool goroutines left:\n%s", round, len(left), strings.Join(left, "\n\n"))
		}
		if p.live.Load() != 0 {
			t.Fatalf("round %d: live %d", round, p.live.Load())
		}
	}
}

// TestResizeShutdownGivesUp: a Shutdown that gives up while Resizes
// shrink and grow a pool whose workers hold long queues (spawns) and
// tasks stuck until released: every accepted task ran once or is counted
// abandoned; Shutdown and Close return.
func TestResizeShutdownGivesUp(t *testing.T) {
	for round := range 12 {
		spec := []string{"2x2", "2x4", "1x4"}[round%3]
		p := newTestPool(t, WithSpec(spec), WithWorkers(8))
		l := newLedger(1 << 20)
		ctx := context.Background()
		release := make(chan struct{})
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var resizeErr atomic.Value
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(round), 1))
			min := len(p.Nodes())
			for {
				if err := p.Resize(min + rng.IntN(9-min)); err != nil {
					if !errors.Is(err, ErrClosed) {
						resizeErr.Store(err)
					}
					return
				}
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			}
		})
		wg.Go(func() {
			for i := 0; !isDone(stop); i++ {
				a := l.id()
				if a < 0 {
					return
				}
				err := p.Submit(ctx, func(w *Worker) {
					l.ran(a)
					for range 100 {
						id := l.id()
						if id < 0 {
							return
						}
						l.accepted[id].Store(true)
						w.Spawn(func(w *Worker) { l.ran(id); spinFor(2 * time.Microsecond) })
					}
					if i%97 == 0 {
						<-release // stuck past the Shutdown's deadline
					}
				})
				if err != nil {
					return
				}
				l.accepted[a].Store(true)
			}
		})
		time.Sleep(time.Duration(5+round) * time.Millisecond)
		sctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		within(t, hangBound, "Shutdown", func() { _, _ = p.Shutdown(sctx) }, idleState{p.sched})
		cancel()
		close(stop)
		close(release)
		within(t, hangBound, "Close", func() { _ = p.Close() }, idleState{p.sched})
		wg.Wait()
		if e := resizeErr.Load(); e != nil {
			t.Errorf("round %d: Resize: %v", round, e)
		}
		acc, ran, notRun, stray := l.tally()
		ab := int64(p.Stats().Abandoned)
		if testing.Verbose() {
			t.Logf("round %d (%s): accepted %d, ran %d, abandoned %d", round, spec, acc, ran, ab)
		}
		if stray != 0 || l.dbl.Load() != 0 || notRun != ab {
			t.Errorf("round %d (%s): accepted %d, ran %d, not run %d, abandoned %d, stray %d, twice %d", round, spec, acc, ran, notRun, ab, stray, l.dbl.Load())
		}
		for _, w := range p.workers {
			if !w.owner.ended.Load() {
				t.Errorf("round %d: worker %d not ended", round, w.id)
			}
		}
	}
}

// TestResizeAcrossAReplan: workers brought back while the machine
// monitor has moved the pool off a CPU are bound inside the process's
// CPUs, and go back to their own with the others; a counted stream runs
// throughout.
func TestResizeAcrossAReplan(t *testing.T) {
	all, a, b := twoCPUs(t)
	f := newFakeMachine(all, 2)
	p := newTestPool(t, WithSpec("2x1"), WithWorkers(2), WithMaxWorkers(4), withMachine(f, fakeWatch))
	if !p.workers[0].th.Bound().Equal(topology.NewCPUSet(a)) || !p.workers[2].th.Bound().Equal(topology.NewCPUSet(b)) {
		_ = p.Close()
		t.Skipf("2x1 placed the workers on %s and %s, not on CPUs %d and %d", p.workers[0].th.Bound(), p.workers[2].th.Bound(), a, b)
	}
	s := startStream(t, p, 1<<20)
	left := topology.NewCPUSet(a)
	f.set(left, 2)
	if !masksAre(p, []topology.CPUSet{left, {}, left, {}}, hangBound) {
		t.Fatalf("CPU %d gone: worker masks %v", b, workerMasks(p))
	}
	for round := range 10 {
		if err := p.Resize(4); err != nil {
			t.Fatal(err)
		}
		if why := holdsInside(p, left, 20*time.Millisecond); why != "" {
			t.Fatalf("round %d, grown while CPU %d is gone: %s", round, b, why)
		}
		if err := p.Resize(2); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Resize(4); err != nil {
		t.Fatal(err)
	}
	f.set(all, 2)
	node := func(cpu int) topology.CPUSet { return topology.NewCPUSet(cpu) }
	if want := []topology.CPUSet{node(a), node(a), node(b), node(b)}; !masksAre(p, want, hangBound) {
		t.Errorf("CPU %d back: worker masks %v, want %v", b, workerMasks(p), want)
	}
	s.finish(t, p)
}

// BenchmarkResize times a shrink of 64 workers (2x33 to one per node)
// and the grow back, beside the floor of starting and ending 64 locked,
// bound goroutines (BenchmarkNew's). shrink-ms is until Resize returns,
// ended-ms until the 64 retired workers' goroutines have ended, grow-ms
// until the Resize that brings them back returns (each bound).
func BenchmarkResize(b *testing.B) {
	b.Run("64/pool", func(b *testing.B) {
		p, err := New(WithSpec("2x33"), WithoutEnv())
		if err != nil {
			b.Skip(err)
		}
		defer p.Close()
		var shrink, ended, grow time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := p.Resize(2); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			for _, w := range p.workers {
				if w.retire.Load() {
					w.alive.Wait()
				}
			}
			t2 := time.Now()
			if err := p.Resize(66); err != nil {
				b.Fatal(err)
			}
			shrink += t1.Sub(t0)
			ended += t2.Sub(t1)
			grow += time.Since(t2)
		}
		ops := float64(b.N)
		b.ReportMetric(float64(shrink.Microseconds())/1e3/ops, "shrink-ms")
		b.ReportMetric(float64(ended.Microseconds())/1e3/ops, "ended-ms")
		b.ReportMetric(float64(grow.Microseconds())/1e3/ops, "grow-ms")
	})
	b.Run("64/floor", func(b *testing.B) { benchNewFloor(b, 64) })
}
