package observe

import (
	"math/bits"
	"slices"
	"sync/atomic"
)

// The buckets of every histogram: the first holds durations under
// firstBucket, each next one twice the span of the last, the last one
// everything from firstBucket<<(NBuckets-2) (about 17 s) up.
const (
	NBuckets    = 28  // at most 32: Durations.dirty has a bit per bucket
	firstBucket = 256 // ns
)

// buckets are the lower bounds of the buckets, in seconds.
var buckets = func() []float64 {
	b := make([]float64, NBuckets)
	for i := 1; i < NBuckets; i++ {
		b[i] = float64(int64(firstBucket)<<(i-1)) / 1e9
	}
	return b
}()

// Buckets returns the lower bounds of the buckets, in seconds: the
// caller's to change.
func Buckets() []float64 { return slices.Clone(buckets) }

// BucketOf is the bucket of a duration of ns nanoseconds.
func BucketOf(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	return min(bits.Len64(uint64(ns)/firstBucket), NBuckets-1)
}

// Durations is one histogram as a worker counts it (its owner only).
// dirty has a bit for each bucket counted in since the last publish, so
// that a publish stores only those: samples are rare, and copying every
// bucket at every publish would cost each task more than the sampling
// saves.
type Durations struct {
	counts [NBuckets]uint64
	sum    uint64 // ns
	dirty  uint32
}

// Add counts a duration of ns nanoseconds.
func (d *Durations) Add(ns int64) {
	b := BucketOf(ns)
	d.counts[b]++
	d.dirty |= 1 << b
	d.sum += uint64(max(ns, 0))
}

// publish stores what changed since the last publish in to.
func (d *Durations) publish(to *Published) {
	for m := d.dirty; m != 0; m &= m - 1 {
		i := bits.TrailingZeros32(m)
		to.counts[i].Store(d.counts[i])
	}
	d.dirty = 0
	to.sum.Store(d.sum)
}

// Published is the copy of a worker's Durations that others read.
type Published struct {
	counts [NBuckets]atomic.Uint64
	sum    atomic.Uint64
}

// AddTo adds the published histogram to counts (NBuckets of them) and
// returns its number of samples and their sum in seconds.
func (p *Published) AddTo(counts []uint64) (n uint64, sum float64) {
	for i := range p.counts {
		c := p.counts[i].Load()
		counts[i] += c
		n += c
	}
	return n, float64(p.sum.Load()) / 1e9
}

// Latencies are a worker's two histograms: how long sampled tasks waited
// from submission to start, and how long they ran (owner only).
type Latencies struct {
	Wait, Run Durations
	Changed   bool // since the last publish
}

// PublishedLatencies is the copy of a worker's Latencies others read.
type PublishedLatencies struct {
	Wait, Run Published
}

// Publish copies the histograms to to, if they changed.
func (l *Latencies) Publish(to *PublishedLatencies) {
	if !l.Changed {
		return
	}
	l.Changed = false
	l.Wait.publish(&to.Wait)
	l.Run.publish(&to.Run)
}
