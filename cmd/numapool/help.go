package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/numapool/numapool/bench"
)

// A command is one of numapool's subcommands. Its flags are made by the
// same function for running and for help, so that help cannot leave a
// flag out or describe one the command does not have.
type command struct {
	name     string
	about    string
	synopsis string
	flags    func() *flag.FlagSet // the command's flags, unparsed
	more     func(w io.Writer)    // what help prints after the flags, if anything
	run      func(args []string, stdout io.Writer) error
}

func commands() []command {
	return []command{
		{
			name:     "topo",
			about:    "show NUMA nodes, CPUs, caches, distances and what this process may use",
			synopsis: "numapool topo [--json] [--sysfs DIR] [--spec SPEC]",
			flags:    func() *flag.FlagSet { fs, _ := topoFlags(); return fs },
			run:      topoCmd,
		},
		{
			name:     "bench",
			about:    "run the comparison suite, or a scaling study with --scale",
			synopsis: benchSynopsis,
			flags:    func() *flag.FlagSet { fs, _ := benchFlags(); return fs },
			more:     benchNames,
			run:      benchCmd,
		},
		{
			name:     "explain",
			about:    "start a pool and show where its workers are and how they are bound",
			synopsis: "numapool explain [--workers N] [--places P] [--steal MODE] [--spec SPEC] [--required-placement]",
			flags:    func() *flag.FlagSet { fs, _ := explainFlags(); return fs },
			more: func(w io.Writer) {
				fmt.Fprintln(w, "\nUnset flags take their values from NUMAPOOL_NUM_WORKERS, _PLACES, _STEAL,")
				fmt.Fprintln(w, "_TOPOLOGY, _NODES, _WAIT_POLICY, _BLOCKTIME and _DISPLAY_AFFINITY.")
			},
			run: explainCmd,
		},
	}
}

func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// writeUsage prints the overview: every command with its synopsis.
func writeUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: numapool COMMAND [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.about)
	}
	fmt.Fprintln(w, "\n`numapool help COMMAND` or `numapool COMMAND --help` lists a command's flags.")
	fmt.Fprintln(w, "Exit status: 0 on success, 1 when a command fails while running, 2 on bad usage.")
}

// writeHelp prints one command's synopsis, its flags with their help
// text and defaults, and what the command adds (bench: the names its
// flags take).
func writeHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "numapool %s: %s\n\nusage: %s\n\nflags:\n", c.name, c.about, c.synopsis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	c.flags().VisitAll(func(f *flag.Flag) {
		value, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if value != "" {
			name += " " + value
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	})
	tw.Flush()
	if c.more != nil {
		c.more(w)
	}
}

// helpCmd is `numapool help [COMMAND]`.
func helpCmd(args []string, stdout io.Writer) error {
	switch len(args) {
	case 0:
		writeUsage(stdout)
		return nil
	case 1:
		c, ok := findCommand(args[0])
		if !ok {
			return usageError{fmt.Sprintf("help: unknown command %q; commands: %s", args[0], commandNames())}
		}
		writeHelp(stdout, c)
		return nil
	}
	return usageError{fmt.Sprintf("help: takes one command, got %d arguments", len(args))}
}

// contenderAbout says in one line what each contender of the suite is.
var contenderAbout = map[string]string{
	"numapool":            "numapool with its defaults: hierarchical stealing, workers bound to their node's CPUs",
	"numapool-flat":       "numapool with flat stealing (one level over all workers, as Tokio)",
	"numapool-threads":    "numapool with each worker bound to one hardware thread",
	"numapool-cores":      "numapool with each worker bound to one core's SMT siblings",
	"numapool-none":       "numapool with locked but unbound worker threads",
	"numapool-goroutines": "numapool's scheduler on plain goroutines: no locked threads, no binding",
	"numapool-active":     "numapool whose idle workers spin instead of parking",
	"numapool-cross":      "numapool whose dry nodes help lagging ones with loop pieces (WithCrossNodeLoops)",
	"goroutines":          "a goroutine per task, waited for with a sync.WaitGroup",
	"ants":                "github.com/panjf2000/ants/v2 with GOMAXPROCS workers",
	"pond":                "github.com/alitto/pond/v2 with GOMAXPROCS workers",
	"errgroup":            "golang.org/x/sync/errgroup with SetLimit(GOMAXPROCS)",
	"chanpool":            "GOMAXPROCS goroutines fed from one channel",
	"sequential":          "the same work on one goroutine, without a pool",
}

// benchNames prints the workloads and contenders that --workload and
// --contender take, one line each.
func benchNames(w io.Writer) {
	fmt.Fprintln(w, "\nworkloads (--workload):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, wl := range bench.Workloads() {
		dir := "lower is better"
		if wl.Higher {
			dir = "higher is better"
		}
		fmt.Fprintf(tw, "  %s\t%s (%s, %s)\n", wl.Name, wl.About, wl.Unit, dir)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ncontenders (--contender, --mode):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range bench.Contenders("") {
		about := contenderAbout[c.Name]
		if about == "" {
			about = "(not described)"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, about)
	}
	tw.Flush()
	fmt.Fprintln(w, "\n--scale runs a scaling study: the workloads at 1, 2, 4, ... up to all allowed CPUs,")
	fmt.Fprintln(w, "each point a fresh process bound to the point's CPUs with GOMAXPROCS set to their")
	fmt.Fprintf(w, "count; default workloads %s, contenders %s.\n", strings.Join(scaleDefaultWorkloads, ","), strings.Join(scaleDefaultContenders, ","))
}
