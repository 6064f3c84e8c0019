package topology

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// The main goroutine stays on the process's main thread, so that TestMain
// can narrow that thread's mask the way a pool's worker does when Go
// happens to run it there.
func init() { runtime.LockOSThread() }

const narrowedMainEnv = "NUMAPOOL_TEST_NARROWED_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(narrowedMainEnv) != "" {
		allowed, err := readAffinity()
		if err != nil || allowed.Len() < 2 {
			os.Exit(3)
		}
		first := allowed.First()
		var one unix.CPUSet
		one.Set(first)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			os.Exit(4)
		}
	}
	os.Exit(m.Run())
}

// A pinned main thread (the process's "pid" thread) does not narrow what
// Discover reports: it answers with the mask the process started with.
func TestDiscoverIgnoresPinnedMainThread(t *testing.T) {
	if os.Getenv(narrowedMainEnv) != "" {
		// In the child: the main thread is pinned to one CPU now.
		var main unix.CPUSet
		if err := unix.SchedGetaffinity(unix.Getpid(), &main); err != nil {
			t.Fatal(err)
		}
		if main.Count() != 1 {
			t.Fatalf("main thread has %d CPUs, want it narrowed to 1", main.Count())
		}
		if got, want := Discover().Allowed.String(), os.Getenv(narrowedMainEnv); got != want {
			t.Errorf("with the main thread pinned, Discover allows %s, want %s", got, want)
		}
		return
	}
	allowed, err := readAffinity()
	if err != nil {
		t.Fatal(err)
	}
	if allowed.Len() < 2 {
		t.Skipf("only %s allowed: nothing to narrow", allowed)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiscoverIgnoresPinnedMainThread$", "-test.v")
	cmd.Env = append(os.Environ(), narrowedMainEnv+"="+allowed.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
