package pool

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A nil or zero Pool, Node, Target or Worker at a public entry is
// misuse: each call panics with a pool: message that names the call,
// not with a nil dereference deep inside the pool.
func TestNilReceiversAndArgumentsPanicWithAPoolMessage(t *testing.T) {
	var nilPool *Pool
	zeroPool := &Pool{}
	var nilWorker *Worker
	ctx := context.Background()
	task := func(*Worker) {}
	fn := func(*Worker) (int, error) { return 1, nil }
	mapper := func(_ *Worker, lo, hi int) (int, error) { return hi - lo, nil }
	add := func(a, b int) int { return a + b }
	body := func(_ *Worker, lo, hi int) error { return nil }
	var calls []struct {
		name string
		call func()
	}
	add2 := func(name string, call func()) {
		calls = append(calls, struct {
			name string
			call func()
		}{name, call})
	}
	for _, pc := range []struct {
		name string
		p    *Pool
	}{{"nil *Pool", nilPool}, {"zero Pool", zeroPool}} {
		p := pc.p
		add2(pc.name+".Submit", func() { _ = p.Submit(ctx, task) })
		add2(pc.name+".TrySubmit", func() { _ = p.TrySubmit(task) })
		add2(pc.name+".Node", func() { _ = p.Node(0) })
		add2(pc.name+".ParallelFor", func() { _ = p.ParallelFor(ctx, 10, 1, body) })
		add2(pc.name+".Split", func() { _ = p.Split(10) })
		add2(pc.name+".Close", func() { _ = p.Close() })
		add2(pc.name+".Shutdown", func() { _, _ = p.Shutdown(ctx) })
		add2(pc.name+".Workers", func() { _ = p.Workers() })
		add2(pc.name+".Nodes", func() { _ = p.Nodes() })
		add2("MapReduce on "+pc.name, func() { _, _ = MapReduce(ctx, p, 10, 1, mapper, add) })
		add2("NewPerWorker of "+pc.name, func() { _ = NewPerWorker[int](p, nil) })
		add2("Run on "+pc.name, func() { _, _ = Run[int](p, fn) })
		add2("Async on "+pc.name, func() { _ = Async[int](p, fn) })
	}
	add2("Run on a nil Target", func() { _, _ = Run[int](nil, fn) })
	add2("Async on a nil Target", func() { _ = Async[int](nil, fn) })
	add2("Run on a nil *Worker", func() { _, _ = Run[int](nilWorker, fn) })
	add2("Run on a zero Node", func() { _, _ = Run[int](Node{}, fn) })
	add2("Async on a zero Node", func() { _ = Async[int](Node{}, fn) })
	add2("zero Node.Submit", func() { _ = Node{}.Submit(ctx, task) })
	add2("zero Node.TrySubmit", func() { _ = Node{}.TrySubmit(task) })
	add2("AllocOnNode of a zero Node", func() { _, _, _ = AllocOnNode[int](Node{}, 10) })
	add2("nil Worker.Spawn", func() { nilWorker.Spawn(task) })
	add2("SpawnWith on a nil Worker", func() { SpawnWith(nilWorker, func(*Worker, int) {}, 1) })
	add2("nil Worker.Join", func() { _ = nilWorker.Join(task, task) })
	add2("Fork on a nil Worker", func() {
		_, _, _ = Fork(nilWorker, func(*Worker, int) int { return 0 }, 1, func(*Worker, int) int { return 0 }, 1)
	})
	for _, c := range calls {
		r := recovered(c.call)
		msg := fmt.Sprint(r)
		if err, ok := r.(error); ok {
			msg = err.Error()
		}
		if r == nil || !strings.HasPrefix(msg, "pool: ") {
			t.Errorf("%s panicked with %q, want a message starting with \"pool: \"", c.name, msg)
		}
	}
}
