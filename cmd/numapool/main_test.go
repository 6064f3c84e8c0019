package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
	for _, want := range []string{"2 workers on 2 node groups", "binding cores", "stealing flat", "worker 1"} {
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
