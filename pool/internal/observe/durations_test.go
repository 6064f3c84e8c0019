package observe

import "testing"

// The buckets double from firstBucket: each duration lands in the bucket
// whose bounds hold it, and the last bucket takes everything above.
func TestHistogramBuckets(t *testing.T) {
	if len(buckets) != NBuckets || buckets[0] != 0 {
		t.Fatalf("buckets %v", buckets)
	}
	for _, ns := range []int64{-5, 0, 1, 255, 256, 257, 511, 512, 1000, 1e6, 1e9, 17e9, 1e12, 1 << 62} {
		b := BucketOf(ns)
		s := float64(max(ns, 0)) / 1e9
		if s < buckets[b] || (b+1 < NBuckets && s >= buckets[b+1]) {
			t.Errorf("%d ns in bucket %d, [%g, next) s", ns, b, buckets[b])
		}
	}
	if BucketOf(1<<62) != NBuckets-1 {
		t.Errorf("a huge duration is not in the last bucket")
	}
}

// A publish stores what changed: the published copy has the counts and
// the sum of what was added, and a second publish with nothing new
// changes nothing.
func TestLatenciesPublish(t *testing.T) {
	var l Latencies
	var p PublishedLatencies
	l.Wait.Add(300)
	l.Wait.Add(1e6)
	l.Run.Add(5)
	l.Changed = true
	l.Publish(&p)
	counts := make([]uint64, NBuckets)
	n, sum := p.Wait.AddTo(counts)
	if n != 2 || sum != (300+1e6)/1e9 || counts[BucketOf(300)] != 1 || counts[BucketOf(1e6)] != 1 {
		t.Errorf("wait: %d samples, sum %g, counts %v", n, sum, counts)
	}
	if n, _ := p.Run.AddTo(make([]uint64, NBuckets)); n != 1 {
		t.Errorf("run: %d samples, want 1", n)
	}
	l.Wait.Add(300) // counted, not published: Changed is false
	l.Publish(&p)
	if n, _ := p.Wait.AddTo(make([]uint64, NBuckets)); n != 2 {
		t.Errorf("a publish with Changed false stored %d samples, want the 2 published before", n)
	}
}
