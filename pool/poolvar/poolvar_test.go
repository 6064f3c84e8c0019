package poolvar_test

import (
	"context"
	"encoding/json"
	"expvar"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/pool/poolvar"
)

// The stats come back over HTTP from expvar's handler, with the counts a
// service reads, in snake_case.
func TestPublishOverHTTP(t *testing.T) {
	p, err := pool.New(pool.WithoutEnv(), pool.WithSpec("2x1"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	wg.Add(100)
	for range 100 {
		if err := p.Submit(context.Background(), func(*pool.Worker) { wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	poolvar.Publish("numapool_test", p)

	srv := httptest.NewServer(expvar.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var vars map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		t.Fatal(err)
	}
	raw, ok := vars["numapool_test"]
	if !ok {
		t.Fatalf("/debug/vars has no numapool_test: %d variables", len(vars))
	}
	var got struct {
		Submitted   uint64 `json:"submitted"`
		BusyWorkers *int   `json:"busy_workers"`
		Nodes       []struct {
			Node      int            `json:"node"`
			Submitted uint64         `json:"submitted"`
			QueueWait pool.Histogram `json:"queue_wait"`
			RunTime   pool.Histogram `json:"run_time"`
		} `json:"nodes"`
		Total map[string]uint64 `json:"total"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v in %s", err, raw)
	}
	if got.Submitted != 100 || got.BusyWorkers == nil || len(got.Nodes) != 2 ||
		got.Nodes[0].Submitted+got.Nodes[1].Submitted != 100 {
		t.Errorf("published stats: %s", raw)
	}
	for _, n := range got.Nodes {
		if len(n.QueueWait.Counts) == 0 || len(n.QueueWait.Buckets) != len(n.QueueWait.Counts) ||
			len(n.RunTime.Counts) != len(n.QueueWait.Counts) {
			t.Errorf("node %d: no histograms: %s", n.Node, raw)
		}
	}
	for _, key := range []string{"tasks_run", "completed", "panicked", "steals_in_node"} {
		if _, ok := got.Total[key]; !ok {
			t.Errorf("total has no %q: %s", key, raw)
		}
	}
}
