package pool

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"
)

// Fork-join and data-parallel benchmarks against goroutines + WaitGroup,
// errgroup and sequential code, in the same run.

func fibGo(n, cutoff int) int {
	if n <= cutoff {
		return fibSeq(n)
	}
	var a, b int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a = fibGo(n-1, cutoff) }()
	b = fibGo(n-2, cutoff)
	wg.Wait()
	return a + b
}

func fibErrgroup(n, cutoff int) int {
	if n <= cutoff {
		return fibSeq(n)
	}
	var a, b int
	var g errgroup.Group
	g.Go(func() error { a = fibErrgroup(n-1, cutoff); return nil })
	b = fibErrgroup(n-2, cutoff)
	_ = g.Wait()
	return a + b
}

func benchFib(b *testing.B, cutoff int) {
	const n = 30
	want := fibSeq(n)
	b.Run("pool", func(b *testing.B) {
		p := benchPool(b)
		b.ReportAllocs()
		for b.Loop() {
			ch := make(chan int, 1)
			_ = p.Submit(context.Background(), func(w *Worker) { ch <- fibJoin(w, n, cutoff) })
			if got := <-ch; got != want {
				b.Fatal(got)
			}
		}
	})
	b.Run("fork", func(b *testing.B) {
		p := benchPool(b)
		b.ReportAllocs()
		for b.Loop() {
			ch := make(chan int, 1)
			_ = p.Submit(context.Background(), func(w *Worker) { ch <- fibFork(w, fibArg{n, cutoff}) })
			if got := <-ch; got != want {
				b.Fatal(got)
			}
		}
	})
	b.Run("goroutines", func(b *testing.B) {
		for b.Loop() {
			if got := fibGo(n, cutoff); got != want {
				b.Fatal(got)
			}
		}
	})
	b.Run("errgroup", func(b *testing.B) {
		for b.Loop() {
			if got := fibErrgroup(n, cutoff); got != want {
				b.Fatal(got)
			}
		}
	})
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			if got := fibSeq(n); got != want {
				b.Fatal(got)
			}
		}
	})
}

func BenchmarkFib30Cutoff10(b *testing.B) { benchFib(b, 10) }
func BenchmarkFib30Cutoff20(b *testing.B) { benchFib(b, 20) }

// chunks runs body over [0, n) in one contiguous block per goroutine.
func chunks(n, parts int, body func(lo, hi int)) {
	var wg sync.WaitGroup
	for k := range parts {
		lo, hi := n*k/parts, n*(k+1)/parts
		wg.Add(1)
		go func() { defer wg.Done(); body(lo, hi) }()
	}
	wg.Wait()
}

// Triad a = b + s*c over arrays far larger than the L3 (3 x 64 MiB),
// first touched by the same split; b.SetBytes counts the 24 bytes moved
// per index, so the result reads as bandwidth.
func BenchmarkTriad(b *testing.B) {
	const n = 8 << 20
	const s = 3.0
	b.Run("pool", func(b *testing.B) {
		p := benchPool(b)
		x, y, z := make([]float64, n), make([]float64, n), make([]float64, n)
		_ = p.ParallelFor(context.Background(), n, 0, func(_ *Worker, lo, hi int) error {
			for i := lo; i < hi; i++ {
				x[i], y[i], z[i] = 0, 1, 2
			}
			return nil
		})
		b.SetBytes(24 * n)
		for b.Loop() {
			_ = p.ParallelFor(context.Background(), n, 0, func(_ *Worker, lo, hi int) error {
				for i := lo; i < hi; i++ {
					x[i] = y[i] + s*z[i]
				}
				return nil
			})
		}
	})
	b.Run("goroutines", func(b *testing.B) {
		parts := len(benchPool(b).workers)
		x, y, z := make([]float64, n), make([]float64, n), make([]float64, n)
		chunks(n, parts, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				x[i], y[i], z[i] = 0, 1, 2
			}
		})
		b.SetBytes(24 * n)
		for b.Loop() {
			chunks(n, parts, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					x[i] = y[i] + s*z[i]
				}
			})
		}
	})
	b.Run("sequential", func(b *testing.B) {
		x, y, z := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range x {
			x[i], y[i], z[i] = 0, 1, 2
		}
		b.SetBytes(24 * n)
		for b.Loop() {
			for i := range x {
				x[i] = y[i] + s*z[i]
			}
		}
	})
}

// A compute-bound loop: the sum of square roots over 2^22 indexes.
func BenchmarkReduce(b *testing.B) {
	const n = 4 << 20
	sumRange := func(lo, hi int) float64 {
		s := 0.0
		for i := lo; i < hi; i++ {
			s += math.Sqrt(float64(i))
		}
		return s
	}
	b.Run("pool", func(b *testing.B) {
		p := benchPool(b)
		partial := make([]float64, len(p.workers)*8) // one slot per worker, padded
		for b.Loop() {
			clear(partial)
			_ = p.ParallelFor(context.Background(), n, 0, func(w *Worker, lo, hi int) error {
				partial[w.ID()*8] += sumRange(lo, hi)
				return nil
			})
		}
	})
	b.Run("goroutines", func(b *testing.B) {
		parts := len(benchPool(b).workers)
		partial := make([]float64, parts*8)
		for b.Loop() {
			var mu sync.Mutex
			chunks(n, parts, func(lo, hi int) {
				s := sumRange(lo, hi)
				mu.Lock()
				partial[0] += s
				mu.Unlock()
			})
		}
	})
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			_ = sumRange(0, n)
		}
	})
}

// mergeSortCutoff is the length below which a merge sort half is sorted
// sequentially.
const mergeSortCutoff = 2048

// sortJoin sorts a with buf (of a's length) as scratch, the halves in
// parallel with Join above mergeSortCutoff.
func sortJoin(w *Worker, a, buf []int) {
	if len(a) <= mergeSortCutoff {
		slices.Sort(a)
		return
	}
	mid := len(a) / 2
	_ = w.Join(func(w *Worker) { sortJoin(w, a[:mid], buf[:mid]) },
		func(w *Worker) { sortJoin(w, a[mid:], buf[mid:]) })
	copy(buf, a)
	i, j, k := 0, mid, 0
	for i < mid && j < len(a) {
		if buf[j] < buf[i] {
			a[k] = buf[j]
			j++
		} else {
			a[k] = buf[i]
			i++
		}
		k++
	}
	k += copy(a[k:], buf[i:mid])
	copy(a[k:], buf[j:])
}

// A parallel merge sort of 2^20 ints: Joins of unequal-time halves, whose
// joiners wait for thieves.
func BenchmarkMergeSort(b *testing.B) {
	const n = 1 << 20
	src := make([]int, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = r.IntN(n)
	}
	p := benchPool(b)
	a, buf := make([]int, n), make([]int, n)
	for b.Loop() {
		copy(a, src)
		done := make(chan struct{})
		_ = p.Submit(context.Background(), func(w *Worker) { sortJoin(w, a, buf); close(done) })
		<-done
	}
	if !slices.IsSorted(a) {
		b.Fatal("not sorted")
	}
}
