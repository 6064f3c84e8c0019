package pool

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// twoWideWorkers returns a pool of two workers that may each run on the
// same two or more CPUs of one node, or skips.
func twoWideWorkers(t *testing.T, opts ...Option) *Pool {
	t.Helper()
	if _, _, err := pin.CurrentCPU(); err != nil {
		t.Skipf("no getcpu here: %v", err)
	}
	p := newTestPool(t, append(opts, WithWorkers(2))...)
	for _, w := range p.workers {
		if w.th.Spreadable().Len() < 2 || w.domain != p.workers[0].domain {
			p.Close()
			t.Skipf("worker %d may run on CPUs %s: spreading needs two workers on a node of two CPUs or more", w.id, w.th.Spreadable())
		}
	}
	return p
}

// onBoth runs fn on both workers of p at once, each with its worker.
func onBoth(t *testing.T, p *Pool, fn func(w *Worker)) {
	t.Helper()
	var started, done sync.WaitGroup
	started.Add(2)
	done.Add(2)
	for range 2 {
		if err := p.Node(p.workers[0].Node()).Strict().Submit(context.Background(), func(w *Worker) {
			defer done.Done()
			started.Done()
			started.Wait() // both workers busy: each task has its own
			fn(w)
		}); err != nil {
			t.Fatal(err)
		}
	}
	within(t, hangBound, "the tasks on both workers", done.Wait)
}

// Two awake workers on one CPU: the one with the higher ID moves to
// another CPU of the node when it checks, and can run on the whole node
// again afterwards.
func TestSpreadSeparatesWorkers(t *testing.T) {
	p := twoWideWorkers(t)
	defer p.Close()
	cpus := p.workers[0].th.Spreadable()
	c0 := cpus.First()
	var one topology.CPUSet
	one.Add(c0)
	var w0Ready, w1Done sync.WaitGroup
	w0Ready.Add(1)
	w1Done.Add(1)
	var moved, from, to, spreads int
	var mask topology.CPUSet
	onBoth(t, p, func(w *Worker) {
		if w.id == 0 {
			w.th.SetMask(one) // as if the kernel had put it there
			w.th.Spread()     // reports c0; nobody of lower ID to give way to
			w0Ready.Done()
			w1Done.Wait() // stays awake on c0 meanwhile
			return
		}
		defer w1Done.Done()
		w0Ready.Wait()
		w.th.SetMask(one)
		from = c0
		if w.th.Spread() {
			spreads++
		}
		to, _, _ = pin.CurrentCPU()
		mask, _ = topology.ThreadAffinity(0)
		moved = 1
	})
	onBoth(t, p, func(w *Worker) { w.th.SetMask(cpus) })
	if moved != 1 || spreads != 1 || to == from || !cpus.Has(to) || !mask.Equal(cpus) {
		t.Errorf("worker 1 on CPU %d with worker 0: %d spreads, now on CPU %d with mask %s; want one move to another CPU of %s, mask %s",
			from, spreads, to, mask, cpus, cpus)
	}
}

// A worker about to be woken by another worker is aimed at the CPUs of
// its node that the waker is not on, and once woken runs there with its whole
// node's mask again.
func TestAimWakesAWorkerOffTheWakersCPU(t *testing.T) {
	p := twoWideWorkers(t, WithBlockTime(0))
	defer p.Close()
	type seen struct {
		worker, cpu int
		mask        topology.CPUSet
	}
	var (
		wakerCPU  int
		aimedMask topology.CPUSet
		aimed     bool
		s         seen
	)
	whileOtherParks(t, p, func(w, other *Worker) {
		wakerCPU, _, _ = pin.CurrentCPU()
		other.th.Aim(w.th)
		aimedMask, _ = topology.ThreadAffinity(other.th.TID())
		aimed = other.th.Aimed()
		var ran atomic.Bool
		w.Spawn(func(w *Worker) { // the other worker takes it: this one spins
			s.worker = w.id
			s.cpu, _, _ = pin.CurrentCPU()
			s.mask, _ = topology.ThreadAffinity(0)
			ran.Store(true)
		})
		for !ran.Load() {
		}
	})
	cpus := p.workers[0].th.Spreadable()
	if aimedMask.IsEmpty() || aimedMask.Has(wakerCPU) || !aimedMask.IsSubsetOf(p.workers[0].th.Spreadable()) || !aimed {
		t.Errorf("aimed worker has mask %s (waker on CPU %d, aimed %v); want CPUs of its node other than the waker's", aimedMask, wakerCPU, aimed)
	}
	if s.cpu == wakerCPU || !s.mask.Equal(cpus) {
		t.Errorf("the woken worker ran on CPU %d with mask %s (waker on CPU %d); want another CPU, mask %s", s.cpu, s.mask, wakerCPU, cpus)
	}
	for _, w := range p.workers {
		if w.th.Aimed() {
			t.Errorf("worker %d still marked aimed after its wake-up", w.id)
		}
	}
}

// A waker whose own report is stale (it last read its CPU elsewhere, and
// ran Fork after Fork since, which reads none) still aims the worker it
// wakes off the CPU it is on now: it reports that CPU first. Before, the
// stale report and the waker's CPU together covered both CPUs, nothing was
// left to aim at, and the woken worker could wake on the waker's CPU and
// share it for a whole fib run (fib(32) with a cutoff of 12 and the
// Active policy: 7 to 11 repetitions in 30 over 8 ms, up to 16 ms,
// against a median of 5.5 to 6.6).
func TestAimCountsTheWakersCPUNow(t *testing.T) {
	p := twoWideWorkers(t, WithBlockTime(0))
	defer p.Close()
	var got struct {
		wakerCPU int             // where the waker runs
		mask     topology.CPUSet // the woken worker's mask once aimed
		aimed    bool
		err      error
	}
	whileOtherParks(t, p, func(w, other *Worker) {
		var one topology.CPUSet
		one.Add(w.th.Spreadable().First())
		if got.err = pin.Aim(w.th.TID(), one); got.err != nil { // stay on one CPU meanwhile
			return
		}
		defer func() { _ = pin.Aim(w.th.TID(), w.th.Spreadable()) }()
		got.wakerCPU, _, _ = pin.CurrentCPU()
		w.th.ReportCPU(w.th.Spreadable().AndNot(one).First()) // reported before, elsewhere
		other.th.Aim(w.th)
		got.mask, _ = topology.ThreadAffinity(other.th.TID())
		got.aimed = other.th.Aimed()
		// Widen it again, as its spread after a wake-up would; Thread.Set
		// acts on the caller's thread, so through its ID.
		if err := pin.Aim(other.th.TID(), other.th.Spreadable()); err != nil {
			t.Error(err)
		}
	})
	if got.err != nil {
		t.Fatal(got.err)
	}
	// The only other worker is parked, so every CPU of the node but the
	// waker's is free, the one of the stale report too.
	var waker topology.CPUSet
	waker.Add(got.wakerCPU)
	want := p.workers[0].th.Spreadable().AndNot(waker)
	if !got.aimed || !got.mask.Equal(want) {
		t.Errorf("worker aimed %v with mask %s (waker on CPU %d, its report stale); want mask %s",
			got.aimed, got.mask, got.wakerCPU, want)
	}
}

// whileOtherParks runs fn on one of p's two workers once the other is
// parked, with both.
func whileOtherParks(t *testing.T, p *Pool, fn func(w, other *Worker)) {
	t.Helper()
	within(t, hangBound, "the waker's task", func() {
		_ = onWorker(t, p, func(w *Worker) int {
			other := p.workers[1-w.id]
			for !p.idle.isParked(other) {
				runtime.Gosched()
			}
			fn(w, other)
			return 0
		})
	})
}
