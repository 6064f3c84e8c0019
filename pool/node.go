package pool

import "context"

// Node is one NUMA node of a pool as a place to send work: p.Node(id).
// It has the pool's submission methods, and is a Target for Async and
// Run.
//
// The preference is soft by default: the task is queued in the node's
// shard and runs on the node's workers; another node's idle workers take
// it only when the node lags: none of its workers has made progress for
// 10ms, or it has more queued than its workers run in 20ms (soft.go).
// Strict() keeps it on the node: it waits in the node's pinned shard,
// which other nodes' workers do not read.
//
// A Node for an ID the pool has no worker group for returns an error
// wrapping ErrUnknownNode, which names the pool's nodes, from every
// method that sends work.
// A Node is a small value; make one per call or keep it.
type Node struct {
	p      *Pool  // held, so that a kept Node keeps its pool open
	g      *group // nil for an unknown node
	strict bool
	err    error
}

// Node returns the node with the given OS ID. Worker has no Node method
// (Worker.Node is the worker's own node ID): from inside a task use
// w.Pool().Node(id).
func (p *Pool) Node(id int) Node {
	g, err := p.groupOf(id)
	return Node{p: p, g: g, err: err}
}

// Strict returns the node with the preference made hard: work sent to it
// runs only on its workers. It holds for the task sent, not for what that
// task starts: a Spawn or Group.Go it makes may be stolen by another
// node's idle workers like any other (a loop's pieces stay on their
// nodes unless WithCrossNodeLoops).
func (n Node) Strict() Node {
	n.strict = true
	return n
}

// ID returns the node's OS ID (-1 for the group of CPUs on no node).
func (n Node) ID() int {
	if n.g == nil {
		return -1
	}
	return n.g.node.ID
}

// Submit queues fn on the node, as Pool.Submit does on the pool: with
// WithShardBound it waits while the node's queue is full, until ctx is
// done, and it returns ErrClosed once intake has closed. From one of the
// pool's tasks fn goes to the node's shard past the bound.
func (n Node) Submit(ctx context.Context, fn func(*Worker)) error {
	return n.submit(ctx, fn, true)
}

// TrySubmit is Submit that returns ErrFull instead of waiting for room.
func (n Node) TrySubmit(fn func(*Worker)) error {
	return n.submit(context.Background(), fn, false)
}

func (n Node) submit(ctx context.Context, fn func(*Worker), wait bool) error {
	if fn == nil {
		panic("pool: Node.Submit of a nil function")
	}
	if n.err != nil {
		return n.err
	}
	return n.p.submit(ctx, n.g, fn, n.home(), wait)
}

// home is the task's home for the node: its group if strict, else a
// preference for it when the pool has other nodes.
func (n Node) home() int32 {
	if n.strict {
		return int32(n.g.index)
	}
	if len(n.p.groups) > 1 {
		return preferHome(n.g.index)
	}
	return noHome
}
