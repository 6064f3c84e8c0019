package main

import (
	"strconv"
	"testing"
)

// Without flags the suite is the quick look; --report and a scaling study
// take the report's size and repetitions, each unless the command line
// gives its own.
func TestBenchSizes(t *testing.T) {
	for _, c := range []struct {
		args       []string
		size, reps string
	}{
		{nil, "0.05", "3"},
		{[]string{"--size", "0.2"}, "0.2", "3"},
		{[]string{"--report"}, "quick", "5"},
		{[]string{"--scale"}, "quick", "5"},
		{[]string{"--scale", "--reps", "2", "--size", "full"}, "full", "2"},
		{[]string{"--scale", "--size", "0.1"}, "0.1", "5"},
	} {
		fs, o := benchFlags()
		if err := parseFlags(fs, c.args); err != nil {
			t.Fatal(err)
		}
		reportDefaults(fs, o)
		if *o.size != c.size || strconv.Itoa(*o.reps) != c.reps {
			t.Errorf("bench %q: --size %s --reps %d, want --size %s --reps %s", c.args, *o.size, *o.reps, c.size, c.reps)
		}
	}
}
