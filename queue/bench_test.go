package queue

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// task is not zero-sized, so that every task has an address of its own.
type task struct{ _ int }

// The reference: one uncontended CompareAndSwap.
func BenchmarkCAS(b *testing.B) {
	var x atomic.Uint64
	b.ReportAllocs()
	for i := range b.N {
		x.CompareAndSwap(uint64(i), uint64(i+1))
	}
}

// One push and one pop by the owner, the ring never full.
func BenchmarkLocalPushPop(b *testing.B) {
	l, _ := New[*task]()
	inj := NewInjectShard[*task]()
	t := &task{}
	b.ReportAllocs()
	for b.Loop() {
		pushTo(l, t, inj)
		l.Pop()
	}
}

// The same with a non-pointer task: no write barrier on the slot stores.
func BenchmarkLocalPushPopUintptr(b *testing.B) {
	l, _ := New[uintptr]()
	inj := NewInjectShard[uintptr]()
	b.ReportAllocs()
	for b.Loop() {
		pushTo(l, 1, inj)
		l.Pop()
	}
}

// A batch of Capacity/2 pushed at once (as from an inject shard), then
// popped one by one; ns/op is per task.
func BenchmarkLocalPushBatchPop(b *testing.B) {
	l, _ := New[*task]()
	batch := make([]*task, Capacity/2)
	for i := range batch {
		batch[i] = &task{}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i += len(batch) {
		l.PushBatch(batch)
		for range batch {
			l.Pop()
		}
	}
}

// One owner pushing, one thief stealing into its own ring and running
// what it stole; ns/op is per task. In BenchmarkSteal the owner pushes
// one task and pops every third: the thief keeps the ring almost empty,
// the worst case for a stealing queue (a steal moves one or two tasks).
// In BenchmarkStealBurst the owner pushes bursts of Capacity/2 (as a
// fork does) and then pops its share: steals move half a burst.
func BenchmarkSteal(b *testing.B) { benchSteal(b, 1) }

func BenchmarkStealBurst(b *testing.B) { benchSteal(b, Capacity/2) }

func benchSteal(b *testing.B, burst int) {
	owner, victim := New[*task]()
	inj := NewInjectShard[*task]()
	t := &task{}
	var stop atomic.Bool
	var stolen, steals atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		mine, _ := New[*task]()
		n, k := int64(0), int64(0)
		for !stop.Load() {
			if _, moved := victim.StealInto(mine); moved > 0 {
				n++
				k++
				for {
					if _, ok := mine.Pop(); !ok {
						break
					}
					n++
				}
			} else {
				runtime.Gosched() // a searching worker backs off, then parks
			}
		}
		stolen.Store(n)
		steals.Store(k)
	}()
	b.ReportAllocs()
	for i := 0; i < b.N; i += burst {
		for range burst {
			pushTo(owner, t, inj)
		}
		if burst == 1 {
			if i%3 == 0 {
				owner.Pop()
			}
			continue
		}
		for {
			if _, ok := owner.Pop(); !ok {
				break
			}
		}
	}
	stop.Store(true)
	<-done
	b.ReportMetric(float64(stolen.Load())/float64(b.N), "stolen/op")
	b.ReportMetric(float64(stolen.Load())/float64(max(steals.Load(), 1)), "tasks/steal")
}

// Inject shard: push one at a time, pop in batches of 32.
func BenchmarkInjectPushPopN(b *testing.B) {
	s := NewInjectShard[*task]()
	t := &task{}
	buf := make([]*task, 0, 32)
	b.ReportAllocs()
	for i := range b.N {
		_ = s.Push(t)
		if i%32 == 31 {
			buf = s.PopN(buf[:0], 32)
		}
	}
}

// Inject shard in a full ring's shape: the overflow of a ring (half of
// it and one task) in, a worker's share out; ns/op is per task.
func BenchmarkInjectOverflowBatch(b *testing.B) {
	s := NewInjectShard[*task]()
	batch := make([]*task, Capacity/2+1)
	for i := range batch {
		batch[i] = &task{}
	}
	buf := make([]*task, 0, len(batch))
	b.ReportAllocs()
	for i := 0; i < b.N; i += len(batch) {
		s.Requeue(batch...)
		buf = s.PopN(buf[:0], len(batch))
	}
}

// Baseline: a buffered channel, one send and one receive.
func BenchmarkChanSendRecv(b *testing.B) {
	ch := make(chan *task, Capacity)
	t := &task{}
	b.ReportAllocs()
	for b.Loop() {
		ch <- t
		<-ch
	}
}

// Baseline: a mutex-guarded slice used as a FIFO, push back and pop front.
type mutexDeque struct {
	mu    sync.Mutex
	items []*task
}

func (d *mutexDeque) push(t *task) {
	d.mu.Lock()
	d.items = append(d.items, t)
	d.mu.Unlock()
}

func (d *mutexDeque) pop() (*task, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.items) == 0 {
		return nil, false
	}
	t := d.items[0]
	d.items = d.items[1:]
	if len(d.items) == 0 {
		d.items = d.items[:0:0]
	}
	return t, true
}

func BenchmarkMutexDequePushPop(b *testing.B) {
	d := &mutexDeque{}
	t := &task{}
	b.ReportAllocs()
	for b.Loop() {
		d.push(t)
		d.pop()
	}
}

// Baselines under stealing: one producer, one consumer, per task.
func BenchmarkChanProducerConsumer(b *testing.B) {
	ch := make(chan *task, Capacity)
	t := &task{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ch {
		}
	}()
	b.ReportAllocs()
	for range b.N {
		ch <- t
	}
	close(ch)
	<-done
}

func BenchmarkMutexDequeProducerConsumer(b *testing.B) {
	d := &mutexDeque{}
	t := &task{}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			d.pop()
		}
	}()
	b.ReportAllocs()
	for range b.N {
		d.push(t)
	}
	stop.Store(true)
	<-done
}
