package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pool/internal/observe"
)

// A labelProbe blocks a task inside a function of a known name until the
// test has read, from a goroutine profile, the pprof labels the task runs
// under.
type labelProbe struct {
	in      chan struct{}
	release chan struct{}
}

func newLabelProbe() *labelProbe {
	return &labelProbe{in: make(chan struct{}), release: make(chan struct{})}
}

// labelProbeBlocked is the function a probed task is found in.
//
//go:noinline
func labelProbeBlocked(pr *labelProbe) {
	close(pr.in)
	<-pr.release
}

// labels waits for the probed task to block, reads its labels and lets it
// go on.
func (pr *labelProbe) labels(t *testing.T) map[string]string {
	t.Helper()
	select {
	case <-pr.in:
	case <-time.After(10 * time.Second):
		dumpGoroutines()
		t.Fatal("the probed task did not start within 10s")
	}
	defer close(pr.release)
	return goroutineLabels(t, "labelProbeBlocked")
}

// goroutineLabels returns the labels of the goroutine whose stack holds
// function fn, from a goroutine profile in its text form: one record per
// stack, with a "# labels: {...}" line (JSON) when it has labels.
func goroutineLabels(t *testing.T, fn string) map[string]string {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	for _, rec := range strings.Split(b.String(), "\n\n") {
		if !strings.Contains(rec, "."+fn+"+") {
			continue
		}
		labels := map[string]string{}
		for _, line := range strings.Split(rec, "\n") {
			if js, ok := strings.CutPrefix(line, "# labels: "); ok {
				if err := json.Unmarshal([]byte(js), &labels); err != nil {
					t.Fatalf("parsing %q: %v", line, err)
				}
			}
		}
		return labels
	}
	t.Fatalf("no goroutine in %s in the profile:\n%s", fn, b.String())
	return nil
}

// Each way to submit work with a context runs the work under the
// context's labels and the worker's (numapool.node, numapool.worker);
// work made inside a task without a context of its own runs under the
// task's; nothing runs under the labels of the goroutine that called New,
// nor under those of the task that ran before it on the same worker.
func TestTaskLabels(t *testing.T) {
	var p *Pool
	pprof.Do(context.Background(), pprof.Labels("caller", "new"), func(context.Context) {
		p = newTestPool(t, WithWorkers(1)) // one worker: every task runs after the last on it
	})
	defer p.Close()
	node := strconv.Itoa(p.Nodes()[0])
	job := func(v string) context.Context {
		return pprof.WithLabels(context.Background(), pprof.Labels("job", v))
	}
	cases := []struct {
		name string
		job  string                      // the job label the probe must see; "" none
		run  func(pr *labelProbe) func() // starts the probed work, returns its wait
	}{
		{"Submit", "a", func(pr *labelProbe) func() {
			done := make(chan struct{})
			if err := p.Submit(job("a"), func(*Worker) { labelProbeBlocked(pr); close(done) }); err != nil {
				t.Fatal(err)
			}
			return func() { <-done }
		}},
		{"Submit of another job on the same worker", "b", func(pr *labelProbe) func() {
			done := make(chan struct{})
			if err := p.Submit(job("b"), func(*Worker) { labelProbeBlocked(pr); close(done) }); err != nil {
				t.Fatal(err)
			}
			return func() { <-done }
		}},
		{"Submit without labels after labelled tasks", "", func(pr *labelProbe) func() {
			done := make(chan struct{})
			if err := p.Submit(context.Background(), func(*Worker) { labelProbeBlocked(pr); close(done) }); err != nil {
				t.Fatal(err)
			}
			return func() { <-done }
		}},
		{"Node.Submit", "n", func(pr *labelProbe) func() {
			done := make(chan struct{})
			if err := p.Node(p.Nodes()[0]).Submit(job("n"), func(*Worker) { labelProbeBlocked(pr); close(done) }); err != nil {
				t.Fatal(err)
			}
			return func() { <-done }
		}},
		{"Spawn inherits", "s", func(pr *labelProbe) func() {
			done := make(chan struct{})
			err := p.Submit(job("s"), func(w *Worker) {
				w.Spawn(func(*Worker) { labelProbeBlocked(pr); close(done) })
			})
			if err != nil {
				t.Fatal(err)
			}
			return func() { <-done }
		}},
		{"Group", "g", func(pr *labelProbe) func() {
			g := p.Group(job("g"))
			g.Go(func(*Worker) error { labelProbeBlocked(pr); return nil })
			return func() { _ = g.Wait() }
		}},
		{"Group.Go inside a task inherits", "gi", func(pr *labelProbe) func() {
			done := make(chan error, 1)
			_ = p.Submit(job("gi"), func(*Worker) {
				g := p.Group(context.Background())
				g.Go(func(*Worker) error { labelProbeBlocked(pr); return nil })
				done <- g.Wait()
			})
			return func() { <-done }
		}},
		{"a task's labels come back after a nested task's", "outer", func(pr *labelProbe) func() {
			done := make(chan error, 1)
			_ = p.Submit(job("outer"), func(*Worker) {
				g := p.Group(job("inner"))
				g.Go(func(*Worker) error { return nil })
				_ = g.Wait() // runs the inner task on this worker
				labelProbeBlocked(pr)
				done <- nil
			})
			return func() { <-done }
		}},
		{"ParallelFor", "l", func(pr *labelProbe) func() {
			done := make(chan error, 1)
			go func() {
				done <- p.ParallelFor(job("l"), 1, 1, func(*Worker, int, int) error { labelProbeBlocked(pr); return nil })
			}()
			return func() { <-done }
		}},
		{"MapReduce", "m", func(pr *labelProbe) func() {
			done := make(chan error, 1)
			go func() {
				_, err := MapReduce(job("m"), p, 1, 1, func(*Worker, int, int) (int, error) { labelProbeBlocked(pr); return 0, nil },
					func(a, b int) int { return a + b })
				done <- err
			}()
			return func() { <-done }
		}},
		{"Async inside a task inherits", "f", func(pr *labelProbe) func() {
			done := make(chan error, 1)
			_ = p.Submit(job("f"), func(w *Worker) {
				_, err := Async(p, func(*Worker) (int, error) { labelProbeBlocked(pr); return 0, nil }).Wait()
				done <- err
			})
			return func() { <-done }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pr := newLabelProbe()
			wait := c.run(pr)
			got := pr.labels(t)
			within(t, 10*time.Second, "the probed work", wait)
			want := map[string]string{observe.LabelNode: node, observe.LabelWorker: "0"}
			if c.job != "" {
				want["job"] = c.job
			}
			if len(got) != len(want) {
				t.Errorf("labels %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("label %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

// An idle worker carries its own labels only, not those of the goroutine
// that called New.
func TestWorkerLabelsNotInherited(t *testing.T) {
	var p *Pool
	pprof.Do(context.Background(), pprof.Labels("caller", "new"), func(context.Context) {
		p = newTestPool(t, WithWorkers(1))
	})
	defer p.Close()
	pr := newLabelProbe()
	go p.Submit(context.Background(), func(*Worker) { labelProbeBlocked(pr) })
	got := pr.labels(t)
	if _, ok := got["caller"]; ok || got[observe.LabelWorker] != "0" {
		t.Errorf("a plain task's labels are %v, want the worker's alone", got)
	}

	// A worker keeps a task's labels after it, for the next task, but not
	// once it runs out of work: asleep, it has its own alone.
	done := make(chan struct{})
	job := pprof.WithLabels(context.Background(), pprof.Labels("job", "a"))
	if err := p.Submit(job, func(*Worker) { close(done) }); err != nil {
		t.Fatal(err)
	}
	<-done
	var last map[string]string
	if !eventually(10*time.Second, func() bool {
		last = parkedLabels(t)
		return last != nil && last["job"] == "" && last[observe.LabelWorker] == "0"
	}) {
		t.Errorf("the parked worker's labels are %v, want its own alone", last)
	}
}

// parkedLabels returns the labels of a goroutine parked in Worker.park,
// or nil if none is.
func parkedLabels(t *testing.T) map[string]string {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), ".(*Worker).park+") {
		return nil
	}
	return goroutineLabels(t, "(*Worker).park")
}

// Submissions under one label set share one interned set, whose merged
// labels each worker makes once: a labelled task costs no merge.
func TestLabelSetsInterned(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	defer p.Close()
	a1 := pprof.WithLabels(context.Background(), pprof.Labels("job", "a"))
	a2, cancel := context.WithCancel(a1) // another context, the same labels
	defer cancel()
	s1, s2 := p.labelsOf(a1), p.labelsOf(a2)
	if s1 == nil || s1 != s2 {
		t.Fatalf("label sets %p and %p for equal labels, want one set", s1, s2)
	}
	if s := p.labelsOf(context.Background()); s != nil {
		t.Fatalf("a context without labels has label set %v", s.Pairs())
	}
	w := p.workers[0]
	if c1, c2 := w.labelsFor(s1), w.labelsFor(s1); c1 != c2 {
		t.Fatal("the merged labels of one set and worker are made twice")
	}
	if v, _ := pprof.Label(w.labelsFor(s1), "job"); v != "a" {
		t.Fatalf("merged labels lack job=a")
	}
}

// Tasks with labels are queued as their records, which are reused like
// any plain task's: under a mix of label sets (two jobs and none) on
// several nodes, with spawns, Group.Go and Joins stolen across workers,
// every task runs exactly once, and the records the workers keep for
// reuse hold neither labels nor a submit time.
func TestLabelledTasksRunOnce(t *testing.T) {
	rounds := 10
	if testing.Short() || raceEnabled {
		rounds = 3
	}
	const fan, depth = 8, 3
	const tree = 1 + fan + fan*fan + fan*fan*fan // ids by heap numbering: children of id are id*fan+1 ...
	for _, spec := range []string{"2x2", "4x1"} {
		t.Run(specName(spec), func(t *testing.T) {
			p := newTestPool(t, WithSpec(spec))
			defer p.Close()
			ctxs := []context.Context{
				pprof.WithLabels(context.Background(), pprof.Labels("job", "a")),
				pprof.WithLabels(context.Background(), pprof.Labels("job", "b")),
				context.Background(),
			}
			for round := range rounds {
				runs := make([]atomic.Int32, len(ctxs)*tree)
				var wg sync.WaitGroup
				wg.Add(len(runs))
				var node func(w *Worker, tr, d, id int)
				node = func(w *Worker, tr, d, id int) {
					runs[tr*tree+id].Add(1)
					defer wg.Done()
					if d == depth {
						return
					}
					child := func(k int) func(*Worker) { return func(w *Worker) { node(w, tr, d+1, id*fan+1+k) } }
					switch d {
					case 0:
						g := p.Group(context.Background())
						for k := range fan {
							g.Go(func(w *Worker) error { child(k)(w); return nil })
						}
						_ = g.Wait()
					case 1:
						for k := 0; k < fan; k += 2 {
							_ = w.Join(child(k), child(k+1))
						}
					default:
						for k := range fan {
							w.Spawn(child(k))
						}
					}
				}
				for tr, ctx := range ctxs {
					if err := p.Submit(ctx, func(w *Worker) { node(w, tr, 0, 0) }); err != nil {
						t.Fatal(err)
					}
				}
				within(t, 30*time.Second, fmt.Sprintf("round %d", round), wg.Wait)
				for i := range runs {
					if n := runs[i].Load(); n != 1 {
						t.Fatalf("round %d: task %d of tree %d ran %d times", round, i%tree, i/tree, n)
					}
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			// A kept record may still point at its last labels; what
			// newTask makes of it must not (the workers have ended, so
			// their lists are the test's to take from).
			for _, w := range p.workers {
				for range len(w.recs.free) {
					if rec := w.newTask(func(*Worker) {}, noHome); rec.labels != nil || rec.at != 0 {
						t.Fatalf("worker %d made a task from a record with labels %v, stamp %d", w.id, rec.labels, rec.at)
					}
				}
			}
		})
	}
}
