package pool

import (
	"context"
	"reflect"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Profiler labels. A worker is a long-lived goroutine, and Go copies a
// goroutine's pprof labels only to the goroutines it starts, so the
// labels of whoever submitted a task reach the task only if the worker
// sets them. Each worker runs with labels of its own (numapool.node,
// numapool.worker), set once when its goroutine starts, so that the
// labels of the goroutine that called New (which a goroutine started in
// New would inherit) never reach its tasks. A task that carries a label
// set (labelSet) runs under that set merged with the worker's. The worker
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

// Label keys the pool sets on every task.
const (
	labelNode   = "numapool.node"
	labelWorker = "numapool.worker"
)

// maxLabelSets bounds the label sets a pool interns: sets beyond it (a
// label per request, say) are not kept, and their tasks merge labels
// each time they start, an allocation per task.
const maxLabelSets = 4096

// observing is what a worker keeps for observing (owner only): the
// label set its goroutine runs under now (nil: the worker's own alone),
// its own labels, and the histograms of sampled tasks (histogram.go).
type observing struct {
	labels    *labelSet
	ownLabels context.Context
	lat       latencies
	pubLat    publishedLatencies
}

// labelSet is one set of pprof labels that tasks run under, beside the
// worker's own. merged holds, per worker ID, the set merged with that
// worker's labels, as the context SetGoroutineLabels takes; only that
// worker reads or writes its entry. A set not interned (merged nil) is
// merged each time.
type labelSet struct {
	pairs  []string // key, value, ...; as pprof.ForLabels gives them (sorted by key)
	merged []context.Context
}

// labelCache interns a pool's label sets. last is the context the last
// submission with labels came with and its set: submissions in a row
// under the same context (a loop of Submit inside one pprof.Do) find
// their set without walking the context.
type labelCache struct {
	last atomic.Pointer[ctxLabels]
	mu   sync.Mutex
	sets map[string]*labelSet
}

// The dynamic types of context.Background and context.TODO.
var (
	backgroundType = reflect.TypeOf(context.Background())
	todoType       = reflect.TypeOf(context.TODO())
)

type ctxLabels struct {
	ctx context.Context
	set *labelSet
}

// labelsOf returns the label set of ctx for tasks of the pool, or nil if
// it has no pprof labels.
func (p *sched) labelsOf(ctx context.Context) *labelSet {
	// Most submissions pass context.Background, which holds no labels: its
	// dynamic type says so at the cost of a load and a comparison (an
	// interface comparison with Background would call the runtime, and a
	// Value lookup is an indirect call).
	if ctx == nil {
		return nil
	}
	if t := reflect.TypeOf(ctx); t == backgroundType || t == todoType {
		return nil
	}
	labelled := false
	pprof.ForLabels(ctx, func(string, string) bool { labelled = true; return false })
	if !labelled {
		return nil
	}
	if l := p.labels.last.Load(); l != nil && l.ctx == ctx {
		return l.set
	}
	var pairs []string
	pprof.ForLabels(ctx, func(k, v string) bool {
		pairs = append(pairs, k, v)
		return true
	})
	if len(pairs) == 0 {
		return nil
	}
	set := p.labels.intern(pairs, len(p.workers))
	p.labels.last.Store(&ctxLabels{ctx: ctx, set: set})
	return set
}

// intern returns the pool's set equal to pairs, made if new.
func (c *labelCache) intern(pairs []string, workers int) *labelSet {
	key := strings.Join(pairs, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sets[key]; ok {
		return s
	}
	s := &labelSet{pairs: pairs}
	if len(c.sets) < maxLabelSets {
		if c.sets == nil {
			c.sets = make(map[string]*labelSet)
		}
		s.merged = make([]context.Context, workers)
		c.sets[key] = s
	}
	return s
}

// labelsFor is the context w's goroutine runs under for s: s merged with
// w's own labels (nil s: w's own alone). The worker's keys win over a
// set's equal keys.
func (w *Worker) labelsFor(s *labelSet) context.Context {
	if s == nil {
		return w.obs.ownLabels
	}
	if s.merged != nil && w.id < len(s.merged) {
		if ctx := s.merged[w.id]; ctx != nil {
			return ctx
		}
	}
	ctx := pprof.WithLabels(context.Background(), pprof.Labels(s.pairs...))
	ctx = pprof.WithLabels(ctx, pprof.Labels(labelNode, w.nodeLabel(), labelWorker, strconv.Itoa(w.id)))
	if s.merged != nil && w.id < len(s.merged) {
		s.merged[w.id] = ctx
	}
	return ctx
}

// nodeLabel is the value of the worker's numapool.node label: its node's
// OS ID.
func (w *Worker) nodeLabel() string { return strconv.Itoa(w.domain.node.ID) }

// startLabels gives the worker's goroutine its own labels, dropping
// whatever it inherited from the goroutine that started it.
func (w *Worker) startLabels() {
	if w.obs.ownLabels == nil {
		w.obs.ownLabels = pprof.WithLabels(context.Background(),
			pprof.Labels(labelNode, w.nodeLabel(), labelWorker, strconv.Itoa(w.id)))
	}
	w.obs.labels = nil
	pprof.SetGoroutineLabels(w.obs.ownLabels)
}

// runUnder makes s the labels w's goroutine runs under.
func (w *Worker) runUnder(s *labelSet) {
	if s != w.obs.labels {
		w.obs.labels = s
		pprof.SetGoroutineLabels(w.labelsFor(s))
	}
}

// inherit gives t, made by the task running on w, that task's label set
// if it has none of its own.
func (w *Worker) inherit(t *task) {
	if w.obs.labels != nil && t.labels == nil {
		t.labels = w.obs.labels
	}
}
