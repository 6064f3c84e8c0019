package queue

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The sequential specification the ring must be linearizable to. A state
// is the ring's tasks and the inject shard's, oldest first, as strings of
// task bytes (so states compare with ==). A steal takes effect at its
// claim, so tasks being copied out are no longer in the ring.
type qState struct{ ring, inject string }

type qInput struct {
	op string // "push", "pop", "steal", "final"
	v  byte   // the task pushed
}

type qOutput struct {
	moved  int    // push: tasks that went to inject
	v      byte   // pop: the task
	ok     bool   // pop: whether there was one
	stolen string // steal: the tasks, oldest first; final: ring + "|" + inject
}

func stepQueue(s qState, in qInput, out qOutput) []qState {
	const half = Capacity / 2
	switch in.op {
	case "push":
		switch {
		case out.moved == 0 && len(s.ring) < Capacity:
			return []qState{{s.ring + string(in.v), s.inject}}
		case out.moved == half+1 && len(s.ring) == Capacity:
			return []qState{{s.ring[half:], s.inject + s.ring[:half] + string(in.v)}}
		case out.moved == 1 && len(s.ring) < Capacity:
			// Full while a thief copies out its claim (already gone here):
			// the slots it claimed, and those the owner popped since the
			// claim, stay taken until the thief commits, so the ring can
			// be full with anything from none to Capacity-1 tasks left.
			return []qState{{s.ring, s.inject + string(in.v)}}
		}
	case "pop":
		switch {
		case !out.ok && s.ring == "":
			return []qState{s}
		case out.ok && s.ring != "" && s.ring[0] == out.v:
			return []qState{{s.ring[1:], s.inject}}
		}
	case "steal":
		k := len(out.stolen)
		switch {
		case k == 0:
			return []qState{s} // refused: empty, or another thief is stealing
		case k <= len(s.ring)-len(s.ring)/2 && s.ring[:k] == out.stolen:
			return []qState{{s.ring[k:], s.inject}}
		}
	case "final":
		if s.ring+"|"+s.inject == out.stolen {
			return []qState{s}
		}
	}
	return nil
}

var queueModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{qState{}} },
	Step: func(state, input, output any) []any {
		next := stepQueue(state.(qState), input.(qInput), output.(qOutput))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%s(%d) -> %+v", input.(qInput).op, input.(qInput).v, output.(qOutput))
	},
}).ToModel()

// recorder stamps operations with a logical clock that orders them in
// real time.
type recorder struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (r *recorder) do(client int, in qInput, f func() qOutput) {
	call := r.clock.Add(1)
	out := f()
	ret := r.clock.Add(1)
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

// Many short random runs of one owner (push, pop) and two thieves, each
// checked for linearizability against the sequential model.
func TestLinearizable(t *testing.T) {
	runs := 400
	if testing.Short() {
		runs = 60
	}
	for run := range runs {
		owner, victim := New[byte]()
		inj := NewInjectShard[byte]()
		rec := &recorder{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for thief := 1; thief <= 2; thief++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine, _ := New[byte]()
				<-start
				for range 12 {
					rec.do(thief, qInput{op: "steal"}, func() qOutput {
						v, moved := victim.StealInto(mine)
						if moved == 0 {
							return qOutput{}
						}
						var got []byte
						for {
							w, ok := mine.Pop()
							if !ok {
								break
							}
							got = append(got, w)
						}
						if moved != len(got)+1 { // nobody else takes from mine
							t.Errorf("StealInto moved %d tasks and reported %d", len(got)+1, moved)
						}
						return qOutput{stolen: string(append(got, v))}
					})
					runtime.Gosched()
				}
			}()
		}
		rng := rand.New(rand.NewPCG(uint64(run), 11))
		close(start)
		next := byte(1)
		for range 40 {
			if rng.IntN(3) > 0 && next < 255 {
				v := next
				next++
				rec.do(0, qInput{op: "push", v: v}, func() qOutput {
					before := inj.Len()
					pushTo(owner, v, inj)
					return qOutput{moved: inj.Len() - before}
				})
			} else {
				rec.do(0, qInput{op: "pop"}, func() qOutput {
					v, ok := owner.Pop()
					return qOutput{v: v, ok: ok}
				})
			}
		}
		wg.Wait()
		rec.do(0, qInput{op: "final"}, func() qOutput {
			var rest []byte
			for {
				v, ok := owner.Pop()
				if !ok {
					break
				}
				rest = append(rest, v)
			}
			return qOutput{stolen: string(rest) + "|" + string(inj.PopN(nil, inj.Len()))}
		})
		res, _ := porcupine.CheckOperationsVerbose(queueModel, rec.ops, 10*time.Second)
		if res != porcupine.Ok {
			t.Fatalf("run %d: history is not linearizable (%v):\n%v", run, res, rec.ops)
		}
	}
}

// The model itself must reject wrong histories, or the test above proves
// nothing.
func TestModelRejectsWrongHistories(t *testing.T) {
	op := func(client int, call, ret int64, in qInput, out qOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	push := func(v byte) qInput { return qInput{op: "push", v: v} }
	for name, h := range map[string][]porcupine.Operation{
		"pop out of order": {
			op(0, 1, 2, push(1), qOutput{}), op(0, 3, 4, push(2), qOutput{}),
			op(0, 5, 6, qInput{op: "pop"}, qOutput{v: 2, ok: true}),
		},
		"steal of the newest": {
			op(0, 1, 2, push(1), qOutput{}), op(0, 3, 4, push(2), qOutput{}),
			op(1, 5, 6, qInput{op: "steal"}, qOutput{stolen: "\x02"}),
		},
		"steal of more than half": {
			op(0, 1, 2, push(1), qOutput{}), op(0, 3, 4, push(2), qOutput{}),
			op(1, 5, 6, qInput{op: "steal"}, qOutput{stolen: "\x01\x02"}),
		},
		"task lost": {
			op(0, 1, 2, push(1), qOutput{}),
			op(0, 3, 4, qInput{op: "final"}, qOutput{stolen: "|"}),
		},
		"task twice": {
			op(0, 1, 2, push(1), qOutput{}),
			op(0, 3, 4, qInput{op: "pop"}, qOutput{v: 1, ok: true}),
			op(1, 5, 6, qInput{op: "steal"}, qOutput{stolen: "\x01"}),
		},
	} {
		if porcupine.CheckOperations(queueModel, h) {
			t.Errorf("%s: the model accepted a wrong history", name)
		}
	}
}
