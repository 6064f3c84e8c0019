package pool

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestStatsAndExplain(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"))
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		_ = p.Submit(context.Background(), func(*Worker) { wg.Done() })
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if len(st.Workers) != 2 || len(st.Nodes) != 2 || st.Total.TasksRun != 100 {
		t.Errorf("stats %+v", st)
	}
	ex := p.Explain()
	for _, want := range []string{"2 workers on 2 nodes", "synthetic:2x1", "numa_domains", "hierarchical", "node 0", "node 1", "worker 1"} {
		if !strings.Contains(ex, want) {
			t.Errorf("Explain lacks %q:\n%s", want, ex)
		}
	}
	if runtime.GOOS == "linux" && !strings.Contains(ex, "no thread now") {
		t.Errorf("Explain after Close does not say the threads ended:\n%s", ex)
	}
}
