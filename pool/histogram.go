package pool

import (
	"time"

	"github.com/numapool/numapool/pool/internal/observe"
)

// Queue wait and run time. A task queued as its function has no record
// to hold the time it was submitted, and reading the clock for every task
// would cost the hot paths more than the task itself for small tasks; so
// about one submission in sampleEvery is stamped: it is queued as its
// record with its submit time (task.at), and the worker that starts it
// reads the clock when it starts and when it returns. From a task the
// sample is every sampleEvery-th task the worker makes; from outside the
// pool about one in sampleEvery of the tasks a node's shard takes: those
// whose slot number in the shard is a multiple of it, a number the
// shard's push claims anyway.
//
// Each worker counts its samples in plain fields (observe.Latencies) and
// publishes them with its counters (publish) when they changed; Stats sums
// them per node.
// sampleEvery is one task in how many that is stamped and timed.
const sampleEvery = 256

// Histogram is a distribution of durations in fixed buckets, as
// runtime/metrics' Float64Histogram, in seconds: Counts[i] samples fell
// in [Buckets[i], Buckets[i+1]), and the last bucket has no upper bound.
// (Unlike Float64Histogram, Buckets holds lower bounds only, one per
// bucket: JSON cannot encode the infinite bound.) Count is the number of
// samples and Sum their total, as Prometheus and OpenTelemetry histograms
// want. The buckets are the same in every Histogram of every pool.
type Histogram struct {
	Count   uint64    `json:"count"`
	Sum     float64   `json:"sum_seconds"`
	Buckets []float64 `json:"buckets_seconds"`
	Counts  []uint64  `json:"counts"`
}

// addTo adds the published histogram d to h.
func addTo(h *Histogram, d *observe.Published) {
	if h.Counts == nil {
		h.Buckets = observe.Buckets()
		h.Counts = make([]uint64, observe.NBuckets)
	}
	n, sum := d.AddTo(h.Counts)
	h.Count += n
	h.Sum += sum
}

// stamp is the submit time of a sampled task on the pool's clock; never 0,
// which means not sampled.
func (p *sched) stamp() int64 { return max(p.clock(time.Now()), 1) }

// stamped is it, queued from outside the pool as one of the sampled
// tasks of its shard (queue.InjectShard.SampleEvery), as a record with its
// submit time.
func (p *sched) stamped(it item) item {
	it = it.recorded()
	it.t.at = p.stamp()
	return it
}

// sample stamps t, made by the task running on w, if it is the worker's
// sampleEvery-th.
func (w *Worker) sample(t *task) {
	if w.c.Spawned%sampleEvery == 0 && t.at == 0 {
		t.at = w.pool.stamp()
	}
}

// observed runs it (record t, nil for a plain task queued as its
// function) under t's labels, timing it if it was sampled: the path of
// Worker.run for a task whose labels are not those the worker runs under
// (labels.go: the worker leaves them set after the task), or with a stamp.
func (w *Worker) observed(it item, t *task) {
	var s *observe.Set
	var at int64
	if t != nil {
		s, at = t.labels, t.at
		t.at = 0 // a reused record is not sampled again by mistake
	}
	w.runUnder(s)
	var start time.Time
	if at != 0 {
		start = time.Now()
		w.obs.lat.Wait.Add(w.pool.clock(start) - at)
	}
	w.runItem(it, t)
	if at != 0 {
		w.obs.lat.Run.Add(int64(time.Since(start)))
		w.obs.lat.Changed = true
	}
}
