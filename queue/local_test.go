package queue

import (
	"slices"
	"testing"
)

// drain pops everything the owner can see.
func drain(l *Local[int]) []int {
	var out []int
	for {
		v, ok := l.Pop()
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// Every fill level 0..Capacity, at several index offsets so that the
// indexes wrap around the ring.
func TestFillLevels(t *testing.T) {
	l, s := New[int]()
	inj := NewInjectShard[int]()
	next := 0
	for round := range 3 {
		for n := 0; n <= Capacity; n++ {
			for i := range n {
				if pushTo(l, next+i, inj) {
					t.Fatalf("round %d: push %d of %d overflowed", round, i, n)
				}
			}
			if l.Len() != n || l.Free() != Capacity-n || l.IsEmpty() != (n == 0) || s.IsEmpty() != (n == 0) {
				t.Fatalf("level %d: Len %d Free %d", n, l.Len(), l.Free())
			}
			if got := drain(l); !slices.Equal(got, seq(next, n)) && n > 0 {
				t.Fatalf("level %d: popped %v", n, got)
			}
			if !l.IsEmpty() || !s.IsEmpty() || inj.Len() != 0 {
				t.Fatalf("level %d: not empty after popping all", n)
			}
			next += n
		}
	}
}

// The 32-bit indexes wrap: push and pop across 2^32.
func TestIndexWrap(t *testing.T) {
	l, _ := New[int]()
	start := uint32(1<<32 - 3)
	l.r.head.Store(pack(start, start))
	l.r.tail.Store(start)
	inj := NewInjectShard[int]()
	for i := range Capacity {
		pushTo(l, i, inj)
	}
	if inj.Len() != 0 || l.Len() != Capacity {
		t.Fatalf("Len %d, inject %d", l.Len(), inj.Len())
	}
	if got := drain(l); !slices.Equal(got, seq(0, Capacity)) {
		t.Fatalf("popped %v", got)
	}
}

func TestOverflowMovesHalfAndTheNewTask(t *testing.T) {
	l, _ := New[int]()
	inj := NewInjectShard[int]()
	for i := range Capacity {
		pushTo(l, i, inj)
	}
	if !pushTo(l, Capacity, inj) {
		t.Fatal("push into a full ring did not overflow")
	}
	half := Capacity / 2
	if got := inj.PopN(nil, Capacity); !slices.Equal(got, append(seq(0, half), Capacity)) {
		t.Errorf("inject got %v, want the oldest half then the new task", got)
	}
	if got := drain(l); !slices.Equal(got, seq(half, Capacity-half)) {
		t.Errorf("ring kept %v", got)
	}
}

// A closed shard still takes what a full ring moves out.
func TestOverflowIgnoresClose(t *testing.T) {
	l, _ := New[int]()
	inj := NewInjectShard[int]()
	inj.Close()
	for i := range Capacity + 1 {
		pushTo(l, i, inj)
	}
	if inj.Len() != Capacity/2+1 {
		t.Errorf("inject holds %d, want %d", inj.Len(), Capacity/2+1)
	}
}

func TestStealTakesHalfTheOldest(t *testing.T) {
	for n := 0; n <= Capacity; n++ {
		src, s := New[int]()
		dst, _ := New[int]()
		inj := NewInjectShard[int]()
		for i := range n {
			pushTo(src, i, inj)
		}
		v, moved := s.StealInto(dst)
		want := n - n/2
		if moved != want {
			t.Fatalf("n=%d: StealInto reported %d tasks moved, want %d", n, moved, want)
		}
		if n == 0 {
			continue
		}
		// The returned task is the newest stolen; the rest are in dst.
		stolen := append(drain(dst), v)
		if !slices.Equal(stolen, seq(0, want)) {
			t.Fatalf("n=%d: stole %v, want the oldest %d", n, stolen, want)
		}
		if got := drain(src); !slices.Equal(got, seq(want, n/2)) {
			t.Fatalf("n=%d: left %v", n, got)
		}
	}
}

func TestStealRefusesWhenThiefMoreThanHalfFull(t *testing.T) {
	src, s := New[int]()
	dst, _ := New[int]()
	inj := NewInjectShard[int]()
	for i := range 4 {
		pushTo(src, i, inj)
	}
	for i := range Capacity/2 + 1 {
		pushTo(dst, 100+i, inj)
	}
	if _, moved := s.StealInto(dst); moved != 0 {
		t.Fatal("stole into a ring more than half full")
	}
	dst.Pop() // exactly half full now: allowed
	if _, moved := s.StealInto(dst); moved == 0 {
		t.Fatal("refused to steal into a half-full ring")
	}
}

func TestStealRefusesWhileAnotherStealIsInProgress(t *testing.T) {
	src, s := New[int]()
	dst, _ := New[int]()
	inj := NewInjectShard[int]()
	for i := range 4 {
		pushTo(src, i, inj)
	}
	// A thief has claimed task 0 and not committed.
	src.r.head.Store(pack(0, 1))
	if _, moved := s.StealInto(dst); moved != 0 {
		t.Fatal("a second thief stole during a steal")
	}
	// The owner still pops past the claimed slot.
	if v, ok := src.Pop(); !ok || v != 1 {
		t.Fatalf("pop during a steal = %d, %v", v, ok)
	}
	if steal, real := unpack(src.r.head.Load()); steal != 0 || real != 2 {
		t.Fatalf("pop moved steal: head (%d, %d)", steal, real)
	}
}

// Overflow during a steal: the ring is full but a thief is copying, so
// only the new task goes to inject and the claimed slots stay untouched.
func TestOverflowDuringSteal(t *testing.T) {
	l, _ := New[int]()
	inj := NewInjectShard[int]()
	for i := range Capacity {
		pushTo(l, i, inj)
	}
	l.r.head.Store(pack(0, 2)) // a thief claimed tasks 0 and 1
	if !pushTo(l, Capacity, inj) {
		t.Fatal("push into a full ring did not go to inject")
	}
	if got := inj.PopN(nil, 10); !slices.Equal(got, []int{Capacity}) {
		t.Fatalf("inject got %v, want only the new task", got)
	}
	if l.r.buf[0] != 0 || l.r.buf[1] != 1 || l.Len() != Capacity {
		t.Fatal("the claimed slots were touched")
	}
}

// Steal during overflow: the owner saw a full ring with no steal, but a
// thief claims before the owner's CAS. The overflow must fail and Push
// must then use the room the steal frees.
func TestStealDuringOverflow(t *testing.T) {
	l, s := New[int]()
	dst, _ := New[int]()
	inj := NewInjectShard[int]()
	for i := range Capacity {
		pushTo(l, i, inj)
	}
	steal, real := unpack(l.r.head.Load())
	if steal != real {
		t.Fatal("steal in progress")
	}
	tail := l.r.tail.Load()
	if _, moved := s.StealInto(dst); moved == 0 { // the thief wins the race
		t.Fatal("steal failed")
	}
	if _, ok := l.takeHalf(real, tail); ok {
		t.Fatal("overflow succeeded with a stale head")
	}
	if inj.Len() != 0 {
		t.Fatal("failed overflow moved tasks")
	}
	if pushTo(l, Capacity, inj) || inj.Len() != 0 {
		t.Fatal("push after the steal freed room still overflowed")
	}
	got := append(drain(dst), drain(l)...)
	if len(got) != Capacity {
		t.Fatalf("%d tasks left, want %d", len(got), Capacity)
	}
}

// IsEmpty as thieves see it is never spuriously true: with the owner
// keeping at least one task queued (push, then pop), no observer may see
// an empty ring. Reading tail before head would break this.
func TestNotSpuriouslyEmpty(t *testing.T) {
	l, s := New[int]()
	inj := NewInjectShard[int]()
	pushTo(l, 0, inj)
	rounds := 200000
	if testing.Short() {
		rounds = 20000
	}
	stop := make(chan struct{})
	bad := make(chan string, 1)
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if s.IsEmpty() {
					select {
					case bad <- "observer saw an empty ring":
					default:
					}
					return
				}
			}
		}()
	}
	for i := range rounds {
		pushTo(l, i+1, inj)
		if _, ok := l.Pop(); !ok {
			t.Fatal("owner pop failed")
		}
	}
	close(stop)
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
}

func TestPushBatch(t *testing.T) {
	l, _ := New[int]()
	inj := NewInjectShard[int]()
	l.PushBatch(nil) // a pull of one task pushes none: nothing changes
	if l.Len() != 0 {
		t.Fatalf("an empty batch left %d tasks", l.Len())
	}
	pushTo(l, -1, inj)
	l.PushBatch(seq(0, Capacity-1))
	if got := drain(l); !slices.Equal(got, append([]int{-1}, seq(0, Capacity-1)...)) {
		t.Fatalf("popped %v", got)
	}
	pushTo(l, 0, inj)
	defer func() {
		if recover() == nil {
			t.Error("PushBatch beyond Free did not panic")
		}
	}()
	l.PushBatch(seq(0, Capacity))
}

func TestStealIntoItselfPanics(t *testing.T) {
	l, s := New[int]()
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	s.StealInto(l)
}

// Popped and stolen slots are cleared so the collector can free tasks.
func TestSlotsAreCleared(t *testing.T) {
	l, s := New[*int]()
	dst, _ := New[*int]()
	inj := NewInjectShard[*int]()
	for range Capacity + 1 {
		pushTo(l, new(int), inj)
	}
	s.StealInto(dst)
	for {
		if _, ok := l.Pop(); !ok {
			break
		}
	}
	for i, p := range l.r.buf {
		if p != nil {
			t.Fatalf("slot %d still holds a task", i)
		}
	}
}

// pushTo pushes t as a worker does: what a full ring hands back goes to
// inj. It reports whether anything did.
func pushTo[T any](l *Local[T], t T, inj *InjectShard[T]) bool {
	spilled := l.Push(t)
	if spilled == nil {
		return false
	}
	inj.Requeue(spilled...)
	clear(spilled)
	return true
}
