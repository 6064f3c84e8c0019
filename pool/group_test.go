package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Calls of Go from outside the pool that race Close: a function the pool
// refused never runs; one it accepted runs once, or is skipped because a
// refusal failed the group first, but is never left behind; and Wait
// returns. A turn that ran a function whose push was still under way ran
// a function that was then refused, and left an accepted one in the fifo
// with no turn to run it.
func TestGroupGoRacingClose(t *testing.T) {
	rounds := 600
	if testing.Short() {
		rounds = 50
	}
	const callers, calls = 4, 4
	var sawRefused, sawAccepted bool
	for round := range rounds {
		p := newTestPool(t, WithWorkers(2))
		g := p.Group(context.Background())
		var ran [callers * calls]atomic.Int32
		var refused [callers * calls]atomic.Bool
		var err error
		within(t, hangBound, fmt.Sprintf("round %d: Go, Close and Wait", round), func() {
			start := make(chan struct{})
			var began atomic.Int32 // calls begun
			var wg sync.WaitGroup
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for k := range calls {
						i := c*calls + k
						began.Add(1)
						// start is Go's queueing, which also says whether the
						// pool refused the function.
						if err := g.start(nil, func(*Worker) error { ran[i].Add(1); return nil }); err != nil {
							if !errors.Is(err, ErrClosed) {
								t.Errorf("round %d: function %d refused with %v, want ErrClosed", round, i, err)
							}
							refused[i].Store(true)
						}
					}
				}()
			}
			// Close once some of the calls have begun, a different number
			// each round, so that it meets calls in every stage.
			closeAfter := int32(round % (callers * calls))
			closed := make(chan error, 1)
			go func() {
				<-start
				for began.Load() < closeAfter {
					runtime.Gosched()
				}
				closed <- p.Close()
			}()
			close(start)
			wg.Wait()
			if err := <-closed; err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
			err = g.Wait()
		})
		nRefused := 0
		for i := range ran {
			if refused[i].Load() {
				nRefused++
			}
		}
		for i := range ran {
			n, r := ran[i].Load(), refused[i].Load()
			switch {
			case r && n != 0:
				t.Errorf("round %d: function %d was refused and ran %d times", round, i, n)
			case !r && n > 1:
				t.Errorf("round %d: function %d was accepted and ran %d times", round, i, n)
			case !r && n == 0 && nRefused == 0:
				t.Errorf("round %d: function %d was accepted and never ran, with nothing refused to fail the group", round, i)
			}
		}
		g.mu.Lock()
		left := len(g.fifo) - g.first
		g.mu.Unlock()
		if left != 0 {
			t.Errorf("round %d: Wait returned with %d functions in the group's fifo, which no turn will take", round, left)
		}
		if nRefused > 0 && !errors.Is(err, ErrClosed) {
			t.Errorf("round %d: %d functions refused, and Wait = %v; want ErrClosed", round, nRefused, err)
		}
		if nRefused == 0 && err != nil {
			t.Errorf("round %d: nothing refused, and Wait = %v", round, err)
		}
		if ab := p.Stats().Abandoned; ab != 0 {
			t.Errorf("round %d: Close abandoned %d tasks", round, ab)
		}
		sawRefused = sawRefused || nRefused > 0
		sawAccepted = sawAccepted || nRefused < len(ran)
		if t.Failed() {
			return
		}
	}
	if !sawRefused || !sawAccepted {
		t.Errorf("refusals seen: %v, acceptances seen: %v; the calls never raced Close", sawRefused, sawAccepted)
	}
}
