package pool

import (
	"context"
	"runtime/pprof"

	"github.com/numapool/numapool/pool/internal/observe"
)

// Profiler labels. A worker is a long-lived goroutine, and Go copies a
// goroutine's pprof labels only to the goroutines it starts, so the
// labels of whoever submitted a task reach the task only if the worker
// sets them. Each worker runs with labels of its own (numapool.node,
// numapool.worker), set once when its goroutine starts, so that the
// labels of the goroutine that called New (which a goroutine started in
// New would inherit) never reach its tasks. A task that carries a label
// set (observe.Set) runs under that set merged with the worker's. The worker
// sets a task's labels as it starts the task, only if they differ from
// those it runs under (Worker.labels), and leaves them set after: the
// next task, which often has the same, then sets nothing. So while a task
// runs, Worker.labels is that task's set. Two places put labels back: a
// task that waits inside (runUntil) gets its own back when its wait ends,
// since the tasks it ran meanwhile may have set others; and a worker that
// runs out of work goes back to the labels of the task it waits in (its
// own labels in the idle loop), so that neither its search nor its spin is
// counted to the last task's job.
//
// Who carries a label set: a submission whose context has labels (Submit,
// a Node's Submit, Group, ParallelFor, MapReduce) reads them once, when
// it is made, and each of its tasks carries the set; a task made inside
// a task without a context of its own (Spawn, Group.Go, Async, a loop's
// pieces) carries the set of the task that made it. A plain task queued
// as its function carries none, so a submission with labels is queued as
// its record (task.labels).
//
// Cost: setting a goroutine's labels is a pointer store, but reading them
// from a context walks its chain, and merging two sets allocates; so the
// walk is done once per submission (and skipped for a context that cannot
// hold labels), equal sets are interned per pool, and each interned set
// keeps its merged context per worker. A task whose set is the one its
// worker already runs under, the common case, sets nothing.

// observing is what a worker keeps for observing (owner only): the
// label set its goroutine runs under now (nil: the worker's own alone),
// its own labels, and the histograms of sampled tasks (histogram.go).
type observing struct {
	labels    *observe.Set
	ownLabels context.Context
	lat       observe.Latencies
	pubLat    observe.PublishedLatencies
}

// labelsOf returns the label set of ctx for tasks of the pool, or nil if
// it has no pprof labels.
func (p *sched) labelsOf(ctx context.Context) *observe.Set { return p.labels.Of(ctx, len(p.workers)) }

// labelsFor is the context w's goroutine runs under for s: s merged with
// w's own labels (nil s: w's own alone).
func (w *Worker) labelsFor(s *observe.Set) context.Context {
	return s.For(w.domain.node.ID, w.id, w.obs.ownLabels)
}

// startLabels gives the worker's goroutine its own labels, dropping
// whatever it inherited from the goroutine that started it.
func (w *Worker) startLabels() {
	if w.obs.ownLabels == nil {
		w.obs.ownLabels = observe.Own(w.domain.node.ID, w.id)
	}
	w.obs.labels = nil
	pprof.SetGoroutineLabels(w.obs.ownLabels)
}

// runUnder makes s the labels w's goroutine runs under.
func (w *Worker) runUnder(s *observe.Set) {
	if s != w.obs.labels {
		w.obs.labels = s
		if s == &callerLabels {
			if w.out.ctx != nil { // a loop's caller; a Run's never changes its labels (join.go)
				pprof.SetGoroutineLabels(w.out.ctx)
			}
			return
		}
		pprof.SetGoroutineLabels(w.labelsFor(s))
	}
}

// madeLabels is the label set of a task made now by the task running on
// w: the set w runs under; none under a caller's own labels, which only
// its context (a loop's, a Group's) can give a task.
func (w *Worker) madeLabels() *observe.Set {
	if l := w.obs.labels; l != &callerLabels {
		return l
	}
	return nil
}

// callerLabels stands, in Worker.labels, for the labels a caller from
// outside on the worker's seat runs under (join.go): those of the call's
// context. No task carries it.
var callerLabels observe.Set

// inherit gives t, made by the task running on w, that task's label set
// if it has none of its own.
func (w *Worker) inherit(t *task) {
	if t.labels == nil {
		t.labels = w.madeLabels()
	}
}
