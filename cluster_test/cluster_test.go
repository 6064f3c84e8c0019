// Package cluster_test runs numapool under real launchers, one pool per
// process: Slurm's srun and sbatch (a one-node Slurm started by
// scripts/slurm-local.sh; scripts/cluster-suite.sh runs it all) and Open
// MPI's mpirun. Every rank runs testdata/probe, which starts a pool,
// records where each worker's tasks ran and how its thread was bound, and
// reports it as JSON. A test fails if a rank's pool binds a worker outside
// the CPUs its launcher gave it, or runs a task there.
//
// Without a responding Slurm (sinfo, asked once per run) or without
// mpirun the tests skip, unless NUMAPOOL_REQUIRE_SLURM=1 or
// NUMAPOOL_REQUIRE_MPI=1 asks them to fail instead.
package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numapool/numapool/launch"
	"github.com/numapool/numapool/topology"
)

// report is what testdata/probe prints (its Report).
type report struct {
	Allowed    topology.CPUSet `json:"allowed"`
	Launch     launch.Info     `json:"launch"`
	Groups     []int           `json:"groups"`
	GOMAXPROCS int             `json:"gomaxprocs"`
	Warnings   []string        `json:"warnings"`
	Explain    string          `json:"explain"`
	Error      string          `json:"error"`
	Workers    []struct {
		ID         int             `json:"id"`
		Node       int             `json:"node"`
		Bound      topology.CPUSet `json:"bound"`
		ThreadMask topology.CPUSet `json:"thread_mask"`
		RanOn      topology.CPUSet `json:"ran_on"`
		Tasks      int             `json:"tasks"`
	} `json:"workers"`
}

var (
	buildOnce sync.Once
	binDir    string // holds probe and numapool
	buildErr  error
)

// binaries builds testdata/probe and the numapool command once.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "numapool-cluster-")
		if buildErr != nil {
			return
		}
		// Readable by the daemons that start the ranks.
		_ = os.Chmod(binDir, 0o755)
		goCmd, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("no go command to build the rank programs with: %v", err)
			return
		}
		for pkg, name := range map[string]string{"./testdata/probe": "probe", "../cmd/numapool": "numapool"} {
			out, err := exec.Command(goCmd, "build", "-o", filepath.Join(binDir, name), pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// need skips the test when a launcher is missing, or fails it when the
// environment variable require is set to 1.
func need(t *testing.T, require, why string) {
	t.Helper()
	if os.Getenv(require) == "1" {
		t.Fatalf("%s (and %s=1)", why, require)
	}
	t.Skipf("%s (set %s=1 to fail instead)", why, require)
}

// slurm answers whether a Slurm responds here, once for the whole run:
// Slurm is up before the tests start (scripts/slurm-local.sh starts it
// first) and stays so, and with sinfo installed but no controller each
// probe waits out sinfo's message timeout, about 10 s.
var slurm = slurmProbe{check: func() string { return checkSlurm(sinfoLimit()) }}

// sinfoLimit is how long the probe waits for sinfo. A Slurm that answers
// does so in milliseconds, so a run that may skip gives up after 2 s
// rather than wait out the message timeout of a controller that is not
// there; one that must not skip (NUMAPOOL_REQUIRE_SLURM=1, as CI runs it
// with daemons just started) waits 15 s before it fails.
func sinfoLimit() time.Duration {
	if os.Getenv("NUMAPOOL_REQUIRE_SLURM") == "1" {
		return 15 * time.Second
	}
	return 2 * time.Second
}

// slurmProbe runs check once and keeps its answer: "" when Slurm
// responds, else why not.
type slurmProbe struct {
	once  sync.Once
	check func() string
	why   string
}

func (p *slurmProbe) missing() string {
	p.once.Do(func() { p.why = p.check() })
	return p.why
}

// checkSlurm asks sinfo, for at most limit, for the nodes' states and
// returns "" when one is up, or why no Slurm answers.
func checkSlurm(limit time.Duration) string {
	if _, err := exec.LookPath("sinfo"); err != nil {
		return "no sinfo: Slurm is not installed (scripts/slurm-local.sh starts one)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sinfo", "-h", "-o", "%T").Output()
	if ctx.Err() != nil {
		return fmt.Sprintf("no Slurm answered sinfo within %v (scripts/slurm-local.sh starts one)", limit)
	}
	if err != nil || !regexp.MustCompile(`idle|mix|alloc|complet`).Match(out) {
		return fmt.Sprintf("no Slurm answers here (sinfo: %v %q; scripts/slurm-local.sh starts one)", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// needSlurm skips the test, or fails it under NUMAPOOL_REQUIRE_SLURM=1,
// unless a Slurm responds.
func needSlurm(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("Slurm runs on Linux")
	}
	if why := slurm.missing(); why != "" {
		need(t, "NUMAPOOL_REQUIRE_SLURM", why)
	}
}

func needMPI(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the MPI tests run on Linux")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		need(t, "NUMAPOOL_REQUIRE_MPI", "no mpirun: Open MPI is not installed (apt-get install openmpi-bin)")
	}
}

// launcherRun runs a launcher command with a deadline and returns its
// output, failing the test when it fails.
func launcherRun(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	t.Logf("%s %s", name, strings.Join(args, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// readReports reads the probe's JSON line from each file.
func readReports(t *testing.T, files []string) []report {
	t.Helper()
	var rs []report
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, parseReports(t, string(b))...)
	}
	return rs
}

// parseReports finds the probe's JSON lines in text, with or without a
// "N: " label in front.
func parseReports(t *testing.T, text string) []report {
	t.Helper()
	var rs []report
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "{")
		if i < 0 {
			continue
		}
		js := line[i:]
		var r report
		err := json.Unmarshal([]byte(js), &r)
		// srun --label cuts a long line into pieces of its buffer's size,
		// each with the label again: join them until the report parses.
		for label := line[:i]; err != nil && label != "" && sc.Scan(); {
			js += strings.TrimPrefix(sc.Text(), label)
			err = json.Unmarshal([]byte(js), &r)
		}
		if err != nil {
			t.Fatalf("probe line %q: %v", js, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// checkRank asserts what must hold for every rank: the pool started,
// every worker ran, its binding and its thread's mask are inside the CPUs
// the launcher gave the process, and so is every CPU its tasks ran on.
func checkRank(t *testing.T, r report) {
	t.Helper()
	name := fmt.Sprintf("rank %d", r.Launch.Rank)
	if r.Error != "" {
		t.Fatalf("%s: %s", name, r.Error)
	}
	if r.Allowed.IsEmpty() || !r.Allowed.Equal(r.Launch.Mask) {
		t.Errorf("%s: allowed %s, but launch.Detect says mask %s", name, r.Allowed, r.Launch.Mask)
	}
	if len(r.Workers) == 0 {
		t.Fatalf("%s: no workers", name)
	}
	for _, w := range r.Workers {
		if w.Tasks == 0 {
			t.Errorf("%s: worker %d ran no task", name, w.ID)
		}
		if !w.Bound.IsSubsetOf(r.Allowed) {
			t.Errorf("%s: worker %d bound to %s, outside the CPUs given %s", name, w.ID, w.Bound, r.Allowed)
		}
		if w.ThreadMask.IsEmpty() || !w.ThreadMask.IsSubsetOf(r.Allowed) {
			t.Errorf("%s: worker %d's thread mask %s is not inside the CPUs given %s", name, w.ID, w.ThreadMask, r.Allowed)
		}
		if w.RanOn.IsEmpty() || !w.RanOn.IsSubsetOf(r.Allowed) {
			t.Errorf("%s: worker %d ran on CPUs %s, not inside the CPUs given %s", name, w.ID, w.RanOn, r.Allowed)
		}
		if !w.Bound.IsEmpty() && !w.RanOn.IsSubsetOf(w.Bound) {
			t.Errorf("%s: worker %d ran on CPUs %s outside its binding %s", name, w.ID, w.RanOn, w.Bound)
		}
	}
	t.Logf("%s: given %s, %d workers in groups %v, bound %s, ran on %s", name, r.Allowed, len(r.Workers), r.Groups, bounds(r), ranOn(r))
}

func bounds(r report) string {
	var s []string
	for _, w := range r.Workers {
		s = append(s, w.Bound.String())
	}
	return strings.Join(s, " ")
}

func ranOn(r report) topology.CPUSet {
	var all topology.CPUSet
	for _, w := range r.Workers {
		all = all.Or(w.RanOn)
	}
	return all
}

// byRank orders reports by rank and checks there is one per rank 0..n-1.
func byRank(t *testing.T, rs []report, n int) []report {
	t.Helper()
	slices.SortFunc(rs, func(a, b report) int { return a.Launch.Rank - b.Launch.Rank })
	if len(rs) != n {
		t.Fatalf("%d reports, want %d", len(rs), n)
	}
	for i, r := range rs {
		if r.Launch.Rank != i {
			t.Fatalf("reports of ranks %v, want 0..%d", ranks(rs), n-1)
		}
	}
	return rs
}

func ranks(rs []report) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.Launch.Rank)
	}
	return out
}

// disjoint checks that the ranks were given CPUs no other rank has.
func disjoint(t *testing.T, rs []report) {
	t.Helper()
	var seen topology.CPUSet
	for _, r := range rs {
		if r.Allowed.Intersects(seen) {
			t.Errorf("rank %d was given %s, shared with another rank", r.Launch.Rank, r.Allowed)
		}
		seen = seen.Or(r.Allowed)
	}
}

func wantLines(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func noWarnings(t *testing.T, r report) {
	t.Helper()
	if len(r.Warnings) > 0 || strings.Contains(r.Explain, "warning:") {
		t.Errorf("rank %d: unexpected warnings %q\n%s", r.Launch.Rank, r.Warnings, r.Explain)
	}
}

func online(t *testing.T) topology.CPUSet {
	t.Helper()
	pc := topology.ReadProcessCPUs()
	if pc.Online.IsEmpty() {
		t.Skip("cannot read the online CPUs")
	}
	return pc.Online
}

// Without a launcher, a pool in a process narrowed by taskset says so and
// warns about more workers than CPUs.
func TestExplainUnderTaskset(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("taskset is Linux")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	on := online(t)
	if on.Len() < 2 {
		t.Skip("one online CPU: taskset cannot narrow the process")
	}
	bin := binaries(t)
	cpu := on.List()[on.Len()-1]
	out := launcherRun(t, []string{"NUMAPOOL_NUM_WORKERS=3"}, "taskset", "-c", fmt.Sprint(cpu), filepath.Join(bin, "numapool"), "explain")
	wantLines(t, "explain under taskset", out,
		fmt.Sprintf("launcher: affinity mask narrower than the online CPUs (taskset, numactl or the parent process): CPUs given 1 of %d online (CPU %d, mask %s)",
			on.Len(), cpu, launch.HexMask(topology.NewCPUSet(cpu))),
		fmt.Sprintf("warning: 3 workers for the 1 CPU this process was given (%d)", cpu))
}
