// Package obs_test checks what Go's own tools see of a pool: a CPU
// profile split by job, node and worker through pprof labels, and an
// execution trace that shows a loop, a group and a call as trace tasks
// with a region per node. It is a module of its own, so that the readers
// of those formats (github.com/google/pprof, golang.org/x/exp/trace) stay
// out of the library's go.mod.
package obs_test

import (
	"bytes"
	"context"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/numapool/numapool/pool"
	xtrace "golang.org/x/exp/trace"
)

// spinJobA and spinJobB burn CPU for d; the profile tells the two jobs'
// samples apart by these functions in their stacks.
//
//go:noinline
func spinJobA(d time.Duration) { spin(d) }

//go:noinline
func spinJobB(d time.Duration) { spin(d) }

// spin computes for d, reading the clock rarely: a profile signal that
// lands in the clock's vDSO code may lose the stack above it.
func spin(d time.Duration) {
	x := uint64(1)
	for start := time.Now(); time.Since(start) < d; {
		for range 10000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink.Store(x) // so that the loop is not optimised away
}

var sink atomic.Uint64

// A CPU profile of tasks submitted under pprof.Do with job=a and job=b,
// interleaved on the same workers, has each job's samples labelled with
// that job alone, and with the node and worker that ran them. Over a
// second of CPU is profiled, so that each job has enough samples.
func TestCPUProfileSplitsByJob(t *testing.T) {
	p, err := pool.New(pool.WithoutEnv(), pool.WithSpec("2x1"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	nodes := map[string]bool{}
	for _, id := range p.Nodes() {
		nodes[strconv.Itoa(id)] = true
	}

	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skipf("no CPU profile: %v", err)
	}
	const tasks, each = 80, 10 * time.Millisecond // per job: 1.6 s of CPU in all
	var wg sync.WaitGroup
	wg.Add(2 * tasks)
	pprof.Do(context.Background(), pprof.Labels("job", "a"), func(ctxA context.Context) {
		pprof.Do(context.Background(), pprof.Labels("job", "b"), func(ctxB context.Context) {
			for range tasks {
				if err := p.Submit(ctxA, func(*pool.Worker) { spinJobA(each); wg.Done() }); err != nil {
					t.Fatal(err)
				}
				if err := p.Submit(ctxB, func(*pool.Worker) { spinJobB(each); wg.Done() }); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
	wg.Wait()
	pprof.StopCPUProfile()

	prof, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// A Sample is one stack and label set, with its count of profile
	// samples in Value[0].
	count := map[string]int64{}
	for _, s := range prof.Sample {
		job := ""
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				switch name := line.Function.Name; {
				case strings.HasSuffix(name, ".spinJobA"):
					job = "a"
				case strings.HasSuffix(name, ".spinJobB"):
					job = "b"
				}
			}
		}
		if job == "" {
			continue
		}
		count[job] += s.Value[0]
		if got := s.Label["job"]; !slices.Equal(got, []string{job}) {
			t.Errorf("a sample of job %s is labelled job=%v (labels %v)", job, got, s.Label)
		}
		if n := s.Label["numapool.node"]; len(n) != 1 || !nodes[n[0]] {
			t.Errorf("a sample of job %s has numapool.node=%v, want one of %v", job, n, nodes)
		}
		if len(s.Label["numapool.worker"]) != 1 {
			t.Errorf("a sample of job %s has numapool.worker=%v", job, s.Label["numapool.worker"])
		}
		if len(s.Label) != 3 {
			t.Errorf("a sample of job %s has labels %v, want job, numapool.node and numapool.worker alone", job, s.Label)
		}
	}
	if count["a"] < 20 || count["b"] < 20 {
		t.Fatalf("samples in the jobs' functions: %v; want 20 or more each", count)
	}
	t.Logf("samples: %v", count)
}

// An execution trace of a ParallelFor, a Group and a Run shows each as a
// trace task named after the call, with regions of its task whose types
// name the nodes its work ran on; and every take of tasks from another
// node that Stats counts is a log event in the trace.
func TestTraceShowsLoopsGroupsAndCalls(t *testing.T) {
	p, err := pool.New(pool.WithoutEnv(), pool.WithSpec("2x1"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("no trace: %v", err)
	}
	err = p.ParallelFor(context.Background(), 64, 1, func(w *pool.Worker, lo, hi int) error {
		spinJobA(50 * time.Microsecond)
		return nil
	})
	g := p.Group(context.Background())
	g.Go(func(*pool.Worker) error { return nil })
	errG := g.Wait()
	_, errR := pool.Run(p, func(*pool.Worker) (int, error) { return 1, nil })
	// Tasks spawned on one node, which the other node's idle worker steals.
	before := p.Stats().Total
	var wg sync.WaitGroup
	wg.Add(200)
	_ = p.Submit(context.Background(), func(w *pool.Worker) {
		for range 200 {
			w.Spawn(func(*pool.Worker) { spinJobA(20 * time.Microsecond); wg.Done() })
		}
	})
	wg.Wait()
	if err := p.Close(); err != nil { // the counters are exact after Close
		t.Fatal(err)
	}
	c := p.Stats().Total.Sub(before)
	crossTakes := c.StealsCrossNode + c.InjectPullsCrossNode + c.CrossNodeSentHome
	trace.Stop()
	if err != nil || errG != nil || errR != nil {
		t.Fatal(err, errG, errR)
	}

	r, err := xtrace.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[xtrace.TaskID]string{}     // task ID -> type
	regions := map[string]map[string]bool{} // task type -> region types
	var crossLogs uint64
	for {
		ev, err := r.ReadEvent()
		if err != nil {
			break // io.EOF, or a trace cut short: what was read is checked
		}
		switch ev.Kind() {
		case xtrace.EventTaskBegin:
			tasks[ev.Task().ID] = ev.Task().Type
		case xtrace.EventRegionBegin:
			reg := ev.Region()
			typ := tasks[reg.Task]
			if regions[typ] == nil {
				regions[typ] = map[string]bool{}
			}
			regions[typ][reg.Type] = true
		case xtrace.EventLog:
			if ev.Log().Category == "numapool.cross-node" {
				crossLogs++
			}
		}
	}
	for _, want := range []string{"numapool.ParallelFor", "numapool.Group", "numapool.Run"} {
		found := false
		for _, typ := range tasks {
			found = found || typ == want
		}
		if !found {
			t.Errorf("no trace task %s; tasks: %v", want, tasks)
		}
	}
	for _, id := range p.Nodes() {
		if want := "numapool.node " + strconv.Itoa(id); !regions["numapool.ParallelFor"][want] {
			t.Errorf("the ParallelFor task has no region %q: %v", want, regions)
		}
	}
	if len(regions["numapool.Group"]) == 0 || len(regions["numapool.Run"]) == 0 {
		t.Errorf("the Group's or the Run's task has no region: %v", regions)
	}
	if crossLogs < crossTakes {
		t.Errorf("%d numapool.cross-node log events for %d cross-node takes in Stats", crossLogs, crossTakes)
	}
	if crossTakes == 0 {
		t.Logf("no cross-node take happened: the log events were not checked")
	}
	t.Logf("cross-node takes: %d, log events: %d", crossTakes, crossLogs)
}
