package pipeline

import (
	"context"
	"runtime"
	"testing"

	"github.com/numapool/numapool/pool"
	"golang.org/x/sync/errgroup"
)

const (
	triadN     = 16 << 20 // 3 arrays of 128 MiB
	triadSteps = 10
	triadGrain = 1 << 16
)

// Triad: a[i] = b[i] + s*c[i], steps times, over arrays first touched by the
// workers that process them.

// --- numapool: ParallelFor (node blocks, the same on every call) ---

// triadAllocNumapool maps a, b and c untouched and first-touches them with
// the split every later ParallelFor over n uses.
func triadAllocNumapool(p *pool.Pool, n int) (a, b, c []float64, release func() error, err error) {
	s, release, err := pool.AllocFirstTouch[float64](3 * n)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	a, b, c = s[:n], s[n:2*n], s[2*n:]
	err = p.ParallelFor(context.Background(), n, triadGrain, func(_ *pool.Worker, lo, hi int) error {
		for i := lo; i < hi; i++ {
			a[i], b[i], c[i] = 0, float64(i%1000), float64(i%7)
		}
		return nil
	})
	return a, b, c, release, err
}

func triadNumapool(p *pool.Pool, a, b, c []float64, s float64, steps int) error {
	for range steps {
		err := p.ParallelFor(context.Background(), len(a), triadGrain, func(_ *pool.Worker, lo, hi int) error {
			a, b, c := a[lo:hi], b[lo:hi], c[lo:hi]
			for i := range a {
				a[i] = b[i] + s*c[i]
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// --- numapool: one strict task per node block, split inside by a Group ---

func triadNodes(p *pool.Pool, a, b, c []float64, s float64, steps int) error {
	for range steps {
		var futures []*pool.Future[struct{}]
		for _, blk := range p.Split(len(a)) {
			node := p.Node(blk.Node).Strict()
			futures = append(futures, pool.Async(node, func(w *pool.Worker) (struct{}, error) {
				g := w.Pool().Group(context.Background())
				for lo := blk.Lo; lo < blk.Hi; lo += triadGrain {
					hi := min(lo+triadGrain, blk.Hi)
					g.Go(func(*pool.Worker) error {
						a, b, c := a[lo:hi], b[lo:hi], c[lo:hi]
						for i := range a {
							a[i] = b[i] + s*c[i]
						}
						return nil
					})
				}
				return struct{}{}, g.Wait()
			}))
		}
		for _, f := range futures {
			if _, err := f.Wait(); err != nil {
				return err
			}
		}
	}
	return nil
}

// --- errgroup: one goroutine per CPU over contiguous parts ---

func triadAllocErrgroup(n int) (a, b, c []float64) {
	a, b, c = make([]float64, n), make([]float64, n), make([]float64, n)
	parts := runtime.GOMAXPROCS(0)
	var g errgroup.Group
	for k := range parts {
		lo, hi := k*n/parts, (k+1)*n/parts
		g.Go(func() error {
			for i := lo; i < hi; i++ {
				a[i], b[i], c[i] = 0, float64(i%1000), float64(i%7)
			}
			return nil
		})
	}
	_ = g.Wait()
	return a, b, c
}

func triadErrgroup(a, b, c []float64, s float64, steps int) {
	parts := runtime.GOMAXPROCS(0)
	for range steps {
		var g errgroup.Group
		for k := range parts {
			lo, hi := k*len(a)/parts, (k+1)*len(a)/parts
			g.Go(func() error {
				a, b, c := a[lo:hi], b[lo:hi], c[lo:hi]
				for i := range a {
					a[i] = b[i] + s*c[i]
				}
				return nil
			})
		}
		_ = g.Wait()
	}
}

// --- scaffolding ---

func checkTriad(t *testing.T, name string, a []float64, s float64) {
	t.Helper()
	for i, v := range a {
		if want := float64(i%1000) + s*float64(i%7); v != want {
			t.Fatalf("%s: a[%d] = %v, want %v", name, i, v, want)
		}
	}
}

func TestTriad(t *testing.T) {
	p := newPool(t)
	const s = 3.0
	x, y, z, release, err := triadAllocNumapool(p, triadN)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := triadNumapool(p, x, y, z, s, 2); err != nil {
		t.Fatal(err)
	}
	checkTriad(t, "numapool", x, s)
	clear(x)
	if err := triadNodes(p, x, y, z, s, 2); err != nil {
		t.Fatal(err)
	}
	checkTriad(t, "numapool nodes", x, s)

	a, b, c := triadAllocErrgroup(triadN)
	triadErrgroup(a, b, c, s, 2)
	checkTriad(t, "errgroup", a, s)
}

func BenchmarkTriad(b *testing.B) {
	const s = 3.0
	for _, v := range []struct {
		name  string
		triad func(p *pool.Pool, a, b, c []float64, s float64, steps int) error
	}{{"numapool", triadNumapool}, {"numapool-nodes", triadNodes}} {
		b.Run(v.name, func(b *testing.B) {
			p := newPool(b)
			x, y, z, release, err := triadAllocNumapool(p, triadN)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = release() }()
			for b.Loop() {
				if err := v.triad(p, x, y, z, s, triadSteps); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(3 * 8 * triadN * triadSteps)
		})
	}
	b.Run("errgroup", func(b *testing.B) {
		x, y, z := triadAllocErrgroup(triadN)
		for b.Loop() {
			triadErrgroup(x, y, z, s, triadSteps)
		}
		b.SetBytes(3 * 8 * triadN * triadSteps)
	})
}
