package pool

// Misuse at the public entries. A nil *Pool, a Pool not made by New, a
// zero Node (not made by Pool.Node), a nil Target or a nil *Worker is a
// programmer's mistake: each public entry that takes one checks it first
// and panics with a message that starts with "pool: " and names the call,
// instead of failing with a nil dereference deep inside the pool (the
// package documentation, Errors and misuse). The checks are a comparison
// each and inline; the panic's message is built only when it panics.
// Test: TestNilReceiversAndArgumentsPanicWithAPoolMessage.

// mustPool panics unless p is a pool made by New.
func mustPool(p *Pool, call string) {
	if p == nil || p.sched == nil {
		misuse(call, "a nil *Pool or a Pool not made by New")
	}
}

// mustNode panics unless n was made by Pool.Node.
func mustNode(n Node, call string) {
	if n.p == nil || n.p.sched == nil {
		misuse(call, "a zero Node (make one with p.Node(id))")
	}
}

// mustWorker panics if w is nil.
func mustWorker(w *Worker, call string) {
	if w == nil {
		misuse(call, "a nil *Worker (use the one the task was passed)")
	}
}

// mustTarget panics unless on is a *Pool made by New, a Node made by
// Pool.Node or a *Worker that is not nil.
func mustTarget(on Target, call string) {
	switch t := on.(type) {
	case nil:
		misuse(call, "a nil Target")
	case *Pool:
		mustPool(t, call)
	case Node:
		mustNode(t, call)
	case *Worker:
		mustWorker(t, call)
	}
}

// misuse panics with the pool's message for call made on what.
//
//go:noinline
func misuse(call, what string) {
	panic("pool: " + call + " on " + what)
}
