// Package bench is numapool's comparison suite: workloads that batch jobs
// and pipelines run, each measured on numapool (in several
// configurations) and on the pools Go programs use instead, in the same
// run and on the same inputs.
package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/alitto/pond/v2"
	"github.com/panjf2000/ants/v2"
	"golang.org/x/sync/errgroup"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/steal"
	"github.com/numapool/numapool/topology"
)

// A Contender is one way of running the workloads.
type Contender struct {
	Name string
	kind kind
	opts []pool.Option // numapool's configuration
}

type kind int

const (
	kindNumapool kind = iota
	kindGoroutines
	kindAnts
	kindPond
	kindErrgroup
	kindChanPool
	kindSequential
)

// Contenders returns every contender; spec, when set, gives the numapool
// contenders a synthetic topology.
func Contenders(spec string) []Contender {
	np := func(name string, opts ...pool.Option) Contender {
		opts = append(opts, pool.WithoutEnv())
		if spec != "" {
			opts = append(opts, pool.WithSpec(spec))
		}
		return Contender{Name: name, kind: kindNumapool, opts: opts}
	}
	return []Contender{
		np("numapool"),
		np("numapool-flat", pool.WithSteal(steal.Flat)),
		np("numapool-cross", pool.WithCrossNodeLoops()),
		np("numapool-threads", pool.WithBinding(pin.Threads)),
		np("numapool-cores", pool.WithBinding(pin.Cores)),
		np("numapool-none", pool.WithBinding(pin.None)),
		np("numapool-goroutines", pool.WithBinding(pin.Goroutines)),
		np("numapool-active", pool.WithBlockTime(-1)),
		{Name: "goroutines", kind: kindGoroutines},
		{Name: "ants", kind: kindAnts},
		{Name: "pond", kind: kindPond},
		{Name: "errgroup", kind: kindErrgroup},
		{Name: "chanpool", kind: kindChanPool},
		{Name: "sequential", kind: kindSequential},
	}
}

// Select returns the contenders named in a comma-separated list ("" for
// all), or an error naming an unknown one.
func Select(all []Contender, names string) ([]Contender, error) {
	if names == "" {
		return all, nil
	}
	var out []Contender
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		i := -1
		for k, c := range all {
			if c.Name == n {
				i = k
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("bench: unknown contender %q (have %s)", n, names2(all))
		}
		out = append(out, all[i])
	}
	return out, nil
}

func names2(cs []Contender) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.Name
	}
	return strings.Join(s, ", ")
}

// errNA marks a workload a contender cannot run; the reason is reported.
type errNA struct{ reason string }

func (e errNA) Error() string { return "n/a: " + e.reason }

// na returns the "cannot run" error.
func na(reason string) error { return errNA{reason} }

// IsNA reports whether err says a contender cannot run a workload.
func IsNA(err error) bool {
	var e errNA
	return errors.As(err, &e)
}

// runner is a started contender.
type runner struct {
	c       Contender
	workers int
	p       *pool.Pool
	ants    *ants.Pool
	pond    pond.Pool
	eg      *errgroup.Group
	tasks   chan func()
	chanWG  sync.WaitGroup
	wg      sync.WaitGroup // tasks given to submit

	// sizing is what the memory workloads size their arrays against
	// (memory returns it, from the machine unless set); facts is what the
	// last memory workload run reports beside its figure.
	sizing *memorySizing
	facts  *MemoryFacts
}

// memory returns the runner's memory sizing, the machine's unless the
// suite's configuration gave one.
func (r *runner) memory() memorySizing {
	if r.sizing == nil {
		s := sizingFor(topology.Discover(), 0, 0)
		r.sizing = &s
	}
	return *r.sizing
}

// start starts contender c. One numapool pool at a time:
// a second one idle beside it would take a CPU from it under the Active
// wait policy.
func start(c Contender) (*runner, error) {
	r := &runner{c: c, workers: runtime.GOMAXPROCS(0)}
	var err error
	switch c.kind {
	case kindNumapool:
		r.p, err = pool.New(c.opts...)
		if err == nil {
			r.workers = r.p.Workers()
		}
	case kindAnts:
		r.ants, err = ants.NewPool(r.workers)
	case kindPond:
		r.pond = pond.NewPool(r.workers)
	case kindErrgroup:
		r.eg = &errgroup.Group{}
		r.eg.SetLimit(r.workers)
	case kindChanPool:
		r.tasks = make(chan func(), 1024)
		for range r.workers {
			r.chanWG.Add(1)
			go func() {
				defer r.chanWG.Done()
				for t := range r.tasks {
					t()
				}
			}()
		}
	}
	return r, err
}

func (r *runner) stop() {
	switch r.c.kind {
	case kindNumapool:
		_ = r.p.Close()
	case kindAnts:
		_ = r.ants.ReleaseTimeout(10e9)
	case kindPond:
		r.pond.StopAndWait()
	case kindChanPool:
		close(r.tasks)
		r.chanWG.Wait()
	}
}

// submit runs fn on the contender, from outside it; wait waits for every
// submitted fn.
func (r *runner) submit(fn func()) {
	r.wg.Add(1)
	if r.c.kind == kindNumapool {
		// One closure per task, as for the others: the pool's task type
		// takes the worker.
		if err := r.p.Submit(context.Background(), func(*pool.Worker) { defer r.wg.Done(); fn() }); err != nil {
			panic(err)
		}
		return
	}
	task := func() { defer r.wg.Done(); fn() }
	switch r.c.kind {
	case kindGoroutines:
		go task()
	case kindAnts:
		if err := r.ants.Submit(task); err != nil {
			panic(err)
		}
	case kindPond:
		r.pond.Go(task)
	case kindErrgroup:
		r.eg.Go(func() error { task(); return nil })
	case kindChanPool:
		r.tasks <- task
	case kindSequential:
		task()
	}
}

// submitBlocking submits a task that runs block, which blocks its
// thread, and then then: on numapool marked with Worker.Block, as the
// package documents for work that blocks.
func (r *runner) submitBlocking(block, then func()) {
	if r.c.kind != kindNumapool {
		r.submit(func() { block(); then() })
		return
	}
	r.wg.Add(1)
	if err := r.p.Submit(context.Background(), func(w *pool.Worker) { defer r.wg.Done(); w.Block(block); then() }); err != nil {
		panic(err)
	}
}

func (r *runner) wait() { r.wg.Wait() }
