// Command probe is one rank of a cluster job: it starts a pool as a
// program would (pool.New, with the NUMAPOOL_* variables), makes every
// worker run a task that records the CPU it ran on and its thread's
// affinity mask, and prints one JSON line describing the rank.
//
//	probe [-machine-spec SPEC]
//
// -machine-spec builds the pool on launch.Synthetic(SPEC), the spec laid
// over the whole node, instead of the discovered topology.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/numapool/numapool/launch"
	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/topology"
)

// Worker is what one worker was and did.
type Worker struct {
	ID         int             `json:"id"`
	Node       int             `json:"node"`
	Bound      topology.CPUSet `json:"bound"`       // OS CPUs the pool bound its thread to (empty: unbound)
	ThreadMask topology.CPUSet `json:"thread_mask"` // sched_getaffinity of its thread, read inside its tasks
	RanOn      topology.CPUSet `json:"ran_on"`      // CPUs getcpu saw inside its tasks
	Tasks      int             `json:"tasks"`
}

// Report is the rank's JSON line.
type Report struct {
	Allowed    topology.CPUSet `json:"allowed"` // the process's mask, read on the main thread before the pool starts
	Launch     launch.Info     `json:"launch"`
	Workers    []Worker        `json:"workers"`
	Groups     []int           `json:"groups"`     // the pool's node groups
	GOMAXPROCS int             `json:"gomaxprocs"` // of this process
	Warnings   []string        `json:"warnings"`
	Explain    string          `json:"explain"`
	Error      string          `json:"error,omitempty"`
}

func main() {
	spec := flag.String("machine-spec", "", "build the pool on launch.Synthetic(SPEC)")
	flag.Parse()
	r := run(*spec)
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	if r.Error != "" {
		os.Exit(1)
	}
}

func run(spec string) (r Report) {
	r.Launch = launch.Detect()
	allowed, err := topology.ThreadAffinity(0)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Allowed = allowed
	r.GOMAXPROCS = runtime.GOMAXPROCS(0)
	var opts []pool.Option
	if spec != "" {
		t, err := launch.Synthetic(spec, topology.Discover())
		if err != nil {
			r.Error = err.Error()
			return r
		}
		opts = append(opts, pool.WithTopology(t))
	}
	p, err := pool.New(opts...)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	n := p.Workers()
	ws := make([]Worker, n)
	var mu sync.Mutex
	record := func(w *pool.Worker) {
		cpu, _, cerr := pin.CurrentCPU()
		mask, merr := topology.ThreadAffinity(0)
		mu.Lock()
		defer mu.Unlock()
		x := &ws[w.ID()]
		x.ID, x.Node = w.ID(), w.Node()
		x.Tasks++
		if cerr == nil {
			x.RanOn.Add(cpu)
		}
		if merr == nil {
			x.ThreadMask = x.ThreadMask.Or(mask)
		}
	}
	// n tasks that wait for each other run on n different workers, so
	// every worker records at least once; then a burst samples where they run.
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		_ = p.Submit(context.Background(), func(w *pool.Worker) {
			defer done.Done()
			record(w)
			arrived.Done()
			select {
			case <-all:
			case <-time.After(10 * time.Second):
			}
		})
	}
	go func() { arrived.Wait(); close(all) }()
	done.Wait()
	for range 200 * n {
		done.Add(1)
		_ = p.Submit(context.Background(), func(w *pool.Worker) {
			defer done.Done()
			for deadline := time.Now().Add(50 * time.Microsecond); time.Now().Before(deadline); {
			}
			record(w)
		})
	}
	done.Wait()
	for _, s := range p.Stats().Workers {
		if s.Bound != "" {
			b, err := topology.ParseCPUList([]byte(s.Bound))
			if err == nil {
				ws[s.Worker].Bound = b
			}
		}
	}
	r.Groups = p.Nodes()
	sort.Ints(r.Groups)
	bound := make([]topology.CPUSet, n)
	for i := range ws {
		bound[i] = ws[i].Bound
	}
	r.Warnings = r.Launch.Warnings(n, bound...)
	r.Explain = p.Explain()
	if err := p.Close(); err != nil {
		r.Error = err.Error()
	}
	r.Workers = ws
	return r
}
