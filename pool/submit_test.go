package pool

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestNodeSubmitForms(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	nodes := p.Nodes()
	var wrong, ran atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for i := range 400 {
		id := nodes[i%2]
		n := p.Node(id)
		if n.ID() != id || n.err != nil {
			t.Fatalf("Node(%d): ID %d, err %v", id, n.ID(), n.err)
		}
		strict := i%4 >= 2
		if strict {
			n = n.Strict()
		}
		fn := func(w *Worker) {
			defer wg.Done()
			ran.Add(1)
			if strict && w.Node() != id {
				wrong.Add(1)
			}
		}
		wg.Add(1)
		var err error
		switch i % 5 {
		case 0:
			err = n.Submit(context.Background(), fn)
		case 1:
			err = n.TrySubmit(fn)
		case 2:
			err = n.Submit(ctx, fn)
		case 3:
			if strict {
				err = p.Node(id).Strict().Submit(context.Background(), fn)
			} else {
				err = p.Node(id).Submit(context.Background(), fn)
			}
		default:
			err = n.Submit(context.Background(), fn)
		}
		if err != nil {
			wg.Done()
			t.Errorf("submission %d: %v", i, err)
		}
	}
	within(t, hangBound, "node submissions", wg.Wait)
	if ran.Load() != 400 || wrong.Load() != 0 {
		t.Errorf("%d of 400 ran; %d strict tasks ran off their node", ran.Load(), wrong.Load())
	}
}

func TestNodeUnknown(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	fn := func(*Worker) { t.Error("a task for an unknown node ran") }
	ctx := context.Background()
	for _, n := range []Node{p.Node(42), p.Node(42).Strict()} {
		if n.ID() != -1 {
			t.Errorf("Node(42): ID %d, want -1", n.ID())
		}
		for name, err := range map[string]error{
			"Submit":    n.Submit(context.Background(), fn),
			"TrySubmit": n.TrySubmit(fn),
			"SubmitCtx": n.Submit(ctx, fn),
		} {
			if !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
				t.Errorf("Node(42).%s = %v, want ErrUnknownNode naming node 42", name, err)
			}
		}
	}
	for name, err := range map[string]error{
		"SubmitTo":       p.Node(42).Submit(context.Background(), fn),
		"SubmitToStrict": p.Node(42).Strict().Submit(context.Background(), fn),
	} {
		if !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
			t.Errorf("%s(42) = %v, want ErrUnknownNode naming node 42", name, err)
		}
	}
}

// A node's bound is its own: with node 0's worker held and its queue
// full, TrySubmit returns ErrFull, SubmitCtx returns ctx's error, soft or
// strict; node 1 still takes work.
func TestNodeFull(t *testing.T) {
	const bound = 4
	p := newTestPool(t, WithSpec("2x1"), WithShardBound(bound))
	nodes := p.Nodes()
	n0 := p.Node(nodes[0])
	hold := make(chan struct{})
	started := make(chan struct{})
	if err := n0.Strict().Submit(context.Background(), func(*Worker) { close(started); <-hold }); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, hangBound, "the holding task")
	var ran atomic.Int64
	for i := range bound {
		if err := n0.Strict().TrySubmit(func(*Worker) { ran.Add(1) }); err != nil {
			t.Fatalf("filling node %d: TrySubmit %d = %v", nodes[0], i, err)
		}
	}
	for name, n := range map[string]Node{"soft": n0, "strict": n0.Strict()} {
		if err := n.TrySubmit(func(*Worker) {}); !errors.Is(err, ErrFull) {
			t.Errorf("%s TrySubmit on a full node = %v, want ErrFull", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		within(t, hangBound, "SubmitCtx on a full node", func() {
			if err := n.Submit(ctx, func(*Worker) {}); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s SubmitCtx on a full node = %v, want context.DeadlineExceeded", name, err)
			}
		})
		cancel()
		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		if err := n.Submit(cctx, func(*Worker) {}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s SubmitCtx(cancelled) on a full node = %v, want context.Canceled", name, err)
		}
	}
	// The other node is not full.
	done := make(chan struct{})
	if err := p.Node(nodes[1]).Strict().TrySubmit(func(*Worker) { close(done) }); err != nil {
		t.Errorf("TrySubmit on node %d while node %d is full = %v", nodes[1], nodes[0], err)
	} else {
		waitClosed(t, done, hangBound, "the other node's task")
	}
	close(hold)
	within(t, hangBound, "Submit waiting for room", func() {
		if err := n0.Submit(context.Background(), func(*Worker) { ran.Add(1) }); err != nil {
			t.Errorf("Submit after room = %v", err)
		}
	})
	within(t, hangBound, "Close", func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	if ran.Load() != bound+1 {
		t.Errorf("%d of %d queued tasks ran", ran.Load(), bound+1)
	}
}
