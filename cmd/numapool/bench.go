package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/numapool/numapool/bench"
	"github.com/numapool/numapool/topology"
)

const benchSynopsis = `numapool bench [--workload W,...] [--contender C,...] [--mode C] [--reps N]
                      [--size quick|full|F | --report] [--spec SPEC] [--json | --csv] [--plot FILE.svg]
       numapool bench --scale [--workload W,...] [--contender C,...] [--placement compact|scatter]
                      [--max-cpus N] [--reps N] [--size S] [--spec SPEC] [--dry-run] [--json] [--plot FILE.svg]`

// Bench's sizes. Without flags the comparison suite is a first look that
// ends in about a minute on two CPUs and still runs every workload on
// every contender: three repetitions, the fewest that give a range, of a
// twentieth of the full inputs. The performance report and the scaling
// study are written from the larger suite, whose medians move less; it
// is --report, and a study's default.
const (
	lookSize, lookReps     = "0.05", 3
	reportSize, reportReps = "quick", 5
)

// benchOpts are bench's flags; benchFlags makes them.
type benchOpts struct {
	workloads, contenders, mode *string
	reps                        *int
	size, spec, plot            *string
	asJSON, asCSV               *bool
	scale, dryRun, point        *bool
	report                      *bool
	placement                   *string
	maxCPUs                     *int
	llc, memBudget              *string
}

func benchFlags() (*flag.FlagSet, benchOpts) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	return fs, benchOpts{
		workloads:  fs.String("workload", "", "the workloads `W,...` to run, comma-separated (default: all; with --scale: "+strings.Join(scaleDefaultWorkloads, ",")+")"),
		contenders: fs.String("contender", "", "the contenders `C,...` to run, comma-separated (default: all; with --scale: "+strings.Join(scaleDefaultContenders, ",")+")"),
		mode:       fs.String("mode", "", "run one contender `C` alone, without warm-up (for perf stat)"),
		reps:       fs.Int("reps", lookReps, "`N` repetitions per contender and workload (with --scale per point, and "+strconv.Itoa(reportReps)+" unless given)"),
		size:       fs.String("size", lookSize, "input size `S`: quick (half of full), full, or a scale factor such as 0.2 (with --scale "+reportSize+" unless given)"),
		report:     fs.Bool("report", false, "run the suite docs/performance.md is written from: --size "+reportSize+" --reps "+strconv.Itoa(reportReps)),
		spec:       fs.String("spec", "", "synthetic topology `SPEC` for the numapool contenders, e.g. 2x2 (with --scale: the machine to plan for)"),
		asJSON:     fs.Bool("json", false, "print every repetition (with --scale: the study) as JSON instead of tables"),
		asCSV:      fs.Bool("csv", false, "print every repetition as CSV instead of tables"),
		plot:       fs.String("plot", "", "also write an SVG chart of the results to `FILE.svg`"),
		scale:      fs.Bool("scale", false, "run a scaling study: every point 1, 2, 4, ... up to all allowed CPUs in a fresh process"),
		placement:  fs.String("placement", "compact", "with --scale, which CPUs a point gets: `P` is compact (fill a node first) or scatter (round robin over nodes)"),
		maxCPUs:    fs.Int("max-cpus", 0, "with --scale, stop at `N` CPUs (default: all allowed)"),
		dryRun:     fs.Bool("dry-run", false, "with --scale, print the plan (points, CPU sets, commands) without running it"),
		llc:        fs.String("llc", "", "size the memory workloads against last-level caches of `BYTES` in all (e.g. 300MiB) instead of this machine's"),
		memBudget:  fs.String("mem-budget", "", "the most the memory workloads' arrays may take together, `BYTES` (e.g. 4GiB; default: a quarter of the allowed nodes' memory, at most 16 GiB)"),
		point:      fs.Bool("point", false, "run one point of --scale in this process and print it as JSON (--scale starts these itself)"),
	}
}

// benchCmd runs the comparison suite, or with --scale a scaling study.
func benchCmd(args []string, stdout io.Writer) error {
	fs, o := benchFlags()
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for _, pair := range [][]string{{"json", "csv"}, {"mode", "contender"}, {"scale", "mode"}, {"scale", "csv"}, {"scale", "point"},
		{"point", "mode"}, {"point", "json"}, {"point", "csv"}, {"point", "plot"},
		{"report", "size"}, {"report", "reps"}, {"report", "scale"}, {"report", "point"}} {
		if err := exclusive(fs, pair...); err != nil {
			return err
		}
	}
	if !*o.scale {
		for _, name := range []string{"placement", "max-cpus", "dry-run"} {
			if isSet(fs, name) {
				return usageError{fmt.Sprintf("bench: --%s needs --scale", name)}
			}
		}
	}
	reportDefaults(fs, o)
	if *o.scale {
		return scaleCmd(o, stdout)
	}
	if *o.point {
		return pointCmd(o, stdout)
	}
	workloads, contenders, mode, reps, size, spec := o.workloads, o.contenders, o.mode, o.reps, o.size, o.spec
	asJSON, asCSV, plot := o.asJSON, o.asCSV, o.plot
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
	for _, f := range []struct {
		name string
		text string
		to   *int64
	}{{"llc", *o.llc, &cfg.LLCBytes}, {"mem-budget", *o.memBudget, &cfg.MemoryBudget}} {
		if f.text == "" {
			continue
		}
		n, err := parseBytes(f.text)
		if err != nil {
			return fmt.Errorf("--%s %q: %w", f.name, f.text, err)
		}
		*f.to = n
	}
	if *mode == "" { // under perf stat (--mode) standard error is perf's
		cfg.Progress = newSuiteProgress(os.Stderr, isTerminal(os.Stderr), len(wls), time.Now).update
	}
	var rt func(when string) // prints the CPU-to-CPU round trip (roundtrip.go)
	var notes map[string]string
	if !*asJSON && !*asCSV {
		t := topology.Discover()
		addHostDetails(&t.Machine)
		fmt.Fprintf(stdout, "numapool bench: %s allowed (%s) on %s, GOMAXPROCS %d, %s; size %s, %s, %s\n",
			plural(t.Allowed.Len(), "CPU"), t.Allowed, plural(len(t.ComputeNodes()), "node"), runtime.GOMAXPROCS(0), strings.TrimSpace(t.Machine.Model),
			*size, plural(*reps, "rep"), time.Now().Format("2006-01-02"))
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
		if *mode == "" {
			fmt.Fprintln(stdout, handOffLine()) // what a hand-off to a worker's thread costs here (handoff.go)
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
	fmt.Fprintln(stdout, "vs sequential: speedup over one goroutine running the same work;")
	// bench.VerdictRule, in lines a terminal shows whole.
	fmt.Fprintln(stdout, "verdict: numapool's default against the best contender of another family by median")
	fmt.Fprintln(stdout, "(sequential aside) leads when its worst repetition beats that contender's best, trails when")
	fmt.Fprintln(stdout, "its best is beaten by that contender's worst, and ties when their ranges (min-max) overlap.")
	return nil
}

// reportDefaults gives --report, and a scaling study, the report's size
// and repetitions wherever the command line gives none.
func reportDefaults(fs *flag.FlagSet, o benchOpts) {
	if !*o.report && !*o.scale {
		return
	}
	if !isSet(fs, "size") {
		*o.size = reportSize
	}
	if !isSet(fs, "reps") {
		*o.reps = reportReps
	}
}

// isSet reports whether the flag was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

// parseBytes reads a size such as 300MiB, 1.5GiB, 64MB or 4096 (bytes).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult, num := 1.0, strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(num), strings.ToUpper(u.suffix)) {
			mult, num = u.mult, strings.TrimSpace(num[:len(num)-len(u.suffix)])
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("want a positive size such as 300MiB, 1.5GiB or 4096")
	}
	return int64(v * mult), nil
}
