package pool

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The environment's settings beyond the options: a NUMAPOOL_* variable
// the pool does not know is a warning (a misspelled setting must not be
// ignored in silence), and NUMAPOOL_DISPLAY_AFFINITY prints where the
// workers are when a pool starts (OpenMP's OMP_DISPLAY_AFFINITY).

// envDisplayAffinity is true or false (case-insensitive; also 1 or 0).
const envDisplayAffinity = "NUMAPOOL_DISPLAY_AFFINITY"

// settings are the NUMAPOOL_* variables the pool reads.
var settings = []string{envNumWorkers, envPlaces, envSteal, envTopology, envNodes,
	envWaitPolicy, envBlockTime, envDisplayAffinity, envMachineWatch}

// envMachineWatch is the machine monitor's interval (WithMachineWatch):
// a time.ParseDuration duration, or 0 for off.
const envMachineWatch = "NUMAPOOL_MACHINE_WATCH"

// applyWatchEnv sets the monitor's interval from NUMAPOOL_MACHINE_WATCH
// unless WithMachineWatch set it.
func (c *config) applyWatchEnv(lookup func(string) (string, bool)) error {
	v, ok := lookup(envMachineWatch)
	v = strings.TrimSpace(v)
	if c.noEnv || c.watchSet || !ok || v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if v == "0" {
		d, err = 0, nil
	}
	if err != nil || d < 0 {
		return fmt.Errorf("pool: %s=%q: want a duration such as 1s or 200ms, or 0 for off", envMachineWatch, v)
	}
	c.watch = d
	return nil
}

// harness are the prefixes of the variables numapool's own tests, CI
// scripts and VM runs set, which are not settings and not mistakes.
var harness = []string{"NUMAPOOL_TEST_", "NUMAPOOL_VM_", "NUMAPOOL_REQUIRE_"}

// environ lists the environment as os.Environ does: a variable so that
// tests can give another.
var environ = os.Environ

// unknownSettings returns a warning for each NUMAPOOL_* variable of env
// that is neither a setting nor the harness's, naming the nearest
// setting.
func unknownSettings(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "NUMAPOOL_") || slices.Contains(settings, name) ||
			slices.ContainsFunc(harness, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		out = append(out, fmt.Sprintf("%s is not a numapool setting (did you mean %s?)", name, nearest(name, settings)))
	}
	slices.Sort(out)
	return out
}

// nearest returns the name of names closest to s by edit distance.
func nearest(s string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		if d := editDistance(s, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// warned holds the warnings already printed: each goes to stderr once per
// process, however many pools it makes.
var warned sync.Map

// warnOnce prints each of msgs to w that it has not printed before.
func warnOnce(w io.Writer, msgs []string) {
	for _, m := range msgs {
		if _, dup := warned.LoadOrStore(m, true); !dup {
			fmt.Fprintf(w, "numapool: warning: %s\n", m)
		}
	}
}

// parseBool parses NUMAPOOL_DISPLAY_AFFINITY's values, as OpenMP's
// booleans: true or false in any case, or 1 or 0.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("want true or false, not %q", s)
}

// stderr is where the pool prints its warnings and the affinity display:
// a variable so that tests can read them.
var stderr io.Writer = os.Stderr
