package pool

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numapool/numapool/pool/internal/observe"
)

// sumNodes adds up the nodes' histograms.
func sumNodes(st Stats) (wait, run Histogram) {
	for _, ns := range st.Nodes {
		for _, pair := range [2][2]*Histogram{{&wait, &ns.QueueWait}, {&run, &ns.RunTime}} {
			to, from := pair[0], pair[1]
			if to.Counts == nil {
				to.Counts = make([]uint64, len(from.Counts))
				to.Buckets = from.Buckets
			}
			to.Count += from.Count
			to.Sum += from.Sum
			for i, n := range from.Counts {
				to.Counts[i] += n
			}
		}
	}
	return wait, run
}

// checkHistogram checks that h's counts add up to its count, and that
// no more than slack samples fall under min.
func checkHistogram(t *testing.T, what string, h Histogram, min time.Duration, slack uint64) {
	t.Helper()
	if len(h.Counts) != observe.NBuckets || len(h.Buckets) != observe.NBuckets {
		t.Fatalf("%s: %d counts, %d buckets; want %d", what, len(h.Counts), len(h.Buckets), observe.NBuckets)
	}
	var total, under uint64
	for i, n := range h.Counts {
		total += n
		if i+1 < observe.NBuckets && h.Buckets[i+1] <= min.Seconds() {
			under += n
		}
	}
	if total != h.Count {
		t.Errorf("%s: counts add up to %d, Count is %d", what, total, h.Count)
	}
	if under > slack {
		t.Errorf("%s: %d samples below %v, want at most %d: %v", what, under, min, slack, h.Counts)
	}
	if h.Sum < float64(h.Count-under)*min.Seconds() {
		t.Errorf("%s: sum %gs for %d samples of at least %v", what, h.Sum, h.Count, min)
	}
}

// Tasks submitted from outside while the only worker is held wait at
// least as long as it is held, and tasks that spin run at least that
// long: the sampled histograms show both, and the sampling keeps to
// about one task in sampleEvery.
func TestStatsQueueWaitAndRunTime(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	const held = 20 * time.Millisecond
	const n = 40 * sampleEvery
	hold := make(chan struct{})
	if err := p.Submit(context.Background(), func(*Worker) { <-hold }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		if err := p.Submit(context.Background(), func(*Worker) { wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(held) // every task queued above waits at least this long
	close(hold)
	within(t, 10*time.Second, "the held tasks", wg.Wait)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wait, _ := sumNodes(p.Stats())
	// The holding task itself may be sampled, and waited less.
	checkHistogram(t, "queue wait", wait, held, 1)
	if wait.Count < n/sampleEvery/4 || wait.Count > 4*n/sampleEvery {
		t.Errorf("%d of %d tasks sampled, want about %d", wait.Count, n+1, n/sampleEvery)
	}

	// Tasks made inside a task: every sampleEvery-th is sampled.
	p = newTestPool(t, WithWorkers(2))
	defer p.Close()
	const spin = 50 * time.Microsecond
	const m = 10 * sampleEvery
	wg.Add(m)
	err := p.Submit(context.Background(), func(w *Worker) {
		for range m {
			w.Spawn(func(*Worker) { spinFor(spin); wg.Done() })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "the spawned tasks", wg.Wait)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wait, run := sumNodes(p.Stats())
	if run.Count < m/sampleEvery || run.Count != wait.Count {
		t.Errorf("%d run times and %d queue waits of %d spawned tasks, want %d of each (and maybe the submitted one)",
			run.Count, wait.Count, m, m/sampleEvery)
	}
	checkHistogram(t, "run time", run, spin, 1) // the submitted task may be sampled
	checkHistogram(t, "queue wait", wait, 0, 0)
}

// The histograms are in Stats as JSON, so in the expvar publisher's
// output too: finite bounds only (JSON has no infinity).
func TestStatsHistogramsJSON(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	defer p.Close()
	st := p.Stats()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"queue_wait":{"count":`, `"run_time":{"count":`, `"buckets_seconds":[0,2.56e-7,`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Stats as JSON lacks %s: %s", want, b)
		}
	}
	if len(st.Nodes) != 2 || len(st.Nodes[1].RunTime.Counts) != observe.NBuckets {
		t.Errorf("per-node histograms missing: %+v", st.Nodes)
	}
}
