package pool

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// BenchmarkNew times New and Close of pools with a worker per synthetic
// CPU, laid over the real CPUs, beside a floor: as many goroutines, each
// locked to its thread and bound to one CPU, started and ended. new-ms
// and close-ms are per pool (for the floor: its start and its end).
func BenchmarkNew(b *testing.B) {
	for _, s := range []struct {
		workers int
		spec    string
	}{{64, "4x16"}, {256, "8x32"}, {512, "16x32"}, {1024, "16x64"}, {2048, "32x64"}} {
		b.Run(fmt.Sprint(s.workers), func(b *testing.B) {
			b.Run("pool", func(b *testing.B) { benchNewPool(b, s.spec, s.workers) })
			b.Run("floor", func(b *testing.B) { benchNewFloor(b, s.workers) })
		})
	}
}

func benchNewPool(b *testing.B, spec string, workers int) {
	var opened, closed time.Duration
	for b.Loop() {
		t0 := time.Now()
		p, err := New(WithSpec(spec), WithoutEnv())
		if err != nil {
			b.Skipf("New(%s): %v", spec, err)
		}
		t1 := time.Now()
		if n := p.Workers(); n != workers {
			b.Fatalf("New(%s) has %d workers, want %d", spec, n, workers)
		}
		t2 := time.Now()
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		opened += t1.Sub(t0)
		closed += time.Since(t2)
	}
	reportNew(b, opened, closed)
}

// benchNewFloor starts n goroutines that each lock their thread and bind
// it to one of the real CPUs in turn, waits until all are bound, then
// ends them: a locked goroutine that returns takes its thread with it, as
// a worker's does.
func benchNewFloor(b *testing.B, n int) {
	probe, err := pin.Lock(topology.CPUSet{})
	if err != nil {
		b.Skip(err)
	}
	cpus := probe.Original().List()
	_ = probe.Restore()
	if len(cpus) == 0 {
		b.Skip("no CPUs in the thread's mask")
	}
	var opened, closed time.Duration
	for b.Loop() {
		t0 := time.Now()
		var bound, ended sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, n)
		bound.Add(n)
		ended.Add(n)
		for i := range n {
			go func() {
				defer ended.Done()
				_, err := pin.Lock(topology.NewCPUSet(cpus[i%len(cpus)]))
				if err != nil {
					errs <- err
				}
				bound.Done()
				<-stop
			}()
		}
		bound.Wait()
		t1 := time.Now()
		close(stop)
		ended.Wait()
		opened += t1.Sub(t0)
		closed += time.Since(t1)
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	}
	reportNew(b, opened, closed)
}

func reportNew(b *testing.B, opened, closed time.Duration) {
	ops := float64(b.N)
	b.ReportMetric(float64(opened.Microseconds())/1e3/ops, "new-ms")
	b.ReportMetric(float64(closed.Microseconds())/1e3/ops, "close-ms")
}
