package pool

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// The user's *Pool stays open while the user is inside a blocking call on
// it (Run, ParallelFor), even if nothing else refers to it: the cleanup
// for a dropped Pool must not close intake under work that still runs
// and submits through w.Pool().
func TestHardCleanupFiresDuringRun(t *testing.T) {
	var refused int
	for range 20 {
		err := func() error {
			p := newTestPool(t, WithWorkers(2))
			_, err := Run(p, func(w *Worker) (int, error) {
				for range 3 {
					runtime.GC()
					time.Sleep(time.Millisecond)
				}
				_, err := Run(w.Pool(), func(*Worker) (int, error) { return 1, nil })
				return 0, err
			})
			return err
		}()
		if errors.Is(err, ErrClosed) {
			refused++
		}
	}
	if refused > 0 {
		t.Errorf("%d of 20: Run(w.Pool(), ...) inside Run(p, ...) returned ErrClosed: the pool was closed by the collector while the caller was still waiting in Run(p)", refused)
	}
}

func TestHardCleanupFiresDuringParallelFor(t *testing.T) {
	var refused int
	for range 20 {
		func() {
			p := newTestPool(t, WithWorkers(2))
			_ = p.ParallelFor(context.Background(), 4, 1, func(w *Worker, lo, hi int) error {
				if lo == 0 {
					for range 3 {
						runtime.GC()
						time.Sleep(time.Millisecond)
					}
				}
				if err := w.Pool().Submit(context.Background(), func(*Worker) {}); errors.Is(err, ErrClosed) {
					refused++ // racy counter, only for the report
				}
				return nil
			})
		}()
	}
	if refused > 0 {
		t.Errorf("%d loop bodies: w.Pool().Submit inside p.ParallelFor returned ErrClosed (pool closed by the collector while ParallelFor runs)", refused)
	}
}

// A Node (or a Future) keeps its pool open: the cleanup for a dropped
// Pool does not close it while a kept Node is still used.
func TestHardNodeKeepsPoolOpen(t *testing.T) {
	n := func() Node {
		p := newTestPool(t, WithWorkers(2))
		return p.Node(p.Nodes()[0])
	}()
	for range 3 {
		runtime.GC()
	}
	done := make(chan struct{})
	if err := n.Submit(context.Background(), func(*Worker) { close(done) }); err != nil {
		t.Fatalf("Node.Submit after a GC: %v (the pool was closed as dropped while its Node is kept)", err)
	}
	within(t, hangBound, "the task", func() { <-done })
	within(t, hangBound, "Close", func() { _ = n.p.Close() })
}
