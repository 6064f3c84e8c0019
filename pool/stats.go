package pool

import (
	"sync/atomic"
)

// Counters are a worker's (or a node's, or the pool's) event counts.
type Counters struct {
	TasksRun             uint64 // tasks run
	Spawned              uint64 // tasks spawned from inside tasks (Worker.Spawn)
	LIFOHits             uint64 // tasks taken from the LIFO slot
	InjectPulls          uint64 // takes from the worker's own node's shards (a batch, or one pinned task)
	StealsInNode         uint64 // successful steals from workers of the same node
	StealsCrossNode      uint64 // successful steals from other nodes (workers or shards)
	TasksStolenInNode    uint64 // tasks moved by in-node steals
	TasksStolenCrossNode uint64 // tasks moved by cross-node steals
	Parks                uint64 // times the worker slept
	Overflows            uint64 // full run queues that moved half to the shard
	SentHome             uint64 // tasks that must run on another node, sent back there
}

const nCounters = 11

func (c *Counters) fields() [nCounters]*uint64 {
	return [nCounters]*uint64{&c.TasksRun, &c.Spawned, &c.LIFOHits, &c.InjectPulls, &c.StealsInNode,
		&c.StealsCrossNode, &c.TasksStolenInNode, &c.TasksStolenCrossNode, &c.Parks, &c.Overflows, &c.SentHome}
}

// Sub returns c minus o, field by field: the counts between two Stats.
func (c Counters) Sub(o Counters) Counters {
	a, b := c.fields(), o.fields()
	for i := range a {
		*a[i] -= *b[i]
	}
	return c
}

func (c *Counters) add(o Counters) {
	a, b := c.fields(), o.fields()
	for i := range a {
		*a[i] += *b[i]
	}
}

// published is the copy of a worker's counters that Stats reads. The
// owner counts in plain fields and copies them here every publishEvery
// tasks and whenever it parks or ends, so counting costs the hot path no
// atomic operation; Stats may lag a running worker by up to publishEvery
// tasks.
type published struct {
	_ [64]byte
	v [nCounters]atomic.Uint64
	_ [64]byte
}

func (w *Worker) publish() {
	for i, v := range w.c.fields() {
		w.pub.v[i].Store(*v)
	}
}

func (w *Worker) snapshot() Counters {
	var c Counters
	for i, f := range c.fields() {
		*f = w.pub.v[i].Load()
	}
	return c
}

// WorkerStats are one worker's counters and placement.
type WorkerStats struct {
	Worker int    `json:"worker"`
	Node   int    `json:"node"`
	CPU    int    `json:"cpu"`
	Bound  string `json:"bound_cpus"` // OS CPUs the thread is bound to; "" when unbound
	Counters
}

// NodeStats are the sums over one node's workers, and its queue.
type NodeStats struct {
	Node    int `json:"node"`
	Workers int `json:"workers"`
	Queued  int `json:"queued"` // tasks in the node's shards now
	Counters
}

// Stats are the pool's counters per worker, per node and in total. They
// are JSON-encodable.
type Stats struct {
	Workers []WorkerStats `json:"workers"`
	Nodes   []NodeStats   `json:"nodes"`
	Total   Counters      `json:"total"`
	// Abandoned counts tasks dropped by Shutdown at its deadline.
	Abandoned uint64 `json:"abandoned"`
}

// Stats returns the counters. Running workers publish theirs every 64
// tasks and when they park, so a busy worker's figures may lag slightly;
// after Close they are exact.
func (p *Pool) Stats() Stats {
	st := Stats{Abandoned: uint64(p.abandoned.Load())}
	for _, g := range p.groups {
		ns := NodeStats{Node: g.node.ID, Workers: len(g.workers), Queued: g.queued()}
		for _, w := range g.workers {
			c := w.snapshot()
			ws := WorkerStats{Worker: w.id, Node: g.node.ID, CPU: w.cpu, Bound: w.bound.String(), Counters: c}
			st.Workers = append(st.Workers, ws)
			ns.add(c)
		}
		st.Nodes = append(st.Nodes, ns)
		st.Total.add(ns.Counters)
	}
	return st
}
