package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/numapool/numapool/launch"
	"github.com/numapool/numapool/topology"
)

// srun runs n tasks of PROGRAM with the srun options given, each task's
// output in its own file, and returns those files' paths.
func srun(t *testing.T, env []string, n int, opts []string, program ...string) []string {
	t.Helper()
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o777)
	args := append([]string{"-n", fmt.Sprint(n), "--kill-on-bad-exit=1", "--output", filepath.Join(dir, "out.%t")}, opts...)
	launcherRun(t, env, "srun", append(args, program...)...)
	var files []string
	for i := range n {
		files = append(files, filepath.Join(dir, fmt.Sprint("out.", i)))
	}
	return files
}

// srun -n 2 --cpu-bind=cores: each rank's pool has exactly the CPU it was
// given and one worker there, and explain says so.
func TestSlurmCoresPerRank(t *testing.T) {
	needSlurm(t)
	bin := binaries(t)
	rs := byRank(t, readReports(t, srun(t, nil, 2, []string{"--cpu-bind=cores"}, filepath.Join(bin, "probe"))), 2)
	disjoint(t, rs)
	for _, r := range rs {
		checkRank(t, r)
		core := r.Allowed
		if len(r.Workers) != core.Len() || len(r.Groups) != 1 {
			t.Errorf("rank %d: %d workers in %d groups on its core %s", r.Launch.Rank, len(r.Workers), len(r.Groups), core)
		}
		for _, w := range r.Workers {
			if !w.Bound.Equal(core) || !w.RanOn.IsSubsetOf(core) {
				t.Errorf("rank %d: worker %d bound to %s, ran on %s; its core is %s", r.Launch.Rank, w.ID, w.Bound, w.RanOn, core)
			}
		}
		if r.Launch.Launcher != launch.Slurm || r.Launch.Size != 2 || !r.Launch.TaskCPUs.Equal(core) {
			t.Errorf("rank %d: launch %+v", r.Launch.Rank, r.Launch)
		}
		wantLines(t, fmt.Sprint("rank ", r.Launch.Rank, "'s Explain"), r.Explain,
			fmt.Sprintf("launcher: slurm job %s step %s, rank %d (local %d) of 2, cpu-bind=%s: CPUs given %d",
				r.Launch.JobID, r.Launch.StepID, r.Launch.Rank, r.Launch.LocalRank, r.Launch.CPUBind, core.Len()),
			fmt.Sprintf("mask %s)", launch.HexMask(core)))
		noWarnings(t, r)
	}

	// The CLI shows the same for each rank.
	for i, f := range srun(t, nil, 2, []string{"--cpu-bind=cores"}, filepath.Join(bin, "numapool"), "explain") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out := string(b)
		t.Logf("numapool explain, rank %d:\n%s", i, out)
		wantLines(t, fmt.Sprint("numapool explain of rank ", i), out,
			"; topology", fmt.Sprintf("rank %d (local %d) of 2, cpu-bind=mask_cpu:", i, i), "launcher: slurm job")
		if m := regexp.MustCompile(`numapool: (\d+) workers? on`).FindStringSubmatch(out); m == nil || m[1] != fmt.Sprint(rs[i].Allowed.Len()) {
			t.Errorf("rank %d: explain's worker count %v, want %d", i, m, rs[i].Allowed.Len())
		}
		if strings.Contains(out, "warning:") {
			t.Errorf("rank %d: unexpected warning", i)
		}
	}
}

// srun -n 1 -c 2, bound or not: the pool takes what it is allowed.
func TestSlurmCPUsPerTask(t *testing.T) {
	bin, on := slurmTwoCPUs(t)
	for _, bind := range []string{"--cpu-bind=cores", "--cpu-bind=none"} {
		t.Run(bind, func(t *testing.T) {
			rs := byRank(t, readReports(t, srun(t, nil, 1, []string{"-c", "2", bind}, filepath.Join(bin, "probe"))), 1)
			r := rs[0]
			checkRank(t, r)
			if bind == "--cpu-bind=none" && !r.Allowed.Equal(on) {
				t.Errorf("unbound: given %s, want every online CPU %s", r.Allowed, on)
			}
			if bind == "--cpu-bind=cores" && r.Allowed.Len() < 2 {
				t.Errorf("-c 2: given %s", r.Allowed)
			}
			if want := min(r.Allowed.Len(), r.GOMAXPROCS); len(r.Workers) != want {
				t.Errorf("%d workers on %s (GOMAXPROCS %d), want %d", len(r.Workers), r.Allowed, r.GOMAXPROCS, want)
			}
			if r.Launch.CPUsPerTask != 2 {
				t.Errorf("CPUsPerTask %d", r.Launch.CPUsPerTask)
			}
			wantLines(t, "Explain", r.Explain, "cpus-per-task 2")
			if r.Allowed.Len() == 2 {
				noWarnings(t, r)
			}
		})
	}
}

// sbatch of scripts/cluster-job.sh, the README's job script: its output
// file holds each task's numapool explain and the probe's report.
func TestSlurmBatchJob(t *testing.T) {
	needSlurm(t)
	bin := binaries(t)
	script, err := filepath.Abs("../scripts/cluster-job.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o777)
	out := launcherRun(t, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")},
		"sbatch", "--wait", "--parsable", "--chdir", dir, script, filepath.Join(bin, "probe"))
	id := strings.TrimSpace(strings.Split(strings.TrimSpace(out), ";")[0])
	b, err := os.ReadFile(filepath.Join(dir, "numapool-"+id+".out"))
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	text := string(b)
	t.Logf("job %s's output:\n%s", id, text)
	wantLines(t, "the job's output", text, "0: numapool: ", "0: launcher: slurm job "+id+" step 0, rank 0 (local 0) of 1, cpu-bind=", "cpus-per-task 2")
	rs := byRank(t, parseReports(t, text), 1)
	checkRank(t, rs[0])
	if rs[0].Launch.JobID != id || rs[0].Launch.StepID != "1" {
		t.Errorf("launch %+v, want job %s step 1", rs[0].Launch, id)
	}
}

// A rank given the CPUs of one synthetic node gets one worker group, with
// launch.Synthetic and with NUMAPOOL_TOPOLOGY alike: the spec describes
// the machine, and each rank keeps the synthetic CPUs on its own.
func TestSlurmSyntheticNodes(t *testing.T) {
	bin, on := slurmTwoCPUs(t)
	spec := fmt.Sprintf("%dx1", on.Len()) // one synthetic node per online CPU
	for _, how := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"-machine-spec", spec}},
		{[]string{"NUMAPOOL_TOPOLOGY=" + spec}, nil},
	} {
		cmd := append([]string{filepath.Join(bin, "probe")}, how.args...)
		rs := byRank(t, readReports(t, srun(t, how.env, 2, []string{"--cpu-bind=threads"}, cmd...)), 2)
		disjoint(t, rs)
		for _, r := range rs {
			checkRank(t, r)
			node := slices.Index(on.List(), r.Allowed.First())
			if r.Allowed.Len() != 1 || len(r.Groups) != 1 || r.Groups[0] != node || len(r.Workers) != 1 {
				t.Errorf("%v%v: rank %d on CPU %s: groups %v and %d workers, want node %d alone", how.env, how.args, r.Launch.Rank, r.Allowed, r.Groups, len(r.Workers), node)
			}
			wantLines(t, "Explain", r.Explain, "topology synthetic:"+spec, "1 worker on 1 node")
			noWarnings(t, r)
		}
	}
}

// slurmTwoCPUs skips the test without a Slurm or with one online CPU, and
// returns the test binaries' directory and the online CPUs.
func slurmTwoCPUs(t *testing.T) (bin string, on topology.CPUSet) {
	t.Helper()
	needSlurm(t)
	bin, on = binaries(t), online(t)
	if on.Len() < 2 {
		t.Skip("one online CPU")
	}
	return bin, on
}

// The Slurm probe runs once for all the tests that ask, and tells a
// Slurm that answers from one that fails, answers nothing up or does not
// answer in time (a fake sinfo first on PATH plays each).
func TestSlurmProbe(t *testing.T) {
	calls := 0
	p := slurmProbe{check: func() string { calls++; return "none here" }}
	for range 3 {
		if why := p.missing(); why != "none here" {
			t.Errorf("missing() = %q", why)
		}
	}
	if calls != 1 {
		t.Errorf("the probe ran %d times for three tests, want once", calls)
	}

	if runtime.GOOS != "linux" {
		t.Skip("the fake sinfo is a shell script")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, c := range []struct {
		script, want string
	}{
		{"echo idle; echo mixed", ""},
		{"echo down", "no Slurm answers here"},
		{"echo 'Unable to contact slurm controller' >&2; exit 1", "no Slurm answers here (sinfo: exit status 1"},
		{"exec sleep 10", "no Slurm answered sinfo within 200ms"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "sinfo"), []byte("#!/bin/sh\n"+c.script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		why := checkSlurm(200 * time.Millisecond)
		if c.want == "" && why != "" || c.want != "" && !strings.HasPrefix(why, c.want) {
			t.Errorf("sinfo doing %q: %q, want %q", c.script, why, c.want)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("sinfo doing %q: the probe took %v, past its limit of 200ms", c.script, took)
		}
	}
}
