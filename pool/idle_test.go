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
	g := p.groups[0]

	// Both are counted awake and searching; no token is sent, so their
	// goroutines stay asleep and only the test moves the protocol.
	id.mu.Lock()
	searcher, refused := id.unparkLocked(0), id.unparkLocked(0)
	id.mu.Unlock()
	if searcher == nil || refused == nil {
		t.Fatal("expected two sleepers in the pool's one group")
	}
	id.stopSearching(g) // refused: it was never admitted
	if !id.stopSearching(g) {
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
		p.wakeForPending(refused.group, nil)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Error("a task stored while a worker parked without searching waited 5 s with that worker asleep")
	}
	// The searcher, done with its task, parks too (its goroutine has slept
	// all along): the counts agree with the goroutines again for Close.
	if recheck, _ := id.toParked(searcher, false, false); recheck {
		p.wakeForPending(searcher.group, nil)
	}
}
