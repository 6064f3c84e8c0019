package pool

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// stuckSoon makes a pool's stuck watch look often and call a node stuck
// after d, writing its warning to out.
func stuckSoon(d time.Duration, out *syncBuffer) Option {
	return optionFunc(func(c *config) error {
		c.stuckAfter, c.stuckOut = d, out
		c.watch, c.watchSet = 10*time.Millisecond, true
		return nil
	})
}

// syncBuffer is a bytes.Buffer the monitor writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The new user: a task that submits work and waits for it on a
// sync.WaitGroup, unmarked, on a pool of one worker, hangs. The pool says
// so: Stats marks the node stuck, names the worker and the function its
// task waits in, Explain has a line, and one warning goes out. Once the
// wait is released the node is no longer stuck.
func TestStuckPoolSaysSo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs the threads' states from /proc")
	}
	var out syncBuffer
	p := newTestPool(t, WithSpec("1x1"), stuckSoon(100*time.Millisecond, &out))
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	mustSubmit(t, p, func(w *Worker) { waitUnmarked(release) })
	mustSubmit(t, p, func(*Worker) { wg.Done() }) // queued behind the stuck task
	var st Stats
	if !eventually(hangBound, func() bool { st = p.Stats(); return st.Nodes[0].Stuck }) {
		t.Fatalf("the node was not found stuck: %+v", st.Nodes[0])
	}
	w := st.Workers[0]
	if w.BlockedFor < 100*time.Millisecond || !strings.Contains(w.BlockedIn, "waitUnmarked") {
		t.Errorf("worker 0 blocked for %v in %q; want at least 100ms in waitUnmarked", w.BlockedFor, w.BlockedIn)
	}
	if ex := p.Explain(); !strings.Contains(ex, "stuck: node") || !strings.Contains(ex, "waitUnmarked") {
		t.Errorf("Explain has no stuck line naming the function:\n%s", ex)
	}
	time.Sleep(100 * time.Millisecond) // more looks: still one warning
	if s := out.String(); strings.Count(s, "numapool: node") != 1 || !strings.Contains(s, "waitUnmarked") || !strings.Contains(s, "Worker.Block") {
		t.Errorf("the warning, once, naming the function and the way out; got %q", s)
	}
	close(release)
	within(t, hangBound, "the queued task", wg.Wait)
	if !eventually(hangBound, func() bool { return !p.Stats().Nodes[0].Stuck }) {
		t.Error("the node is still marked stuck after the wait was released")
	}

	// A Close waiting for a stuck node is told about too.
	release = make(chan struct{})
	mustSubmit(t, p, func(w *Worker) { waitUnmarked(release) })
	mustSubmit(t, p, func(*Worker) {})
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	if !eventually(hangBound, func() bool { return p.Stats().Nodes[0].Stuck }) {
		t.Error("a closing pool's stuck node was not reported")
	}
	close(release)
	within(t, hangBound, "Close", func() {
		if err := <-closed; err != nil {
			t.Error(err)
		}
	})
}

//go:noinline
func waitUnmarked(release chan struct{}) { <-release }

// A task that computes for longer than the stuck watch waits, with work
// queued behind it, is not stuck; nor is a node whose blocked task is
// marked (a spare runs the queued work); nor is one whose warning is
// turned off silent in Stats.
func TestStuckWatchLeavesComputeAndBlockAlone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs the threads' states from /proc")
	}
	var out syncBuffer
	p := newTestPool(t, WithSpec("1x1"), stuckSoon(50*time.Millisecond, &out), WithStuckWarning(false))
	defer p.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	mustSubmit(t, p, func(*Worker) { defer wg.Done(); spinFor(400 * time.Millisecond) })
	mustSubmit(t, p, func(*Worker) { wg.Done() })
	stuck := false
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		stuck = stuck || p.Stats().Nodes[0].Stuck
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	if stuck {
		t.Error("a task computing for 400ms was reported stuck")
	}
	release := make(chan struct{})
	wg.Add(2)
	mustSubmit(t, p, func(w *Worker) { defer wg.Done(); w.Block(func() { <-release }) })
	mustSubmit(t, p, func(*Worker) { wg.Done() })
	time.Sleep(200 * time.Millisecond)
	if p.Stats().Nodes[0].Stuck {
		t.Error("a node whose task is blocked in Block was reported stuck")
	}
	close(release)
	wg.Wait()
	release = make(chan struct{})
	wg.Add(2)
	mustSubmit(t, p, func(*Worker) { defer wg.Done(); <-release })
	mustSubmit(t, p, func(*Worker) { wg.Done() })
	if !eventually(hangBound, func() bool { return p.Stats().Nodes[0].Stuck }) {
		t.Error("an unmarked wait with work queued was not reported stuck")
	}
	close(release)
	wg.Wait()
	if s := out.String(); s != "" {
		t.Errorf("WithStuckWarning(false) wrote %q", s)
	}
}
