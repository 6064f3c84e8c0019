package pool

import "time"

// The soft-placement patience rule. A task submitted to a node without
// Strict (Node.Submit, Async or Run on a Node) prefers that node:
// its data is likely there. It is queued in the node's inject shard,
// which other nodes' workers take from once they run dry, and they did
// whenever the node fell behind for a moment: a worker held off its CPU
// for a few milliseconds (by a submitter goroutine that shares it, or the
// Go scheduler's or the kernel's time slice) lets its node's tasks queue
// up while the other nodes are dry, and moving them gives up the locality
// asked for to make up a lag the node makes up by itself
// (TestSoftLocalityOutsideSubmitter counts such tasks; a node of one
// worker lags whenever that worker is held off its CPU).
//
// So a worker that gets a task preferring another node runs it only if
// that node lags: none of its workers ran a stretch of tasks (tune) or
// woke for work within softPatience (domain.busyAt), or it has more queued
// than its workers run in softBacklog (ahead: a backlog, which idle nodes
// help with). Otherwise it sends the task home and keeps off the node
// (keepOff) until the node would have been quiet for softPatience, or for
// softLookEvery if that is sooner. A worker that parks while it keeps off
// a node leaves that node's queues out of its last look (wakeForPending:
// it wakes one of the node's own sleepers for its shard's work instead)
// and wakes by itself when the first keep-off that look saw ends
// (Worker.sleep), so a node that stops keeping up gets help within
// softPatience. Loop pieces have the same rule by their age (parallel.go).
//
// softPatience is about the Go scheduler's time slice (a goroutine is
// preempted after 10ms): a node whose workers lost their CPUs to a time
// slice makes the lag up within about that long. A shorter patience moves
// tasks for lags the node makes up by itself; a longer one leaves a
// stalled node without help for longer. (numa_test's stream measures the
// share of tasks moved.)
//
// softBacklog is twice that: what still moves at softPatience is the tail
// of a node that lagged (a submitter's CPU time came out of its workers),
// which twice the patience keeps at home, while a real backlog, many
// times the bound, is still shared with the idle nodes.
//
// Tests: TestSoftTaskWaitsForItsBusyNode (a node that keeps up keeps its
// tasks; a backlog and a stalled node get help),
// TestSoftTaskForABlockedNodeRuns (the keep-off's wake-up is never lost),
// and TestSoftLocalityOutsideSubmitter in numa_test.
const softPatience = 10 * time.Millisecond

// softBacklog is how much queued work makes a node that keeps up lag.
const softBacklog = 2 * softPatience

// softLookEvery bounds a keep-off for soft tasks: a worker looks at a node
// that keeps up at least this often.
const softLookEvery = softPatience / 4

// sendsHome sends t home instead of running it here, and reports whether
// it did: a task that must run on another domain (a strict home) always,
// and one that prefers another domain if that domain keeps up,
// keeping w off the domain meanwhile.
func (w *Worker) sendsHome(t *task) bool {
	d := w.pool.domains[t.home.domain()]
	if d == w.domain {
		return false
	}
	if t.home.strict() {
		w.sendHome(d, t, false)
		return true
	}
	now := time.Now()
	quiet := time.Duration(w.pool.clock(now) - d.busyAt.Load())
	if quiet >= softPatience {
		return false // the node lags: help it
	}
	if d.ahead() >= softBacklog {
		return false // a backlog: help it
	}
	w.sendHome(d, t, false)
	// Look again when the node may have been quiet for the patience, or
	// sooner: its backlog may outgrow it (more work, or its tasks turn out
	// longer than the last mean said).
	w.seek.keepOff.hold(d.index, len(w.pool.domains), now.Add(min(softPatience-quiet, softLookEvery)))
	return true
}

// ahead estimates how long d's workers need for the tasks queued in d:
// its inject shard and their run queues, at the mean time of the tasks
// one of them ran last.
func (d *domain) ahead() time.Duration {
	queued := d.inject.Len()
	for _, o := range d.workers {
		queued += o.stealer.Len()
	}
	return time.Duration(int64(queued) * d.taskNanos.Load() / int64(len(d.workers)))
}
