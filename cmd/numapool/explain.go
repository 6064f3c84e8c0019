package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/steal"
)

// explainOpts are explain's flags; explainFlags makes them.
type explainOpts struct {
	workers      *int
	places, mode *string
	spec         *string
	required     *bool
}

func explainFlags() (*flag.FlagSet, explainOpts) {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	return fs, explainOpts{
		workers:  fs.Int("workers", 0, "start `N` workers (default: min(allowed CPUs, GOMAXPROCS))"),
		places:   fs.String("places", "", "bind each worker to `P`: threads, cores, ll_caches, numa_domains, none or goroutines, optionally followed by :performance or :efficiency (one kind of CPU)"),
		mode:     fs.String("steal", "", "steal in `MODE`: hierarchical or flat"),
		spec:     fs.String("spec", "", "a synthetic topology `SPEC` such as 2x2 (see numapool help topo)"),
		required: fs.Bool("required-placement", false, "fail when placement cannot be honoured"),
	}
}

// explainCmd starts a pool as the flags and NUMAPOOL_* variables ask,
// prints its placement (Pool.Explain), closes it, and prints how long
// New and Close took.
func explainCmd(args []string, stdout io.Writer) error {
	fs, o := explainFlags()
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	workers, places, mode, spec, required := o.workers, o.places, o.mode, o.spec, o.required
	var opts []pool.Option
	if *workers != 0 {
		opts = append(opts, pool.WithWorkers(*workers))
	}
	if *places != "" {
		binding, kind, hasKind := strings.Cut(*places, ":")
		b, err := pin.ParseBinding(binding)
		if err != nil {
			return usageError{"--places: " + err.Error()}
		}
		opts = append(opts, pool.WithBinding(b))
		if hasKind {
			opts = append(opts, pool.WithCPUKind(kind))
		}
	}
	if *mode != "" {
		m, err := steal.ParseMode(*mode)
		if err != nil {
			return usageError{"--steal: " + err.Error()}
		}
		opts = append(opts, pool.WithSteal(m))
	}
	if *spec != "" {
		opts = append(opts, pool.WithSpec(*spec))
	}
	if *required {
		opts = append(opts, pool.WithRequiredPlacement())
	}
	t0 := time.Now()
	p, err := pool.New(opts...)
	if err != nil {
		return usageError{err.Error()}
	}
	started := time.Since(t0)
	count := fmt.Sprintf("%d workers", p.Size())
	if p.Size() == 1 {
		count = "1 worker"
	}
	fmt.Fprint(stdout, p.Explain())
	t1 := time.Now()
	err = p.Close()
	fmt.Fprintf(stdout, "start-up: New took %v to start %s (each bound and asleep); Close took %v\n",
		started.Round(time.Microsecond), count, time.Since(t1).Round(time.Microsecond))
	return err
}
