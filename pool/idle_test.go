package pool

import (
	"context"
	"testing"
	"time"
)

// A worker refused a search (the limit of rule 1) parks without having
// searched. If the searcher it deferred to then stops because it found a
// task, and a task is stored before the refused worker has registered as
// parked, notify sees every worker awake and wakes nobody; the refused
// worker must re-check the queues itself, or the task waits with one
// worker asleep and the other busy (in Join, blocked on a channel until
// its b runs: TestJoinHalfIsStolen hung so under load). The test plays
// that interleaving through the protocol's own steps while both workers
// sleep, then lets the worker that parked last react as it would.
func TestParkingWithoutSearchRechecks(t *testing.T) {
	p := newTestPool(t, WithSpec("1x2"))
	defer p.Close()
	id := &p.idle
	deadline := time.Now().Add(10 * time.Second)
	for id.unparked.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the workers of an idle pool did not park")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // into their receives: nothing wakes them but a token
	d := p.domains[0]

	// Both are counted awake and searching; no token is sent, so their
	// goroutines stay asleep and only the test moves the protocol.
	id.mu.Lock()
	searcher, refused := id.unparkLocked(0), id.unparkLocked(0)
	id.mu.Unlock()
	if searcher == nil || refused == nil {
		t.Fatal("expected two sleepers in the pool's one group")
	}
	id.stopSearching(d) // refused: it was never admitted
	if !id.stopSearching(d) {
		t.Fatal("the searcher should be the last one")
	}
	// The searcher found a task and runs it; another is stored meanwhile:
	// notify sees both workers awake.
	ran := make(chan struct{})
	if err := p.Submit(context.Background(), func(*Worker) { close(ran) }); err != nil {
		t.Fatal(err)
	}
	// The refused worker parks as park does.
	if recheck, _ := id.toParked(refused, false, false); recheck {
		p.wakeForPending(refused.domain, nil)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Error("a task stored while a worker parked without searching waited 5 s with that worker asleep")
	}
	// The searcher, done with its task, parks too (its goroutine has slept
	// all along): the counts agree with the goroutines again for Close.
	if recheck, _ := id.toParked(searcher, false, false); recheck {
		p.wakeForPending(searcher.domain, nil)
	}
}

// One task at a time, waited for: a lost wake-up would hang.
func TestNoLostWakeups(t *testing.T) {
	rounds := 100_000
	if testing.Short() {
		rounds = 10_000
	}
	p := newTestPool(t, WithSpec("2x2"))
	defer p.Close()
	done := make(chan struct{})
	for i := range rounds {
		var err error
		if i%2 == 0 {
			err = p.Submit(context.Background(), func(*Worker) { done <- struct{}{} })
		} else {
			err = p.Node(p.Nodes()[i%len(p.Nodes())]).Submit(context.Background(), func(w *Worker) {
				w.Spawn(func(*Worker) { done <- struct{}{} })
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: task never ran (lost wake-up)", i)
		}
	}
}

// wakeMore wakes the sleepers of the domain it names, up to the number it
// is given, and no other domain's: a loop's block queued from outside
// starts its node's workers side by side.
func TestWakeMoreWakesTheGroupsSleepers(t *testing.T) {
	p := newTestPool(t, WithSpec("2x2"), WithBlockTime(0))
	defer p.Close()
	parks := func() []uint64 {
		deadline := time.Now().Add(hangBound)
		for p.idle.unparked.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d workers still awake", p.idle.unparked.Load())
			}
			time.Sleep(time.Millisecond)
		}
		var n []uint64
		for _, ws := range p.Stats().Workers {
			n = append(n, ws.Parks)
		}
		return n
	}
	before := parks()
	p.idle.wakeMore(0, 5)
	after := parks()
	for _, w := range p.workers {
		woke := after[w.id] > before[w.id]
		if want := w.domain.index == 0; woke != want {
			t.Errorf("worker %d of group %d woke: %v, want %v", w.id, w.domain.index, woke, want)
		}
	}
	before = after
	p.idle.wakeMore(1, 1)
	after = parks()
	woken := 0
	for _, w := range p.workers {
		if after[w.id] > before[w.id] {
			woken++
			if w.domain.index != 1 {
				t.Errorf("worker %d of group %d woke for group 1", w.id, w.domain.index)
			}
		}
	}
	if woken != 1 {
		t.Errorf("wakeMore(1, 1) woke %d workers, want 1", woken)
	}
}

// New starts its workers registered as parked, each domain's stack with
// its first worker on top, holding no Pool; the first task wakes one of
// them, and Close wakes and ends them all.
func TestNewStartsWorkersParked(t *testing.T) {
	p := newTestPool(t, WithSpec("2x3"))
	il := &p.idle
	il.mu.Lock()
	if u, s := il.unparked.Load(), il.searching.Load(); u != 0 || s != 0 {
		t.Errorf("after New: %d workers unparked, %d searching, want 0 and 0", u, s)
	}
	for _, d := range p.domains {
		s := il.sleepers[d.index]
		if len(s) != len(d.workers) || int(d.sleeping.Load()) != len(d.workers) {
			t.Errorf("domain %d: %d sleepers listed, %d counted, want %d", d.index, len(s), d.sleeping.Load(), len(d.workers))
		} else if s[len(s)-1] != d.workers[0] {
			t.Errorf("domain %d: worker %d on top of the sleepers, want %d", d.index, s[len(s)-1].id, d.workers[0].id)
		}
	}
	for _, w := range p.workers {
		if !il.parked[w.id] {
			t.Errorf("worker %d not registered as parked", w.id)
		}
		if p.awake(w.id) {
			t.Errorf("worker %d holds the Pool while parked", w.id)
		}
	}
	il.mu.Unlock()
	ran := make(chan int, 1)
	if err := p.Submit(context.Background(), func(w *Worker) { ran <- w.ID() }); err != nil {
		t.Fatal(err)
	}
	<-ran
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := p.sched.live.Load(); n != 0 {
		t.Errorf("%d workers live after Close", n)
	}
}
