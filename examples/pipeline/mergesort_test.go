package pipeline

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/numapool/numapool/pool"
)

const (
	sortN      = 4 << 20
	sortCutoff = 1 << 14 // below this, sort sequentially
)

// merge merges the sorted halves a[:mid] and a[mid:] through buf
// (len(buf) == len(a)).
func merge(a, buf []int64, mid int) {
	i, j, k := 0, mid, 0
	for i < mid && j < len(a) {
		if a[j] < a[i] {
			buf[k] = a[j]
			j++
		} else {
			buf[k] = a[i]
			i++
		}
		k++
	}
	k += copy(buf[k:], a[i:mid])
	copy(buf[k:], a[j:])
	copy(a, buf)
}

// --- numapool ---

// sortNumapool sorts a in parallel on p. A panic while sorting comes back
// as the error (a *pool.PanicError).
func sortNumapool(p *pool.Pool, a []int64) error {
	buf := make([]int64, len(a))
	_, err := pool.Run(p, func(w *pool.Worker) (struct{}, error) { mergeSortW(w, a, buf); return struct{}{}, nil })
	return err
}

func mergeSortW(w *pool.Worker, a, buf []int64) {
	if len(a) <= sortCutoff {
		slices.Sort(a)
		return
	}
	mid := len(a) / 2
	if err := w.Join(func(w *pool.Worker) { mergeSortW(w, a[:mid], buf[:mid]) },
		func(w *pool.Worker) { mergeSortW(w, a[mid:], buf[mid:]) }); err != nil {
		panic(err) // a half panicked: pass it up, as a goroutine's panic would
	}
	merge(a, buf, mid)
}

// sortNumapoolFork is the same with pool.Fork, which takes each half as
// an argument instead of a closure and so allocates nothing for a half
// nobody steals.
func sortNumapoolFork(p *pool.Pool, a []int64) error {
	buf := make([]int64, len(a))
	_, err := pool.Run(p, func(w *pool.Worker) (struct{}, error) {
		return struct{}{}, mergeSortF(w, halves{a, buf})
	})
	return err
}

// halves is one part of the slice being sorted and its part of the buffer.
type halves struct{ a, buf []int64 }

func mergeSortF(w *pool.Worker, h halves) error {
	if len(h.a) <= sortCutoff {
		slices.Sort(h.a)
		return nil
	}
	mid := len(h.a) / 2
	errA, errB, err := pool.Fork(w, mergeSortF, halves{h.a[:mid], h.buf[:mid]}, mergeSortF, halves{h.a[mid:], h.buf[mid:]})
	if err := errors.Join(errA, errB, err); err != nil {
		return err
	}
	merge(h.a, h.buf, mid)
	return nil
}

// --- goroutines ---

// sortGoroutines sorts a in parallel with a goroutine per half above the
// cutoff.
func sortGoroutines(a []int64) {
	mergeSortG2(a, make([]int64, len(a)))
}

func mergeSortG2(a, buf []int64) {
	if len(a) <= sortCutoff {
		slices.Sort(a)
		return
	}
	mid := len(a) / 2
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		mergeSortG2(a[:mid], buf[:mid])
	}()
	mergeSortG2(a[mid:], buf[mid:])
	wg.Wait()
	merge(a, buf, mid)
}

// --- scaffolding ---

func sortInput(n int) []int64 {
	r := rand.New(rand.NewPCG(1, 2))
	a := make([]int64, n)
	for i := range a {
		a[i] = r.Int64()
	}
	return a
}

func TestMergeSort(t *testing.T) {
	p := newPool(t)
	in := sortInput(sortN)
	want := slices.Clone(in)
	slices.Sort(want)

	a := slices.Clone(in)
	if err := sortNumapool(p, a); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, want) {
		t.Fatal("numapool: not sorted")
	}
	a = slices.Clone(in)
	if err := sortNumapoolFork(p, a); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, want) {
		t.Fatal("numapool fork: not sorted")
	}
	a = slices.Clone(in)
	sortGoroutines(a)
	if !slices.Equal(a, want) {
		t.Fatal("goroutines: not sorted")
	}
}

func BenchmarkMergeSort(b *testing.B) {
	in := sortInput(sortN)
	a := make([]int64, len(in))
	b.Run("numapool", func(b *testing.B) {
		p := newPool(b)
		for b.Loop() {
			b.StopTimer()
			copy(a, in)
			b.StartTimer()
			if err := sortNumapool(p, a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("numapool-generic", func(b *testing.B) {
		p := newPool(b)
		for b.Loop() {
			b.StopTimer()
			copy(a, in)
			b.StartTimer()
			if err := sortNumapoolFork(p, a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("goroutines", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			copy(a, in)
			b.StartTimer()
			sortGoroutines(a)
		}
	})
	b.Run("sequential", func(b *testing.B) {
		buf := make([]int64, len(a))
		for b.Loop() {
			b.StopTimer()
			copy(a, in)
			b.StartTimer()
			mergeSortSeq(a, buf)
		}
	})
}

func mergeSortSeq(a, buf []int64) {
	if len(a) <= sortCutoff {
		slices.Sort(a)
		return
	}
	mid := len(a) / 2
	mergeSortSeq(a[:mid], buf[:mid])
	mergeSortSeq(a[mid:], buf[mid:])
	merge(a, buf, mid)
}
