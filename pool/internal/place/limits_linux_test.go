package place

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"
)

func procStatus(uid, threads, capEff string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte("Name:\tx\nUid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid + "\nThreads:\t" + threads + "\nCapEff:\t" + capEff + "\n")}
}

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func rlimit(cur uint64) func() (unix.Rlimit, error) {
	return func() (unix.Rlimit, error) { return unix.Rlimit{Cur: cur, Max: cur}, nil }
}

// The kernel's limits, read from captured /proc and /sys/fs/cgroup trees:
// each names its file or rlimit, and the tightest cgroup of a hierarchy
// (the process's own or one above it) is the one given.
func TestThreadLimits(t *testing.T) {
	const user = "0000000000000000"
	identity := file("         0          0 4294967295\n")
	for _, tc := range []struct {
		name    string
		fs      fstest.MapFS
		nproc   uint64
		running int
		want    map[int]string // room: a part of what
	}{
		{
			name: "cgroup v2, the parent's limit is tighter",
			fs: fstest.MapFS{
				"proc/self/status":                    procStatus("1000", "7", user),
				"proc/self/uid_map":                   identity,
				"proc/self/cgroup":                    file("0::/job/step\n"),
				"sys/fs/cgroup/job/step/pids.max":     file("max\n"),
				"sys/fs/cgroup/job/step/pids.current": file("9\n"),
				"sys/fs/cgroup/job/pids.max":          file("100\n"),
				"sys/fs/cgroup/job/pids.current":      file("40\n"),
			},
			nproc: unix.RLIM_INFINITY, running: 7,
			want: map[int]string{60: "pids.max of 100 tasks (/sys/fs/cgroup/job/pids.max) less the 40"},
		},
		{
			name: "cgroup v1 pids",
			fs: fstest.MapFS{
				"proc/self/status":                           procStatus("1000", "3", user),
				"proc/self/uid_map":                          identity,
				"proc/self/cgroup":                           file("9:cpu,cpuacct:/x\n8:pids:/user.slice\n0::/\n"),
				"sys/fs/cgroup/pids/user.slice/pids.max":     file("500\n"),
				"sys/fs/cgroup/pids/user.slice/pids.current": file("20\n"),
			},
			nproc: unix.RLIM_INFINITY, running: 3,
			want: map[int]string{480: "/sys/fs/cgroup/pids/user.slice/pids.max"},
		},
		{
			name: "RLIMIT_NPROC counts the user's threads",
			fs: fstest.MapFS{
				"proc/self/status":  procStatus("1000", "4", user),
				"proc/self/uid_map": identity,
				"proc/1/status":     procStatus("0", "1", user),
				"proc/77/status":    procStatus("1000", "4", user),
				"proc/78/status":    procStatus("1000", "10", user),
				"proc/self/cgroup":  file("0::/\n"),
			},
			nproc: 64, running: 4,
			want: map[int]string{50: "RLIMIT_NPROC of 64 (ulimit -u) less the 14 threads of user 1000"},
		},
		{
			name: "root of the initial user namespace is not held to RLIMIT_NPROC",
			fs: fstest.MapFS{
				"proc/self/status":  procStatus("0", "4", user),
				"proc/self/uid_map": identity,
				"proc/77/status":    procStatus("0", "4", user),
			},
			nproc: 64, running: 4,
		},
		{
			name: "CAP_SYS_RESOURCE exempts a user from RLIMIT_NPROC",
			fs: fstest.MapFS{
				"proc/self/status":  procStatus("1000", "4", "0000000001000000"),
				"proc/self/uid_map": identity,
				"proc/77/status":    procStatus("1000", "4", user),
			},
			nproc: 64, running: 4,
		},
		{
			name: "root of another user namespace is held to RLIMIT_NPROC",
			fs: fstest.MapFS{
				"proc/self/status":  procStatus("0", "4", "000001ffffffffff"),
				"proc/self/uid_map": file("0 100000 65536\n"),
				"proc/77/status":    procStatus("0", "4", user),
			},
			nproc: 64, running: 4,
			want: map[int]string{60: "RLIMIT_NPROC of 64"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			running, bounds := threadLimits(tc.fs, rlimit(tc.nproc))
			if running != tc.running {
				t.Errorf("running %d, want %d", running, tc.running)
			}
			if len(bounds) != len(tc.want) {
				t.Fatalf("bounds %+v, want %d", bounds, len(tc.want))
			}
			for _, b := range bounds {
				if want, ok := tc.want[b.room]; !ok || !strings.Contains(b.what, want) {
					t.Errorf("bound %+v, want one of %v", b, tc.want)
				}
			}
		})
	}
}

// Without /proc nothing is known of the kernel's limits, and New checks
// the runtime's alone.
func TestThreadLimitsWithoutProc(t *testing.T) {
	running, bounds := threadLimits(fstest.MapFS{}, func() (unix.Rlimit, error) { return unix.Rlimit{}, errors.New("no") })
	if running != 1 || len(bounds) != 0 {
		t.Errorf("running %d, bounds %+v", running, bounds)
	}
}
