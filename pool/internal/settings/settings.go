// Package settings reads the NUMAPOOL_* environment as OpenMP's runtime
// reads OMP_*: the parsers of the values that are not plain counts or
// lists, and the warning for a NUMAPOOL_* variable that is no setting,
// which names the nearest one (a misspelt setting must not be ignored in
// silence). Which variables there are, and what each sets, is the pool's
// (options.go); each parser's error says what was wanted, and the pool
// puts the variable's name and value in front.
package settings

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ParseWaitPolicy parses NUMAPOOL_WAIT_POLICY, "passive" or "active"
// (case-insensitive), and reports whether it is active.
func ParseWaitPolicy(s string) (active bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "passive":
		return false, nil
	case "active":
		return true, nil
	}
	return false, fmt.Errorf("unknown wait policy %q (want passive or active)", s)
}

// ParseBlockTime parses a block time as NUMAPOOL_BLOCKTIME gives it: a
// duration with its unit (200us, 1ms), a plain number of milliseconds
// (as KMP_BLOCKTIME), or "infinite" (never sleep), returned as -1.
func ParseBlockTime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "infinite") {
		return -1, nil
	}
	if n, err := strconv.ParseUint(s, 10, 31); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad block time %q (want 200us, 1ms, a number of ms, or infinite)", s)
	}
	return d, nil
}

// ParseWatch parses a watch's interval (NUMAPOOL_MACHINE_WATCH,
// NUMAPOOL_BLOCK_WATCH): a duration, a number of milliseconds as
// NUMAPOOL_BLOCKTIME takes, or 0 for off.
func ParseWatch(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 10, 31); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration such as 1s or 200ms, a number of ms, or 0 for off")
	}
	return d, nil
}

// ParseBool parses a boolean setting as OpenMP's: true or false in any
// case, or 1 or 0.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("want true or false, not %q", s)
}

// harness are the prefixes of the variables numapool's own tests, CI
// scripts and VM runs set, which are not settings and not mistakes.
var harness = []string{"NUMAPOOL_TEST_", "NUMAPOOL_VM_", "NUMAPOOL_REQUIRE_"}

// Unknown returns a warning for each NUMAPOOL_* variable of env (as
// os.Environ gives it) that is none of known and not the harness's,
// naming the nearest of known; sorted.
func Unknown(env, known []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "NUMAPOOL_") || slices.Contains(known, name) ||
			slices.ContainsFunc(harness, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		out = append(out, fmt.Sprintf("%s is not a numapool setting (did you mean %s?)", name, Nearest(name, known)))
	}
	slices.Sort(out)
	return out
}

// Nearest returns the name of names closest to s by edit distance.
func Nearest(s string, names []string) string {
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

// warned holds the warnings already printed: each goes out once per
// process, however many pools it makes.
var warned sync.Map

// WarnOnce prints each of msgs to w that it has not printed before.
func WarnOnce(w io.Writer, msgs []string) {
	for _, m := range msgs {
		if _, dup := warned.LoadOrStore(m, true); !dup {
			fmt.Fprintf(w, "numapool: warning: %s\n", m)
		}
	}
}

// Forget forgets the warnings printed, so that they are printed again
// (tests).
func Forget() { warned.Clear() }
