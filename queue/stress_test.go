package queue

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// tally counts how often each task ran.
type tally struct{ runs []atomic.Int32 }

func (c *tally) run(v int) { c.runs[v].Add(1) }

func (c *tally) check(t *testing.T) {
	t.Helper()
	bad := 0
	for v := range c.runs {
		if n := c.runs[v].Load(); n != 1 {
			if bad < 10 {
				t.Errorf("task %d ran %d times", v, n)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d tasks did not run exactly once", bad, len(c.runs))
	}
}

// One owner pushes and pops, thieves steal from it and from each other,
// overflow goes to the inject shard that everyone drains: every task runs
// exactly once. With -tags numapool_smallqueue the ring has 4 slots, so
// overflow, overflow during a steal and concurrent steals happen all the
// time.
func TestExactlyOnce(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 10_000
	}
	const thieves = 3
	c := &tally{runs: make([]atomic.Int32, total)}
	owner, ownerSteal := New[int]()
	inj := NewInjectShard[int]()

	locals := make([]*Local[int], thieves)
	victims := []*Stealer[int]{ownerSteal}
	for i := range locals {
		var s *Stealer[int]
		locals[i], s = New[int]()
		victims = append(victims, s)
	}
	var done atomic.Bool
	var steals, overflows atomic.Int64
	var wg sync.WaitGroup
	for i, mine := range locals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				if v, ok := mine.Pop(); ok {
					c.run(v)
					continue
				}
				victim := victims[rng.IntN(len(victims))]
				if victim == victims[i+1] {
					continue
				}
				if v, moved := victim.StealInto(mine); moved > 0 {
					steals.Add(1)
					c.run(v)
					continue
				}
				if v, ok := inj.Pop(); ok {
					c.run(v)
					continue
				}
				if done.Load() && ownerSteal.IsEmpty() && inj.IsEmpty() {
					return
				}
				runtime.Gosched()
			}
		}()
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var batch []int
	for v := range total {
		if pushTo(owner, v, inj) {
			overflows.Add(1)
		}
		switch r := rng.IntN(8); {
		case r < 3:
			if v, ok := owner.Pop(); ok {
				c.run(v)
			}
		case r == 3:
			// Pull a batch home from the shard, as a worker does.
			batch = inj.PopN(batch[:0], owner.Free()/2)
			owner.PushBatch(batch)
		}
	}
	for {
		v, ok := owner.Pop()
		if !ok {
			break
		}
		c.run(v)
	}
	done.Store(true)
	wg.Wait()
	for _, v := range inj.PopN(nil, inj.Len()) {
		c.run(v)
	}
	c.check(t)
	t.Logf("%d tasks, %d steals, %d overflows", total, steals.Load(), overflows.Load())
	if overflows.Load() == 0 && Capacity <= 4 {
		t.Error("the 4-slot ring never overflowed: the test does not reach the rare path")
	}
}

// Inject shard: many producers, many consumers, every task exactly once,
// nothing dropped at Close.
func TestInjectExactlyOnce(t *testing.T) {
	total := 200_000
	if testing.Short() {
		total = 10_000
	}
	c := &tally{runs: make([]atomic.Int32, total)}
	s := NewInjectShard[int]()
	const producers, consumers = 3, 3
	var prod, cons sync.WaitGroup
	for p := range producers {
		prod.Add(1)
		go func() {
			defer prod.Done()
			for v := p; v < total; v += producers {
				switch v % 5 {
				case 0, 1:
					s.Requeue(v)
				default:
					if err := s.Push(v); err != nil {
						t.Errorf("push %d: %v", v, err)
						return
					}
				}
			}
		}()
	}
	var stop atomic.Bool
	for range consumers {
		cons.Add(1)
		go func() {
			defer cons.Done()
			var buf []int
			for {
				buf = s.PopN(buf[:0], 7)
				for _, v := range buf {
					c.run(v)
				}
				if v, ok := s.Pop(); ok {
					c.run(v)
				}
				if len(buf) == 0 {
					if stop.Load() && s.IsEmpty() {
						return
					}
					runtime.Gosched() // a worker would park here
				}
			}
		}()
	}
	prod.Wait()
	s.Close()
	if err := s.Push(-1); err != ErrClosed {
		t.Errorf("Push after Close: %v", err)
	}
	stop.Store(true)
	cons.Wait()
	c.check(t)
}

// StealInto's count is what the steal moved, also while other thieves take
// from the thief's own ring: one owner pushes (spilling to the inject
// shard) and pops, thieves steal from it and from each other, and every
// ring's books balance at the end. Into ring r went the owner's pushes
// that stayed in it and, of each steal into r, the tasks besides the one
// returned; out of it went pops, the owner's spills and every task stolen
// from it. A count off by one steal unbalances two rings.
func TestStealCountsWhatMoved(t *testing.T) {
	total := 300_000
	if testing.Short() {
		total = 10_000
	}
	// A steal from a ring that is itself being stolen into needs a thief
	// to be preempted with tasks in its ring: on few CPUs a round may see
	// none, so rounds repeat (each checked in full) until one does.
	for round := 1; ; round++ {
		steals, fromThieves := stealRound(t, total)
		t.Logf("round %d: %d tasks, %d steals, %d of them from thieves", round, total, steals, fromThieves)
		if t.Failed() || fromThieves > 0 {
			return
		}
		if round == 20 {
			t.Fatal("no thief stole from another in 20 rounds: the test does not reach steals from a ring being stolen into")
		}
	}
}

// stealRound is one round of TestStealCountsWhatMoved: an owner pushing
// and popping, three thieves stealing from it and from each other; it
// checks every task ran once and every ring's counts, and returns the
// steals and how many of them took from a thief.
func stealRound(t *testing.T, total int) (steals, fromThieves int64) {
	t.Helper()
	const thieves = 3
	c := &tally{runs: make([]atomic.Int32, total)}
	inj := NewInjectShard[int]()
	locals := make([]*Local[int], thieves+1) // 0 is the owner's
	victims := make([]*Stealer[int], thieves+1)
	for i := range locals {
		locals[i], victims[i] = New[int]()
	}
	ins := make([]atomic.Int64, thieves+1)
	outs := make([]atomic.Int64, thieves+1)
	var done atomic.Bool
	var nSteals, stolenFromThieves atomic.Int64
	var wg sync.WaitGroup
	for i := 1; i <= thieves; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := locals[i]
			rng := rand.New(rand.NewPCG(uint64(i), 13))
			for {
				if v, ok := mine.Pop(); ok {
					outs[i].Add(1)
					c.run(v)
					continue
				}
				k := rng.IntN(len(victims))
				if k == i {
					continue
				}
				if v, moved := victims[k].StealInto(mine); moved > 0 {
					outs[k].Add(int64(moved))
					ins[i].Add(int64(moved - 1))
					nSteals.Add(1)
					if k != 0 {
						stolenFromThieves.Add(1)
					}
					c.run(v)
					if moved > 1 {
						runtime.Gosched() // let the others find the rest in mine
					}
					continue
				}
				if v, ok := inj.Pop(); ok {
					c.run(v)
					continue
				}
				if done.Load() && victims[0].IsEmpty() && inj.IsEmpty() {
					return
				}
				runtime.Gosched()
			}
		}()
	}

	owner := locals[0]
	rng := rand.New(rand.NewPCG(3, 4))
	for v := range total {
		if spilled := owner.Push(v); spilled == nil {
			ins[0].Add(1)
		} else {
			outs[0].Add(int64(len(spilled) - 1)) // all but v had been in the ring
			inj.Requeue(spilled...)
			clear(spilled)
		}
		if rng.IntN(4) == 0 {
			if v, ok := owner.Pop(); ok {
				outs[0].Add(1)
				c.run(v)
			}
		}
	}
	for {
		v, ok := owner.Pop()
		if !ok {
			break
		}
		outs[0].Add(1)
		c.run(v)
	}
	done.Store(true)
	wg.Wait()
	for _, v := range inj.PopN(nil, inj.Len()) {
		c.run(v)
	}
	c.check(t)
	for i := range ins {
		if in, out := ins[i].Load(), outs[i].Load(); in != out {
			t.Errorf("ring %d: %d tasks went in and %d came out by the counts", i, in, out)
		}
	}
	return nSteals.Load(), stolenFromThieves.Load()
}
