package pool

import (
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
)

// Queue wait and run time. A task queued as its function has no record
// to hold the time it was submitted, and reading the clock for every task
// would cost the hot paths more than the task itself for small tasks; so
// about one submission in sampleEvery is stamped: it is queued as its
// record with its submit time (task.at), and the worker that starts it
// reads the clock when it starts and when it returns. From a task the
// sample is every sampleEvery-th task the worker makes; from outside the
// pool every sampleEvery-th task a node's shard takes, counted under the
// shard's lock, which the submission holds anyway.
//
// Each worker counts its samples in plain fields and publishes them with
// its counters (publish) when they changed; Stats sums them per node.
const (
	sampleEvery = 256
	// histBuckets is the number of buckets: the first holds durations
	// under histFirst, each next one twice the span of the last, the last
	// one everything from histFirst<<(histBuckets-2) (about 17 s) up.
	histBuckets = 28  // at most 32: durations.dirty has a bit per bucket
	histFirst   = 256 // ns
)

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

// histogramBuckets are the lower bounds of the buckets, in seconds.
var histogramBuckets = func() []float64 {
	b := make([]float64, histBuckets)
	for i := 1; i < histBuckets; i++ {
		b[i] = float64(int64(histFirst)<<(i-1)) / 1e9
	}
	return b
}()

// bucketOf is the bucket of a duration of ns nanoseconds.
func bucketOf(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	return min(bits.Len64(uint64(ns)/histFirst), histBuckets-1)
}

// durations is one histogram as a worker counts it (owner only). dirty
// has a bit for each bucket counted in since the last publish, so that a
// publish stores only those: a sample is about one task in sampleEvery,
// and copying every bucket at every publish would cost each task more
// than the sampling saves.
type durations struct {
	counts [histBuckets]uint64
	sum    uint64 // ns
	dirty  uint32
}

func (d *durations) add(ns int64) {
	b := bucketOf(ns)
	d.counts[b]++
	d.dirty |= 1 << b
	d.sum += uint64(max(ns, 0))
}

// publishedDurations is the copy of a worker's durations that Stats reads.
type publishedDurations struct {
	counts [histBuckets]atomic.Uint64
	sum    atomic.Uint64
}

// latencies are a worker's two histograms: how long sampled tasks waited
// from submission to start, and how long they ran.
type latencies struct {
	wait, run durations
	changed   bool // since the last publish
}

type publishedLatencies struct {
	wait, run publishedDurations
}

// publishLatencies copies the worker's histograms for Stats, if they
// changed.
func (w *Worker) publishLatencies() {
	if !w.obs.lat.changed {
		return
	}
	w.obs.lat.changed = false
	for _, pair := range [2]struct {
		from *durations
		to   *publishedDurations
	}{{&w.obs.lat.wait, &w.obs.pubLat.wait}, {&w.obs.lat.run, &w.obs.pubLat.run}} {
		for m := pair.from.dirty; m != 0; m &= m - 1 {
			i := bits.TrailingZeros32(m)
			pair.to.counts[i].Store(pair.from.counts[i])
		}
		pair.from.dirty = 0
		pair.to.sum.Store(pair.from.sum)
	}
}

// addTo adds the published histogram d to h.
func (d *publishedDurations) addTo(h *Histogram) {
	if h.Counts == nil {
		h.Buckets = slices.Clone(histogramBuckets) // the caller's to change
		h.Counts = make([]uint64, histBuckets)
	}
	for i := range d.counts {
		n := d.counts[i].Load()
		h.Counts[i] += n
		h.Count += n
	}
	h.Sum += float64(d.sum.Load()) / 1e9
}

// stamp is the submit time of a sampled task on the pool's clock; never 0,
// which means not sampled.
func (p *sched) stamp() int64 { return max(p.clock(time.Now()), 1) }

// stamped is it, queued from outside the pool as every sampleEvery-th
// task of its shard (queue.InjectShard.SampleEvery), as a record with its
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
	var s *labelSet
	var at int64
	if t != nil {
		s, at = t.labels, t.at
		t.at = 0 // a reused record is not sampled again by mistake
	}
	w.runUnder(s)
	var start time.Time
	if at != 0 {
		start = time.Now()
		w.obs.lat.wait.add(w.pool.clock(start) - at)
	}
	if t == nil {
		w.call(it.fn)
	} else {
		t.job.run(w)
		if t.plain {
			w.reuse(t)
		}
	}
	if at != 0 {
		w.obs.lat.run.add(int64(time.Since(start)))
		w.obs.lat.changed = true
	}
}
