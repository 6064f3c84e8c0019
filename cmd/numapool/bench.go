package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/numapool/numapool/bench"
	"github.com/numapool/numapool/topology"
)

// benchCmd runs the comparison suite.
func benchCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	workloads := fs.String("workload", "", "comma-separated workloads (default: all)")
	contenders := fs.String("contender", "", "comma-separated contenders (default: all)")
	mode := fs.String("mode", "", "run one contender alone, without warm-up (for perf stat)")
	reps := fs.Int("reps", 5, "repetitions per contender and workload")
	size := fs.String("size", "quick", "quick (about 45 s on 2 cores), full, or a scale factor such as 0.5")
	spec := fs.String("spec", "", "synthetic topology for the numapool contenders, e.g. 2x2")
	asJSON := fs.Bool("json", false, "print every repetition as JSON instead of tables")
	asCSV := fs.Bool("csv", false, "print every repetition as CSV instead of tables")
	plot := fs.String("plot", "", "also write an SVG chart of the results to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *reps < 1 || *reps > 1000 {
		return usageError{fmt.Sprintf("--reps %d: want 1..1000", *reps)}
	}
	scale, err := parseScale(*size)
	if err != nil {
		return err
	}
	if *spec != "" {
		if _, err := topology.Synthetic(*spec, topology.Discover()); err != nil {
			return usageError{"--spec: " + err.Error()}
		}
	}
	wls, err := bench.SelectWorkloads(*workloads)
	if err != nil {
		return usageError{err.Error()}
	}
	names := *contenders
	if *mode != "" {
		if names != "" {
			return usageError{"--mode and --contender exclude each other"}
		}
		names = *mode
	}
	cs, err := bench.Select(bench.Contenders(*spec), names)
	if err != nil {
		return usageError{err.Error()}
	}
	if *mode != "" && len(cs) != 1 {
		return usageError{"--mode takes one contender"}
	}
	if *plot != "" && !strings.HasSuffix(*plot, ".svg") {
		return usageError{fmt.Sprintf("--plot %q: only SVG is written; name the file *.svg", *plot)}
	}
	cfg := bench.Config{Workloads: wls, Contenders: cs, Reps: *reps, Scale: scale, Alone: *mode != ""}
	if isTerminal(os.Stderr) && *mode == "" {
		cfg.Progress = progressBar(os.Stderr)
	}
	var rt func(when string) // prints the CPU-to-CPU round trip (roundtrip.go)
	var notes map[string]string
	if !*asJSON && !*asCSV {
		t := topology.Discover()
		addHostDetails(&t.Machine)
		fmt.Fprintf(stdout, "numapool bench: %d CPUs allowed (%s) on %d node(s), GOMAXPROCS %d, %s; size %s, %d reps, %s\n",
			t.Allowed.Len(), t.Allowed, len(t.ComputeNodes()), runtime.GOMAXPROCS(0), strings.TrimSpace(t.Machine.Model), *size, *reps, time.Now().Format("2006-01-02"))
		if *spec != "" {
			fmt.Fprintf(stdout, "numapool contenders run on the synthetic topology %s\n", *spec)
		}
		if a, b, ok := roundTripPair(t); ok && *mode == "" && runtime.GOMAXPROCS(0) > 1 {
			rt = func(when string) {
				if d, err := roundTrip(a, b); err != nil {
					fmt.Fprintf(stdout, "a cache line from CPU %d to %d and back, %s: not measured (%v)\n", a, b, when, err)
				} else {
					fmt.Fprintf(stdout, "a cache line from CPU %d to %d and back, %s: %d ns\n", a, b, when, d.Nanoseconds())
				}
			}
			rt("before the run")
			notes = map[string]string{}
			cfg.BeforeRound = roundTripsBetweenRounds(a, b, notes)
		}
	}
	results, err := bench.Run(cfg)
	if err != nil {
		return err
	}
	if *plot != "" {
		f, err := os.Create(*plot)
		if err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		err = bench.WriteSVG(f, bench.Summarize(results, wls), wls)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--plot %s: %w", *plot, err)
		}
	}
	switch {
	case *asJSON:
		return bench.WriteJSON(stdout, results)
	case *asCSV:
		return bench.WriteCSV(stdout, results)
	}
	bench.WriteNotedTables(stdout, bench.Summarize(results, wls), wls, notes)
	if rt != nil {
		rt("after it")
	}
	fmt.Fprintln(stdout, "\nvs best other: how many times better than the best contender of another family in this run")
	fmt.Fprintln(stdout, "(numapool's configurations are one family; >1 leads all of them);")
	fmt.Fprintln(stdout, "vs sequential: speedup over one goroutine running the same work.")
	return nil
}

func parseScale(s string) (float64, error) {
	switch s {
	case "quick":
		return 0.5, nil
	case "full":
		return 1, nil
	}
	var v float64
	if _, err := fmt.Sscanf(s, "%g", &v); err != nil || v <= 0 || v > 10 {
		return 0, usageError{fmt.Sprintf("--size %q: want quick, full or a factor in (0, 10]", s)}
	}
	return v, nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func progressBar(w io.Writer) func(done, total int, what string) {
	return func(done, total int, what string) {
		const width = 30
		filled := width * done / max(total, 1)
		fmt.Fprintf(w, "\r[%s%s] %d/%d %-40.40s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, what)
		if done == total {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}
