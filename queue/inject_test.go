package queue

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The shard against a slice: random pushes, overflow batches (as a full
// ring moves them out), requeues, pops and PopN of sizes that cross
// segment boundaries and empty the shard now and then; order (FIFO) and
// length must match after every step.
func TestInjectShardIsAFIFO(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewInjectShard[int]()
	var model []int
	next := 0
	for step := range 20_000 {
		switch op := rng.IntN(6); {
		case op == 0:
			if err := s.Push(next); err != nil {
				t.Fatal(err)
			}
			model = append(model, next)
			next++
		case op == 1:
			batch := make([]int, rng.IntN(3*segmentSlots))
			for i := range batch {
				batch[i] = next
				next++
			}
			s.Requeue(append(batch, next)...)
			model = append(append(model, batch...), next)
			next++
		case op == 2:
			s.Requeue(next)
			model = append(model, next)
			next++
		case op == 3:
			v, ok := s.Pop()
			if ok != (len(model) > 0) || ok && v != model[0] {
				t.Fatalf("step %d: Pop = %d, %v; want the oldest of %d", step, v, ok, len(model))
			}
			if ok {
				model = model[1:]
			}
		default:
			n := rng.IntN(2*segmentSlots + 2)
			got := s.PopN(nil, n)
			want := model[:min(n, len(model))]
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: PopN(%d) gave %d tasks, first %v; want %d", step, n, len(got), got[:min(3, len(got))], len(want))
			}
			model = model[len(want):]
		}
		if s.Len() != len(model) || s.IsEmpty() != (len(model) == 0) {
			t.Fatalf("step %d: Len %d, IsEmpty %v; the model holds %d", step, s.Len(), s.IsEmpty(), len(model))
		}
	}
	// Drain: everything comes out in order and the shard is reusable.
	if got := s.PopN(nil, len(model)+1); !slices.Equal(got, model) {
		t.Fatalf("drain gave %d tasks, want %d", len(got), len(model))
	}
	if err := s.Push(-1); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Pop(); !ok || v != -1 {
		t.Fatalf("after draining, Pop = %d, %v", v, ok)
	}
}

// Popped and drained slots do not keep tasks alive for the collector.
func TestInjectShardClearsSlots(t *testing.T) {
	s := NewInjectShard[*int]()
	for i := range 3*segmentSlots + 5 {
		_ = s.Push(&i)
	}
	_ = s.PopN(nil, 3*segmentSlots+5)
	for seg := s.head; seg != nil; seg = seg.next {
		for i, p := range seg.slots {
			if p != nil {
				t.Fatalf("slot %d still holds a task after the shard drained", i)
			}
		}
	}
	n := 0
	for seg := s.spares; seg != nil; seg = seg.next {
		n++
		for i, p := range seg.slots {
			if p != nil {
				t.Fatalf("spare segment slot %d holds a task", i)
			}
		}
	}
	if n != s.nspares || n > maxSpares {
		t.Fatalf("%d spare segments, counted %d, at most %d kept", n, s.nspares, maxSpares)
	}
}

// A shard that fills and drains by overflow-sized batches, its contents
// crossing segment boundaries at both ends, reuses its segments: once
// warm it allocates nothing.
// A backlog far longer than the spares, drained and built up again (a
// million tasks spawned, run, spawned again), takes its segments back
// from the shard's pool instead of allocating its length anew. The race
// detector makes sync.Pool drop a quarter of what it is given, so the
// test asks for at most half of the segments to be new, not none.
func TestInjectShardReusesBacklogSegments(t *testing.T) {
	const segs = 64
	s := NewInjectShard[int]()
	batch := make([]int, segmentSlots)
	var out []int
	cycle := func() {
		for range segs {
			s.Requeue(batch...)
		}
		out = s.PopN(out[:0], segs*segmentSlots)
	}
	cycle()
	if allocs := testing.AllocsPerRun(5, cycle); allocs > segs/2 {
		t.Fatalf("%.0f segments allocated to rebuild a backlog of %d, want at most %d", allocs, segs, segs/2)
	}
}

func TestInjectShardReusesSegments(t *testing.T) {
	s := NewInjectShard[int]()
	batch := make([]int, segmentSlots/2+1)
	var out []int
	s.Requeue(batch...) // one batch always in: the ends move on
	cycle := func() {
		for range 4 {
			s.Requeue(batch...)
		}
		out = s.PopN(out[:0], 4*len(batch))
	}
	for range 10 {
		cycle()
	}
	if allocs := testing.AllocsPerRun(200, cycle); allocs != 0 {
		t.Fatalf("%.1f allocations per fill-and-drain cycle, want 0", allocs)
	}
}

// SampleEvery marks the first task Push takes and every n-th after it,
// also when pushes come from several goroutines at once; Requeue marks
// nothing, and a refused Push after Close is not counted.
func TestInjectShardSampleEvery(t *testing.T) {
	s := NewInjectShard[int]()
	s.SampleEvery(4, func(v int) int { return -v })
	const pushers, each = 4, 1000
	var wg sync.WaitGroup
	for g := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.Push(1 + g*each + i); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	s.Requeue(7, 8, 9, 10, 11)
	marked, plain := 0, 0
	for v, ok := s.Pop(); ok; v, ok = s.Pop() {
		if v < 0 {
			marked++
		} else {
			plain++
		}
	}
	if want := pushers * each / 4; marked != want || plain != pushers*each-want+5 {
		t.Errorf("%d marked, %d not; want %d marked of %d pushed, and the 5 requeued not", marked, plain, want, pushers*each)
	}
	s.Close()
	if err := s.Push(1); err == nil {
		t.Error("Push after Close took a task")
	}
}

// Many producers (Push, and Requeue batches) against several consumers
// (PopN, Pop) while another goroutine closes the shard at a random
// moment: every task accepted (Push returned nil, or requeued) comes out
// exactly once, no refused one ever does, each consumer sees each
// producer's tasks in the order they went in, and no Push that starts
// after Close returned is accepted.
func TestInjectShardStressClose(t *testing.T) {
	const producers, consumers, each = 4, 3, 3000
	for round := range 8 {
		s := NewInjectShard[int]()
		rng := rand.New(rand.NewPCG(uint64(round), 3))
		closeAfter := rng.IntN(producers * each)
		var (
			accepted [producers][]int
			refused  [producers][]int
			popped   [consumers][]int
			started  sync.WaitGroup
			prod     sync.WaitGroup
			cons     sync.WaitGroup
			closed   atomic.Bool
			tried    atomic.Int64
			late     atomic.Int64 // pushes accepted that began after Close returned
			done     = make(chan struct{})
		)
		go func() { // the closer
			for tried.Load() < int64(closeAfter) {
				runtime.Gosched()
			}
			s.Close()
			closed.Store(true)
		}()
		for g := range producers {
			prod.Add(1)
			go func() {
				defer prod.Done()
				prng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				for i := 0; i < each; {
					v := g*each + i
					if prng.IntN(4) == 0 { // a batch, as a full ring spills
						k := min(1+prng.IntN(2*segmentSlots+1), each-i)
						batch := make([]int, k)
						for j := range batch {
							batch[j] = v + j
						}
						s.Requeue(batch...)
						accepted[g] = append(accepted[g], batch...)
						i += k
						tried.Add(int64(k))
						continue
					}
					after := closed.Load()
					if err := s.Push(v); err == nil {
						if after {
							late.Add(1)
						}
						accepted[g] = append(accepted[g], v)
					} else {
						refused[g] = append(refused[g], v)
					}
					i++
					tried.Add(1)
				}
			}()
		}
		for c := range consumers {
			cons.Add(1)
			started.Add(1)
			go func() {
				defer cons.Done()
				started.Done()
				crng := rand.New(rand.NewPCG(uint64(round), uint64(100+c)))
				var buf []int
				for {
					select {
					case <-done:
						if s.IsEmpty() {
							return
						}
					default:
					}
					if crng.IntN(3) == 0 {
						if v, ok := s.Pop(); ok {
							popped[c] = append(popped[c], v)
						}
						continue
					}
					buf = s.PopN(buf[:0], 1+crng.IntN(3*segmentSlots))
					popped[c] = append(popped[c], buf...)
				}
			}()
		}
		started.Wait()
		prod.Wait()
		close(done)
		cons.Wait()
		for !closed.Load() {
			runtime.Gosched()
		}

		if n := late.Load(); n != 0 {
			t.Fatalf("round %d: %d pushes accepted that began after Close returned", round, n)
		}
		seen := make(map[int]int)
		for c := range consumers {
			last := [producers]int{-1, -1, -1, -1}
			for _, v := range popped[c] {
				seen[v]++
				if g := v / each; v <= last[g] {
					t.Fatalf("round %d: consumer %d took %d after %d of the same producer", round, c, v, last[g])
				} else {
					last[g] = v
				}
			}
		}
		total := 0
		for g := range producers {
			total += len(accepted[g])
			for _, v := range accepted[g] {
				if seen[v] != 1 {
					t.Fatalf("round %d: accepted task %d popped %d times", round, v, seen[v])
				}
			}
			for _, v := range refused[g] {
				if seen[v] != 0 {
					t.Fatalf("round %d: refused task %d popped %d times", round, v, seen[v])
				}
			}
		}
		if len(seen) != total || !s.IsEmpty() || s.Len() != 0 {
			t.Fatalf("round %d: %d distinct tasks popped, %d accepted; Len %d", round, len(seen), total, s.Len())
		}
	}
}

// When Close returns, every task a Push accepted is in the shard and
// counted by Len, also the pushes that claimed their slot just before the
// close and were still writing it: the pool decides it is drained from
// Len after Close.
func TestInjectShardCloseWaitsForPushes(t *testing.T) {
	const producers = 4
	for round := range 50 {
		s := NewInjectShard[int]()
		var wg sync.WaitGroup
		var accepted atomic.Int64
		start := make(chan struct{})
		for range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for s.Push(1) == nil {
					accepted.Add(1)
				}
			}()
		}
		close(start)
		for range round * 10 {
			runtime.Gosched()
		}
		s.Close()
		atClose := s.Len()
		wg.Wait()
		if n := accepted.Load(); int64(atClose) != n || s.Len() != atClose {
			t.Fatalf("round %d: Len %d when Close returned, %d accepted, Len now %d", round, atClose, n, s.Len())
		}
		if got := s.Pushed(); got != uint64(atClose) {
			t.Fatalf("round %d: Pushed %d, want %d", round, got, atClose)
		}
	}
}

// refShard is the inject shard's specification as the simplest code: a
// slice under a mutex. The index a sample counts is the slot's place
// among all the tasks the shard took, Push's and Requeue's.
type refShard struct {
	mu     sync.Mutex
	tasks  []int
	closed bool
	slots  uint64 // tasks taken, by Push and Requeue
	pushed uint64
	every  uint64
}

func (r *refShard) push(v int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.every != 0 && r.slots%r.every == 0 {
		v = -v
	}
	r.tasks = append(r.tasks, v)
	r.slots++
	r.pushed++
	return nil
}

func (r *refShard) requeue(vs ...int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tasks = append(r.tasks, vs...)
	r.slots += uint64(len(vs))
}

func (r *refShard) popN(n int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := min(max(n, 0), len(r.tasks))
	out := slices.Clone(r.tasks[:k])
	r.tasks = r.tasks[k:]
	return out
}

// Random sequential histories, on the shard and on refShard: every
// result matches (Push's error, Pop, PopN, Len, IsEmpty, Pushed, the
// samples SampleEvery marks), through Close and the Requeues after it.
func TestInjectShardMatchesReference(t *testing.T) {
	for run := range 40 {
		rng := rand.New(rand.NewPCG(uint64(run), 5))
		s := NewInjectShard[int]()
		every := uint64(1 + rng.IntN(7))
		s.SampleEvery(every, func(v int) int { return -v })
		ref := &refShard{every: every}
		next := 1
		for step := range 3000 {
			switch op := rng.IntN(20); {
			case op < 7:
				got, want := s.Push(next), ref.push(next)
				if got != want {
					t.Fatalf("run %d step %d: Push = %v, the reference %v", run, step, got, want)
				}
				next++
			case op < 10:
				batch := make([]int, rng.IntN(2*segmentSlots+2))
				for i := range batch {
					batch[i] = next
					next++
				}
				s.Requeue(batch...)
				ref.requeue(batch...)
			case op < 13:
				v, ok := s.Pop()
				want := ref.popN(1)
				if ok != (len(want) == 1) || ok && v != want[0] {
					t.Fatalf("run %d step %d: Pop = %d, %v; the reference %v", run, step, v, ok, want)
				}
			case op < 19:
				n := rng.IntN(3*segmentSlots) - 1
				if got, want := s.PopN(nil, n), ref.popN(n); !slices.Equal(got, want) {
					t.Fatalf("run %d step %d: PopN(%d) = %v, the reference %v", run, step, n, got, want)
				}
			default:
				if rng.IntN(10) == 0 {
					s.Close()
					ref.closed = true
				}
			}
			if s.Len() != len(ref.tasks) || s.IsEmpty() != (len(ref.tasks) == 0) || s.Pushed() != ref.pushed {
				t.Fatalf("run %d step %d: Len %d, IsEmpty %v, Pushed %d; the reference holds %d, pushed %d",
					run, step, s.Len(), s.IsEmpty(), s.Pushed(), len(ref.tasks), ref.pushed)
			}
		}
	}
}

// The inject shard's sequential specification for porcupine: its tasks,
// oldest first, as a string of task bytes, and whether it is closed.
type shardState struct {
	tasks  string
	closed bool
}

type shardInput struct {
	op string // "push", "requeue", "pop", "popn", "close", "final"
	vs string // push, requeue: the tasks
	n  int    // popn: how many asked for
}

type shardOutput struct {
	ok  bool   // push: accepted; pop: found one
	got string // pop, popn: the tasks taken; final: what was left
}

// stepShard is the specification. PopN, and Pop, may take fewer tasks
// than the shard holds while a push that claimed an older slot is still
// writing it, since it takes only the tasks counted in Len: at least one
// if any is there, never more than asked for, and the oldest first.
func stepShard(s shardState, in shardInput, out shardOutput) (shardState, bool) {
	switch in.op {
	case "push":
		if out.ok {
			return shardState{s.tasks + in.vs, false}, !s.closed
		}
		return s, s.closed
	case "requeue":
		return shardState{s.tasks + in.vs, s.closed}, true
	case "pop", "popn":
		want := 1
		if in.op == "popn" {
			want = in.n
		}
		k := len(out.got)
		if s.tasks == "" || want <= 0 {
			return s, k == 0
		}
		if k < 1 || k > min(want, len(s.tasks)) || s.tasks[:k] != out.got {
			return s, false
		}
		return shardState{s.tasks[k:], s.closed}, true
	case "close":
		return shardState{s.tasks, true}, true
	case "final":
		return s, s.tasks == out.got
	}
	return s, false
}

var shardModel = porcupine.Model{
	Init: func() any { return shardState{} },
	Step: func(state, input, output any) (bool, any) {
		next, ok := stepShard(state.(shardState), input.(shardInput), output.(shardOutput))
		return ok, next
	},
	DescribeOperation: func(input, output any) string {
		in := input.(shardInput)
		return fmt.Sprintf("%s(%q, %d) -> %+v", in.op, in.vs, in.n, output.(shardOutput))
	},
}

// Many short random runs of three clients that push, requeue, pop and
// close at once, each history checked for linearizability against
// stepShard.
func TestInjectShardLinearizable(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 50
	}
	for run := range runs {
		s := NewInjectShard[byte]()
		var (
			clock atomic.Int64
			mu    sync.Mutex
			ops   []porcupine.Operation
			wg    sync.WaitGroup
			nextV atomic.Int32
		)
		do := func(client int, in shardInput, f func() shardOutput) {
			call := clock.Add(1)
			out := f()
			ret := clock.Add(1)
			mu.Lock()
			ops = append(ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
			mu.Unlock()
		}
		start := make(chan struct{})
		for c := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(run), uint64(c)))
				<-start
				for range 8 {
					switch op := rng.IntN(10); {
					case op < 4:
						v := byte(nextV.Add(1))
						do(c, shardInput{op: "push", vs: string(v)}, func() shardOutput {
							return shardOutput{ok: s.Push(v) == nil}
						})
					case op < 6:
						vs := make([]byte, 1+rng.IntN(5)) // across a boundary in the 4-slot build; 255 tasks at most in a run
						for i := range vs {
							vs[i] = byte(nextV.Add(1))
						}
						do(c, shardInput{op: "requeue", vs: string(vs)}, func() shardOutput {
							s.Requeue(vs...)
							return shardOutput{}
						})
					case op < 7:
						do(c, shardInput{op: "pop"}, func() shardOutput {
							v, ok := s.Pop()
							if !ok {
								return shardOutput{}
							}
							return shardOutput{ok: true, got: string(v)}
						})
					case op < 9:
						n := rng.IntN(7)
						do(c, shardInput{op: "popn", n: n}, func() shardOutput {
							return shardOutput{got: string(s.PopN(nil, n))}
						})
					default:
						if c == 0 && rng.IntN(3) == 0 {
							do(c, shardInput{op: "close"}, func() shardOutput {
								s.Close()
								return shardOutput{}
							})
						}
					}
					runtime.Gosched()
				}
			}()
		}
		close(start)
		wg.Wait()
		do(0, shardInput{op: "final"}, func() shardOutput {
			return shardOutput{got: string(s.PopN(nil, s.Len()+1))}
		})
		if res, _ := porcupine.CheckOperationsVerbose(shardModel, ops, 10*time.Second); res != porcupine.Ok {
			t.Fatalf("run %d: history is not linearizable (%v):\n%v", run, res, ops)
		}
	}
}

// The model must reject wrong histories, or the test above proves
// nothing.
func TestInjectShardModelRejectsWrongHistories(t *testing.T) {
	op := func(client int, call, ret int64, in shardInput, out shardOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	push := func(v string) shardInput { return shardInput{op: "push", vs: v} }
	popn := func(n int) shardInput { return shardInput{op: "popn", n: n} }
	for name, h := range map[string][]porcupine.Operation{
		"out of order": {
			op(0, 1, 2, push("a"), shardOutput{ok: true}), op(0, 3, 4, push("b"), shardOutput{ok: true}),
			op(1, 5, 6, popn(1), shardOutput{got: "b"}),
		},
		"accepted after close": {
			op(0, 1, 2, shardInput{op: "close"}, shardOutput{}),
			op(1, 3, 4, push("a"), shardOutput{ok: true}),
		},
		"refused before close": {
			op(1, 1, 2, push("a"), shardOutput{}),
			op(0, 3, 4, shardInput{op: "close"}, shardOutput{}),
		},
		"refused task popped": {
			op(0, 1, 2, shardInput{op: "close"}, shardOutput{}),
			op(1, 3, 4, push("a"), shardOutput{}),
			op(1, 5, 6, popn(1), shardOutput{got: "a"}),
		},
		"nothing taken from a shard that holds a task": {
			op(0, 1, 2, push("a"), shardOutput{ok: true}),
			op(1, 3, 4, popn(2), shardOutput{}),
		},
		"more than asked for": {
			op(0, 1, 2, shardInput{op: "requeue", vs: "ab"}, shardOutput{}),
			op(1, 3, 4, popn(1), shardOutput{got: "ab"}),
		},
		"task lost": {
			op(0, 1, 2, push("a"), shardOutput{ok: true}),
			op(0, 3, 4, shardInput{op: "final"}, shardOutput{}),
		},
		"task twice": {
			op(0, 1, 2, push("a"), shardOutput{ok: true}),
			op(0, 3, 4, shardInput{op: "pop"}, shardOutput{ok: true, got: "a"}),
			op(1, 5, 6, popn(1), shardOutput{got: "a"}),
		},
	} {
		if porcupine.CheckOperations(shardModel, h) {
			t.Errorf("%s: the model accepted a wrong history", name)
		}
	}
}
