package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"

	"github.com/numapool/numapool/pool"
	"golang.org/x/sync/errgroup"
)

const (
	svcClients = 64
	svcJobs    = 10_000 // per client
	svcSize    = 1 << 10
)

// A service: many goroutines each hand small jobs (hash 1 KiB) to a shared
// executor and wait for every result. Each client returns the XOR of the first
// 8 bytes of its hashes; the service returns the XOR over clients.

type hashFunc func(buf []byte) ([32]byte, error)

// serve runs the clients, each calling hash for every job.
func serve(hash hashFunc) (uint64, error) {
	var g errgroup.Group
	results := make([]uint64, svcClients)
	for c := range svcClients {
		g.Go(func() error {
			buf := make([]byte, svcSize)
			for j := range svcJobs {
				binary.LittleEndian.PutUint64(buf, uint64(c)<<32|uint64(j))
				sum, err := hash(buf)
				if err != nil {
					return err
				}
				results[c] ^= binary.LittleEndian.Uint64(sum[:])
			}
			return nil
		})
	}
	err := g.Wait()
	var x uint64
	for _, r := range results {
		x ^= r
	}
	return x, err
}

// --- numapool: pool.Run ---

func hashNumapool(p *pool.Pool) hashFunc {
	return func(buf []byte) ([32]byte, error) {
		return pool.Run(p, func(*pool.Worker) ([32]byte, error) {
			return sha256.Sum256(buf), nil
		})
	}
}

// --- numapool: Async, then Wait ---

func hashAsync(p *pool.Pool) hashFunc {
	return func(buf []byte) ([32]byte, error) {
		f := pool.Async(p, func(*pool.Worker) ([32]byte, error) {
			return sha256.Sum256(buf), nil
		})
		return f.Wait()
	}
}

// --- goroutine per job, result over a channel ---

func hashGoroutine(buf []byte) ([32]byte, error) {
	ch := make(chan [32]byte, 1)
	go func() { ch <- sha256.Sum256(buf) }()
	return <-ch, nil
}

// --- one errgroup shared by the clients, limited to GOMAXPROCS ---

func hashErrgroup() hashFunc {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	return func(buf []byte) ([32]byte, error) {
		ch := make(chan [32]byte, 1)
		g.Go(func() error {
			ch <- sha256.Sum256(buf)
			return nil
		})
		return <-ch, nil
	}
}

// --- scaffolding ---

func hashInline(buf []byte) ([32]byte, error) { return sha256.Sum256(buf), nil }

var serviceOnce = sync.OnceValues(func() (uint64, error) { return serve(hashInline) })

func TestService(t *testing.T) {
	p := newPool(t)
	want, _ := serviceOnce()
	for name, h := range map[string]hashFunc{
		"numapool":  hashNumapool(p),
		"async":     hashAsync(p),
		"goroutine": hashGoroutine,
		"errgroup":  hashErrgroup(),
	} {
		got, err := serve(h)
		if err != nil || got != want {
			t.Errorf("%s: got %x, %v; want %x", name, got, err, want)
		}
	}
}

func BenchmarkService(b *testing.B) {
	want, _ := serviceOnce()
	run := func(b *testing.B, h hashFunc) {
		for b.Loop() {
			if got, err := serve(h); err != nil || got != want {
				b.Fatalf("got %x, %v; want %x", got, err, want)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*svcClients*svcJobs), "ns/job")
	}
	b.Run("numapool", func(b *testing.B) { run(b, hashNumapool(newPool(b))) })
	b.Run("numapool-async", func(b *testing.B) { run(b, hashAsync(newPool(b))) })
	b.Run("goroutine", func(b *testing.B) { run(b, hashGoroutine) })
	b.Run("errgroup", func(b *testing.B) { run(b, hashErrgroup()) })
	b.Run("inline", func(b *testing.B) { run(b, hashInline) })
}
