package main

import (
	"context"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/numapool/numapool/pool"
)

// scrape returns the body of a GET of path from srv.
func scrape(t *testing.T, srv *httptest.Server, path string) string {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return string(b)
}

// value returns the value of the sample of the exposition text body
// whose line starts with metric and whose labels hold all of labels, or
// fails.
func value(t *testing.T, body, metric string, labels ...string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `\{([^}]*)\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		all := true
		for _, l := range labels {
			all = all && strings.Contains(m[1], l)
		}
		if all {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s{%s} in:\n%s", metric, strings.Join(labels, ","), body)
	return 0
}

// Both endpoints, scraped after a known amount of work, show the pool's
// per-node counts under their OpenTelemetry-style names, and the sampled
// histograms as histograms: /metrics through client_golang, /otel
// through the producer.
func TestScrape(t *testing.T) {
	p, err := pool.New(pool.WithoutEnv(), pool.WithSpec("2x1"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50 * 64 // enough that both nodes' histograms hold samples
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		if err := p.Submit(context.Background(), func(*pool.Worker) { wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := p.Close(); err != nil { // the counters are exact after Close
		t.Fatal(err)
	}
	st := p.Stats()
	mux, shutdown, err := newMux(p)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown()
	srv := httptest.NewServer(mux)
	defer srv.Close()

	prom := scrape(t, srv, "/metrics")
	otel := scrape(t, srv, "/otel")
	var run, otelRun float64
	for _, ns := range st.Nodes {
		node := strconv.Itoa(ns.Node)
		got := value(t, prom, "numapool_tasks_run_total", `node="`+node+`"`)
		if got != float64(ns.TasksRun) {
			t.Errorf("node %s: numapool_tasks_run_total %g, Stats says %d", node, got, ns.TasksRun)
		}
		run += got
		otelRun += value(t, otel, "numapool_tasks_run_total", `numapool_node="`+node+`"`)
		if c := value(t, prom, "numapool_task_queue_wait_seconds_bucket", `node="`+node+`"`, `le="+Inf"`); c == 0 {
			t.Errorf("node %s: no queue wait samples", node)
		}
		want := float64(ns.RunTime.Count)
		if got := value(t, prom, "numapool_task_run_time_seconds_count", `node="`+node+`"`); got != want {
			t.Errorf("node %s: numapool_task_run_time_seconds_count %g, Stats says %g", node, got, want)
		}
		if got := value(t, otel, "numapool_task_run_time_seconds_count", `numapool_node="`+node+`"`); got != want {
			t.Errorf("node %s: /otel numapool_task_run_time_seconds_count %g, Stats says %g", node, got, want)
		}
		if got, want := value(t, otel, "numapool_task_queue_wait_seconds_bucket", `numapool_node="`+node+`"`, `le="+Inf"`), float64(ns.QueueWait.Count); got != want || got == 0 {
			t.Errorf("node %s: /otel numapool_task_queue_wait_seconds_bucket{le=+Inf} %g, Stats says %g samples", node, got, want)
		}
	}
	if run != n || otelRun != n {
		t.Errorf("tasks run: %g through client_golang, %g through OpenTelemetry; %d were submitted", run, otelRun, n)
	}
	for _, want := range []string{"numapool_tasks_queued{", "numapool_workers_busy{", "numapool_steals_cross_node_total{"} {
		if !strings.Contains(prom, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
