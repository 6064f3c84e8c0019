// Command numapool shows the machine's NUMA topology, explains where a
// pool's workers run, and runs numapool's benchmark suite and scaling
// study.
//
// Usage:
//
//	numapool topo [--json] [--sysfs DIR] [--spec SPEC]
//	numapool bench [--workload W] [--contender C] [--mode C] [--reps N] [--size S] [--spec SPEC] [--json|--csv] [--plot FILE.svg]
//	numapool bench --scale [--workload W] [--contender C] [--placement compact|scatter] [--max-cpus N] [--dry-run] [--json] [--plot FILE.svg]
//	numapool explain [--workers N] [--places P] [--steal MODE] [--spec SPEC] [--required-placement]
//	numapool help [COMMAND]
//
// `numapool help COMMAND` and `numapool COMMAND --help` print the
// command's flags with their help text and exit 0.
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

// helpRequested is what parseFlags returns for -h or --help: the command
// prints its help and succeeds.
type helpRequested struct{ command string }

func (helpRequested) Error() string { return "help requested" }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	err := dispatch(args, stdout)
	var hr helpRequested
	if errors.As(err, &hr) {
		c, _ := findCommand(hr.command)
		writeHelp(stdout, c)
		return 0
	}
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
		return usageError{"no command given (try: numapool help); commands: " + commandNames()}
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return helpCmd(args[1:], stdout)
	}
	c, ok := findCommand(args[0])
	if !ok {
		return usageError{fmt.Sprintf("unknown command %q; commands: %s", args[0], commandNames())}
	}
	return c.run(args[1:], stdout)
}

// parseFlags parses fs from args, turning every complaint into one line
// and -h or --help into helpRequested.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequested{fs.Name()}
		}
		return usageError{fs.Name() + ": " + err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

// exclusive returns a usage error naming the first two of the flags
// that were set on the command line, if more than one was: they ask for
// different things, and neither silently wins.
func exclusive(fs *flag.FlagSet, names ...string) error {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		for _, n := range names {
			if f.Name == n {
				set = append(set, "--"+n)
			}
		}
	})
	if len(set) > 1 {
		return usageError{fmt.Sprintf("%s: %s and %s exclude each other", fs.Name(), set[0], set[1])}
	}
	return nil
}
