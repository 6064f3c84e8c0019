package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/steal"
)

// explainCmd starts a pool as the flags and NUMAPOOL_* variables ask,
// prints its placement (Pool.Explain) and closes it.
func explainCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	workers := fs.Int("workers", 0, "number of workers")
	places := fs.String("places", "", "threads, cores, ll_caches, numa_domains, none or goroutines")
	mode := fs.String("steal", "", "hierarchical or flat")
	spec := fs.String("spec", "", "synthetic topology")
	required := fs.Bool("required-placement", false, "fail when placement cannot be honoured")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var opts []pool.Option
	if *workers != 0 {
		opts = append(opts, pool.WithWorkers(*workers))
	}
	if *places != "" {
		b, err := pin.ParseBinding(*places)
		if err != nil {
			return usageError{"--places: " + err.Error()}
		}
		opts = append(opts, pool.WithBinding(b))
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
	p, err := pool.New(opts...)
	if err != nil {
		return usageError{err.Error()}
	}
	fmt.Fprint(stdout, p.Explain())
	return p.Close()
}
