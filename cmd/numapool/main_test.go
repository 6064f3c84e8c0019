package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/numapool/numapool/bench"
	"github.com/numapool/numapool/topology"
)

// TestMain lets a test run the command in a child process (for taskset).
func TestMain(m *testing.M) {
	if os.Getenv("NUMAPOOL_TEST_RUN_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"topo", "--bogus"},
		{"topo", "extra"},
		{"topo", "--sysfs", "/nonexistent/dir"},
		{"topo", "--sysfs", file},
		{"topo", "--sysfs", t.TempDir()}, // readable, but no sys/ in it
		{"topo", "--spec", "2x"},
		{"topo", "--spec", "0x4"},
		{"topo", "--spec", "0;0"},
	} {
		code, stdout, stderr := runCmd(args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "numapool: ") {
			t.Errorf("numapool %q: code %d, stdout %q, stderr %q; want 2 and one line", args, code, stdout, stderr)
		}
	}
}

func TestTopoHuman(t *testing.T) {
	code, out, errs := runCmd("topo")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	for _, want := range []string{"available:", "node 0 cpus:", "package", "allowed:", "pinning:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestTopoSpecShowsTwoNodes(t *testing.T) {
	code, out, errs := runCmd("topo", "--spec", "2x1", "--json")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	var s topology.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.NUMANodeCount != 2 || len(s.NUMANodes) != 2 || s.Distances == nil {
		t.Errorf("--spec 2x1 gave %d nodes, distances %v", s.NUMANodeCount, s.Distances)
	}
}

// Every fixture read through the command matches hwloc's reading, checked
// by the fixtures' own compare.py when python3 is here.
func TestTopoSysfsFixturesPassCompare(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: compare.py cannot run")
	}
	archives, _ := filepath.Glob("../../topology/testdata/fixtures/*.tar.gz")
	if len(archives) == 0 {
		t.Fatal("no fixtures")
	}
	for _, a := range archives {
		name := strings.TrimSuffix(filepath.Base(a), ".tar.gz")
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if out, err := exec.Command("tar", "-xzf", a, "-C", dir).CombinedOutput(); err != nil {
				t.Skipf("tar: %v %s", err, out)
			}
			root := filepath.Join(dir, name)
			code, out, errs := runCmd("topo", "--sysfs", root, "--json")
			if code != 0 {
				t.Fatalf("code %d: %s", code, errs)
			}
			js := filepath.Join(dir, "out.json")
			if err := os.WriteFile(js, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			cmp := exec.Command(py, "../../topology/testdata/fixtures/compare.py", root, js, "--quiet")
			if res, err := cmp.CombinedOutput(); err != nil {
				t.Errorf("compare.py: %v\n%s", err, res)
			}
		})
	}
}

func TestTopoHonoursTaskset(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("taskset is Linux")
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("taskset not found")
	}
	allowed := topology.Discover().Allowed
	cpu := allowed.List()[allowed.Len()-1]
	cmd := exec.Command(taskset, "-c", strings.TrimSpace(topology.NewCPUSet(cpu).String()), os.Args[0], "topo", "--json")
	cmd.Env = append(os.Environ(), "NUMAPOOL_TEST_RUN_MAIN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v", err)
	}
	var s topology.Summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	if !s.AllowedCPUs.Equal(topology.NewCPUSet(cpu)) {
		t.Errorf("under taskset -c %d: allowed %s", cpu, s.AllowedCPUs)
	}
}

func TestExplain(t *testing.T) {
	code, out, errs := runCmd("explain", "--spec", "2x1", "--places", "cores", "--steal", "flat")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	for _, want := range []string{"2 workers on 2 nodes", "binding cores", "stealing flat", "worker 1", "start-up: New took", "to start 2 workers", "Close took"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"explain", "--places", "sockets"}, {"explain", "--steal", "x"}, {"explain", "--spec", "0x1"}, {"explain", "--workers", "-1"}} {
		if code, _, errs := runCmd(args...); code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: code %d, %q", args, code, errs)
		}
	}
}

func TestBenchCommand(t *testing.T) {
	code, out, errs := runCmd("bench", "--workload", "spawn,fib-20", "--contender", "numapool,goroutines,sequential", "--reps", "1", "--size", "0.02")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	for _, want := range []string{"numapool bench:", "spawn:", "fib-20:", "vs best other", "goroutines"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCmd("bench", "--workload", "spawn", "--mode", "numapool", "--reps", "1", "--size", "0.01", "--csv")
	if code != 0 || !strings.HasPrefix(out, "workload,contender,rep") || strings.Count(out, "\n") != 2 {
		t.Errorf("--mode --csv: code %d\n%s", code, out)
	}
	for _, args := range [][]string{
		{"bench", "--workload", "nope"}, {"bench", "--contender", "nope"}, {"bench", "--reps", "0"},
		{"bench", "--size", "huge"}, {"bench", "--spec", "0x1"}, {"bench", "--mode", "numapool", "--contender", "ants"},
	} {
		if code, _, errs := runCmd(args...); code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: code %d, %q", args, code, errs)
		}
	}
}

func TestBenchPlot(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "b.svg")
	if code, _, errs := runCmd("bench", "--workload", "reduce", "--contender", "numapool,sequential", "--reps", "1", "--size", "0.01", "--plot", svg); code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.HasPrefix(string(b), "<svg") {
		t.Fatalf("plot: %v", err)
	}
	if code, _, _ := runCmd("bench", "--plot", "x.png"); code != 2 {
		t.Errorf("--plot x.png: code %d", code)
	}
}

// Every command's help lists each of its flags with its help text, and
// bench's lists every workload and contender with a line about it; all
// three ways of asking succeed.
func TestHelpListsFlagsAndNames(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}, {c.name, "-h"}} {
			code, out, errs := runCmd(args...)
			if code != 0 || errs != "" {
				t.Errorf("numapool %q: code %d, stderr %q; want 0 and nothing", args, code, errs)
				continue
			}
			c.flags().VisitAll(func(f *flag.Flag) {
				_, usage := flag.UnquoteUsage(f)
				if !strings.Contains(out, "--"+f.Name) || !strings.Contains(out, usage) {
					t.Errorf("numapool %q lacks --%s or its text %q:\n%s", args, f.Name, usage, out)
				}
			})
			if c.name != "bench" {
				continue
			}
			for _, w := range bench.Workloads() {
				if !strings.Contains(out, w.Name) || !strings.Contains(out, w.About) {
					t.Errorf("bench help lacks workload %s (%s)", w.Name, w.About)
				}
			}
			for _, k := range bench.Contenders("") {
				if contenderAbout[k.Name] == "" || !strings.Contains(out, k.Name+"  ") {
					t.Errorf("bench help lacks a line about contender %s", k.Name)
				}
			}
		}
	}
	code, out, _ := runCmd("help")
	for _, c := range commands() {
		if !strings.Contains(out, c.name) || !strings.Contains(out, c.about) {
			t.Errorf("numapool help lacks %s: %s", c.name, out)
		}
	}
	if code != 0 {
		t.Errorf("numapool help: code %d", code)
	}
	for _, args := range [][]string{{"help", "nope"}, {"help", "bench", "topo"}} {
		if code, _, errs := runCmd(args...); code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: code %d, %q", args, code, errs)
		}
	}
}

// Flags that ask for different outputs or modes are refused, and the
// message names both.
func TestConflictingFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"bench", "--json", "--csv"}, []string{"--json", "--csv"}},
		{[]string{"bench", "--csv", "--json", "--workload", "spawn"}, []string{"--json", "--csv"}},
		{[]string{"bench", "--mode", "numapool", "--contender", "ants"}, []string{"--mode", "--contender"}},
		{[]string{"bench", "--scale", "--mode", "numapool"}, []string{"--scale", "--mode"}},
		{[]string{"bench", "--scale", "--csv"}, []string{"--scale", "--csv"}},
		{[]string{"bench", "--dry-run"}, []string{"--dry-run", "--scale"}},
		{[]string{"bench", "--placement", "scatter"}, []string{"--placement", "--scale"}},
		{[]string{"bench", "--scale", "--placement", "sideways", "--dry-run"}, []string{"sideways"}},
		{[]string{"bench", "--scale", "--contender", "numapool,numapool", "--dry-run"}, []string{"numapool is named twice"}},
		{[]string{"bench", "--report", "--size", "full"}, []string{"--report", "--size"}},
		{[]string{"bench", "--reps", "2", "--report"}, []string{"--report", "--reps"}},
		{[]string{"bench", "--scale", "--report", "--dry-run"}, []string{"--report", "--scale"}},
	} {
		code, out, errs := runCmd(tc.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: code %d, stdout %q, stderr %q; want 2 and one line", tc.args, code, out, errs)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%q: %q does not name %s", tc.args, errs, w)
			}
		}
	}
}

// The plan for a 2-socket machine of 64 cores and 128 threads: 1, 2, ...,
// 128 CPUs; compact fills node 0's cores, then their second threads, then
// node 1; scatter alternates nodes; the memory workload gets its bound.
func TestScaleDryRunPlansABigMachine(t *testing.T) {
	code, out, errs := runCmd("bench", "--scale", "--dry-run", "--spec", "2x32x2")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	for _, want := range []string{
		"8 points", "point 1: 1 CPU on node 0: CPUs 0 ", "point 6: 32 CPUs on node 0: CPUs 0,2,4,",
		"point 7: 64 CPUs on node 0: CPUs 0-63", "point 8: 128 CPUs on nodes 0,1: CPUs 0-127",
		"GOMAXPROCS=128 ", "--contender numapool,numapool-flat,goroutines,pond,sequential",
		"locality bound of triad: node 0's 64 CPUs, memory bound to node 0, then to node 1",
		"numactl --membind=1", "can be shown here, not run",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, ",sequential --reps") != 1 {
		t.Errorf("sequential should run at the first point only:\n%s", out)
	}
	_, out, _ = runCmd("bench", "--scale", "--dry-run", "--spec", "2x32x2", "--placement", "scatter", "--max-cpus", "4")
	for _, want := range []string{"3 points", "point 2: 2 CPUs on nodes 0,1: CPUs 0,64 ", "point 3: 4 CPUs on nodes 0,1: CPUs 0,2,64,66 "} {
		if !strings.Contains(out, want) {
			t.Errorf("scatter plan lacks %q:\n%s", want, out)
		}
	}
	// Running a synthetic machine larger than this process's CPUs is refused.
	if code, _, errs := runCmd("bench", "--scale", "--spec", "2x32x2"); code != 2 || !strings.Contains(errs, "--dry-run") {
		t.Errorf("--scale --spec 2x32x2 without --dry-run: code %d, %q", code, errs)
	}
}

// A real study on this machine: every point is a process of its own on
// exactly its CPUs with GOMAXPROCS set (runPoint checks what the process
// reports), and every row has a speedup over sequential.
func TestScaleRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the study binds each point's process, which needs Linux")
	}
	t.Setenv("NUMAPOOL_TEST_RUN_MAIN", "1") // the points re-run this binary as the command
	svg := filepath.Join(t.TempDir(), "s.svg")
	code, out, errs := runCmd("bench", "--scale", "--workload", "reduce,triad", "--contender", "numapool,goroutines",
		"--reps", "1", "--size", "0.01", "--json", "--plot", svg)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	var rep bench.ScaleReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	n := topology.Discover().Allowed.Len()
	if len(rep.Points) == 0 || rep.Points[len(rep.Points)-1].Workers != n || rep.Points[0].Workers != 1 {
		t.Fatalf("points %+v, want 1 .. %d", rep.Points, n)
	}
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		seen[r.Contender] = true
		if r.Speedup <= 0 || r.Efficiency <= 0 || r.Median <= 0 {
			t.Errorf("row %+v has no figure, speedup or efficiency", r)
		}
		if r.Contender == "sequential" && r.Workers != 1 {
			t.Errorf("sequential ran at %d workers", r.Workers)
		}
	}
	if !seen["numapool"] || !seen["goroutines"] || !seen["sequential"] {
		t.Errorf("rows for %v, want numapool, goroutines and the sequential baseline", seen)
	}
	if len(rep.Bounds) == 0 && len(rep.Notes) == 0 {
		t.Errorf("triad has neither a locality bound nor a note saying why not")
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "<polyline") && n > 1 {
		t.Errorf("plot: %v\n%s", err, b)
	}
}

// perfstat.sh refuses a mode named twice before it needs perf, and with
// perf it prints medians and ranges for every mode.
func TestPerfstatScript(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("perf is Linux")
	}
	script := "../../scripts/perfstat.sh"
	out, err := exec.Command(script, "numapool", "goroutines", "numapool").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "numapool is named twice") {
		t.Errorf("duplicate mode: %v, %s", err, out)
	}
	if _, err := exec.LookPath("perf"); err != nil {
		t.Skip("perf not installed")
	}
	if out, err := exec.Command("perf", "stat", "-e", "task-clock", "true").CombinedOutput(); err != nil {
		t.Skipf("perf stat cannot count here: %v %s", err, out)
	}
	cmd := exec.Command(script, "-n", "2", "-r", "1", "-s", "0.02", "-w", "reduce", "numapool", "goroutines")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	got := stdout.String()
	if strings.Count(stderr.String(), "perfstat: round") != 4 {
		t.Errorf("want 2 rounds of 2 modes:\n%s", stderr.String())
	}
	for _, row := range []string{"task-clock", "reduce (ms)"} {
		i := strings.Index(got, "\n"+row)
		if i < 0 {
			t.Errorf("no %s row:\n%s", row, got)
			continue
		}
		line, _, _ := strings.Cut(got[i+1:], "\n")
		if strings.Count(line, "[") != 2 || !strings.HasSuffix(line, "x") {
			t.Errorf("%s row wants a median [min-max] per mode and a ratio: %q", row, line)
		}
	}
	if !strings.Contains(got, "numapool") || !strings.Contains(got, "goroutines") {
		t.Errorf("output lacks a mode:\n%s", got)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"300MiB": 300 << 20, "1.5GiB": 3 << 29, "64MB": 64e6, "4096": 4096, "2 kib": 2048} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1MiB", "lots", "0"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q): no error", in)
		}
	}
}

// Counts read as English: one CPU, node, package, core, point or rep is
// singular, more are plural. numactl's "available: 1 nodes" line is
// copied as numactl prints it.
func TestCountsInEnglish(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"topo", "--spec", "1x1"}, []string{"machine:   1 CPU online (0); 1 package, 1 core", "available: 1 nodes (0)"}},
		{[]string{"topo", "--spec", "2x2"}, []string{"machine:   4 CPUs online (0-3); 2 packages, 4 cores"}},
		{[]string{"bench", "--scale", "--dry-run", "--spec", "1x1", "--reps", "1"}, []string{"1 point on the synthetic topology 1x1: 1 CPU allowed on 1 node", "; 1 rep, size quick per point"}},
		{[]string{"bench", "--scale", "--dry-run", "--spec", "2x2"}, []string{"3 points on the synthetic topology 2x2: 4 CPUs allowed on 2 nodes", "; 5 reps, size quick per point"}},
	} {
		code, out, errs := runCmd(c.args...)
		if code != 0 {
			t.Fatalf("%q: code %d: %s", c.args, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q lacks %q:\n%s", c.args, w, out)
			}
		}
	}
}
