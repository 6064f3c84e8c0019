// Command numapool shows the machine's NUMA topology and, as the project
// grows, runs numapool's benchmark suite.
//
// Usage:
//
//	numapool topo [--json] [--sysfs DIR] [--spec SPEC]
//	numapool bench [--workload W] [--contender C] [--mode C] [--reps N] [--size S] [--spec SPEC] [--json|--csv]
//	numapool explain [--workers N] [--places P] [--steal MODE] [--spec SPEC] [--required-placement]
//
// Exit status: 0 on success, 1 when the command fails while running, 2 on
// bad usage (an unknown flag, an unreadable directory, a bad spec), with a
// one-line reason on standard error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// usageError is bad input from the command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage: numapool COMMAND [flags]

commands:
  topo    show NUMA nodes, CPUs, caches, distances and what this process may use
          --json        print the topology as JSON (the hwloc fixture schema)
          --sysfs DIR   read a captured tree (DIR holds sys/ and proc/)
          --spec SPEC   a synthetic topology mapped onto the allowed CPUs:
                        2x4 (nodes x CPUs), 2x4x2 (nodes x cores x threads),
                        or "0-1;2-3" (OS CPUs per node)
  bench   run the comparison suite (default: quick, about 45 s on 2 cores)
          --workload W,... --contender C,... --mode C --reps N --size quick|full|F
          --spec SPEC --json --csv --plot FILE.svg
  explain start a pool and show where its workers are and how they are bound
          --workers N --places P --steal MODE --spec SPEC --required-placement
          (defaults from NUMAPOOL_NUM_WORKERS, _PLACES, _STEAL, _TOPOLOGY, _NODES,
           _WAIT_POLICY, _BLOCKTIME)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	err := dispatch(args, stdout)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "numapool:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func dispatch(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command given (try: numapool topo); commands: topo, explain, bench"}
	}
	switch args[0] {
	case "topo":
		return topoCmd(args[1:], stdout)
	case "explain":
		return explainCmd(args[1:], stdout)
	case "bench":
		return benchCmd(args[1:], stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q; commands: topo, explain, bench", args[0])}
}

// parseFlags parses fs from args, turning every complaint into one line.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageError{fs.Name() + ": " + "see numapool help"}
		}
		return usageError{fs.Name() + ": " + err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}
