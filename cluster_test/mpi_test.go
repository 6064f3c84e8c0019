package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numapool/numapool/launch"
)

// mpirun runs np ranks of PROGRAM with the mpirun options given and
// returns the files Open MPI wrote their output to.
func mpirun(t *testing.T, np int, opts []string, program ...string) []string {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(np), "--output-filename", dir}, opts...)
	// Root may run mpirun in CI; a machine without ssh runs it locally.
	env := []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_plm_rsh_agent="}
	launcherRun(t, env, "mpirun", append(args, program...)...)
	files, err := filepath.Glob(filepath.Join(dir, "*", "rank.*", "stdout"))
	if err != nil || len(files) != np {
		t.Fatalf("output files %v (%v), want %d", files, err, np)
	}
	return files
}

func TestMPIBindToCore(t *testing.T) {
	needMPI(t)
	bin := binaries(t)
	rs := byRank(t, readReports(t, mpirun(t, 2, []string{"--bind-to", "core"}, filepath.Join(bin, "probe"))), 2)
	disjoint(t, rs)
	on := online(t)
	for _, r := range rs {
		checkRank(t, r)
		if on.Len() >= 2 && r.Allowed.Equal(on) {
			t.Errorf("rank %d: --bind-to core gave it every CPU %s", r.Launch.Rank, on)
		}
		if len(r.Workers) != min(r.Allowed.Len(), r.GOMAXPROCS) {
			t.Errorf("rank %d: %d workers on %s", r.Launch.Rank, len(r.Workers), r.Allowed)
		}
		if r.Launch.Launcher != launch.OpenMPI || r.Launch.Size != 2 || r.Launch.CPUBind != "core" {
			t.Errorf("rank %d: launch %+v", r.Launch.Rank, r.Launch)
		}
		wantLines(t, "Explain", r.Explain, fmt.Sprintf("launcher: openmpi job %s, rank %d (local %d) of 2, bind-to core: CPUs given %d",
			r.Launch.JobID, r.Launch.Rank, r.Launch.LocalRank, r.Allowed.Len()))
		noWarnings(t, r)
	}
}

// --bind-to none: each rank's pool takes every CPU, and Explain warns that
// the ranks' workers share them.
func TestMPIBindToNone(t *testing.T) {
	needMPI(t)
	bin := binaries(t)
	on := online(t)
	rs := byRank(t, readReports(t, mpirun(t, 2, []string{"--bind-to", "none"}, filepath.Join(bin, "probe"))), 2)
	for _, r := range rs {
		checkRank(t, r)
		if !r.Allowed.Equal(on) {
			t.Errorf("rank %d: unbound but given %s of %s", r.Launch.Rank, r.Allowed, on)
		}
		wantLines(t, "Explain", r.Explain, "bind-to none", "warning: 2 tasks on this node and no CPU binding")
	}
}

// mpirun --map-by socket --bind-to socket, one rank per socket.
func TestMPIPerSocket(t *testing.T) {
	needMPI(t)
	bin := binaries(t)
	files := mpirun(t, 1, []string{"--map-by", "socket", "--bind-to", "socket"}, filepath.Join(bin, "numapool"), "explain")
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	t.Logf("numapool explain under mpirun --map-by socket --bind-to socket:\n%s", out)
	wantLines(t, "explain", out, "launcher: openmpi job", "rank 0 (local 0) of 1, bind-to socket")
	if strings.Contains(out, "warning:") {
		t.Error("unexpected warning")
	}
}
