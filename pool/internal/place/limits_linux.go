package place

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// osThreadBounds returns the threads this process runs and the kernel's
// limits on the threads it may start (threadLimits).
func osThreadBounds() (running int, bounds []threadBound) {
	return threadLimits(os.DirFS("/"), getrlimitNproc)
}

func getrlimitNproc() (unix.Rlimit, error) {
	var rl unix.Rlimit
	err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl)
	return rl, err
}

// threadLimits reads, under the root fsys: the threads of this process
// (proc/self/status Threads:), the pids.max of its cgroup and of each
// cgroup above it less their pids.current (v2 and v1), and RLIMIT_NPROC
// less the threads its user runs. A file that is missing or malformed
// adds no limit: the runtime's own limit is still checked.
func threadLimits(fsys fs.FS, getrlimit func() (unix.Rlimit, error)) (running int, bounds []threadBound) {
	st, err := fs.ReadFile(fsys, "proc/self/status")
	if err != nil {
		return 1, nil
	}
	self := parseTaskStatus(st)
	running = max(self.threads, 1)
	bounds = append(bounds, pidsBounds(fsys)...)
	if b, ok := nprocBound(fsys, self, getrlimit); ok {
		bounds = append(bounds, b)
	}
	return running, bounds
}

// taskStatus is what threadLimits reads from a /proc/PID/status
// (proc_pid_status(5)):
//
//	Uid:	1000	1000	1000	1000
//	Threads:	5
//	CapEff:	0000000000000000
type taskStatus struct {
	threads int    // Threads: (0 if absent)
	ruid    int    // the real user ID, the first field of Uid: (-1 if absent)
	capEff  uint64 // CapEff:, a hexadecimal mask of capability bits
}

func parseTaskStatus(b []byte) taskStatus {
	st := taskStatus{ruid: -1}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		switch key {
		case "Threads":
			st.threads, _ = strconv.Atoi(fields[0])
		case "Uid":
			if v, err := strconv.Atoi(fields[0]); err == nil {
				st.ruid = v
			}
		case "CapEff":
			st.capEff, _ = strconv.ParseUint(fields[0], 16, 64)
		}
	}
	return st
}

// pidsBounds reads the pids controller's limit of the process's cgroup
// and of every cgroup above it (a parent's pids.max bounds its whole
// subtree, and its pids.current counts the subtree's tasks, threads
// included), with the hierarchy mounted at sys/fs/cgroup as systemd and
// container runtimes mount it. /proc/self/cgroup lines are
// "hierarchy-ID:controller-list:cgroup-path" (cgroups(7)): "0::/a/b" is
// the cgroup v2 one, read under sys/fs/cgroup/a/b; "4:pids:/a/b" the v1
// pids one, read under sys/fs/cgroup/pids/a/b. A pids.max of "max" is no
// limit. The tightest limit of each hierarchy is returned.
func pidsBounds(fsys fs.FS) []threadBound {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return nil
	}
	var bounds []threadBound
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var mount string
		switch {
		case parts[0] == "0" && parts[1] == "":
			mount = "sys/fs/cgroup"
		case slices.Contains(strings.Split(parts[1], ","), "pids"):
			mount = "sys/fs/cgroup/pids"
		default:
			continue
		}
		var tight *threadBound
		for dir := path.Join(mount, path.Clean("/"+parts[2])); ; dir = path.Dir(dir) {
			if bd, ok := pidsBound(fsys, dir); ok && (tight == nil || bd.room < tight.room) {
				tight = &bd
			}
			if dir == mount {
				break
			}
		}
		if tight != nil {
			bounds = append(bounds, *tight)
		}
	}
	return bounds
}

// pidsBound reads dir's pids.max and pids.current; false when there is no
// limit there ("max", missing or malformed files).
func pidsBound(fsys fs.FS, dir string) (threadBound, bool) {
	maxB, err := fs.ReadFile(fsys, path.Join(dir, "pids.max"))
	if err != nil {
		return threadBound{}, false
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(maxB)))
	if err != nil { // "max": no limit
		return threadBound{}, false
	}
	curB, err := fs.ReadFile(fsys, path.Join(dir, "pids.current"))
	if err != nil {
		return threadBound{}, false
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(curB)))
	if err != nil {
		return threadBound{}, false
	}
	return threadBound{
		room: limit - cur,
		what: fmt.Sprintf("the cgroup's pids.max of %d tasks (/%s/pids.max) less the %d in the cgroup (pids.current)", limit, dir, cur),
	}, true
}

// Capability bits of CapEff (capability.h).
const (
	capSysAdmin    = 21
	capSysResource = 24
)

// nprocBound is RLIMIT_NPROC less the threads the process's real user
// runs: the kernel counts every thread of the user against it when it
// creates one (clone(2), copy_process), except for root of the initial
// user namespace and for a task with CAP_SYS_RESOURCE or CAP_SYS_ADMIN in
// that namespace, for which the limit is not enforced. Only the initial
// namespace's capabilities count, so a process in another user namespace
// (its /proc/self/uid_map is not the identity "0 0 4294967295") is taken
// to be under the limit whatever its capabilities. The user's threads are
// those of the processes /proc shows, which in a PID namespace may be
// fewer than the kernel counts.
func nprocBound(fsys fs.FS, self taskStatus, getrlimit func() (unix.Rlimit, error)) (threadBound, bool) {
	rl, err := getrlimit()
	// A limit past the Go runtime's largest (an int32) bounds nothing.
	if err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur >= math.MaxInt32 || self.ruid < 0 {
		return threadBound{}, false
	}
	if initUserNS(fsys) && (self.ruid == 0 || self.capEff&(1<<capSysAdmin|1<<capSysResource) != 0) {
		return threadBound{}, false
	}
	n := userThreads(fsys, self.ruid)
	return threadBound{
		room: int(rl.Cur) - n,
		what: fmt.Sprintf("RLIMIT_NPROC of %d (ulimit -u) less the %d threads of user %d", rl.Cur, n, self.ruid),
	}, true
}

// initUserNS reports whether the process is in the initial user
// namespace, whose uid_map maps every ID onto itself.
func initUserNS(fsys fs.FS) bool {
	b, err := fs.ReadFile(fsys, "proc/self/uid_map")
	if err != nil {
		return true // a kernel without user namespaces
	}
	return slices.Equal(strings.Fields(string(b)), []string{"0", "0", "4294967295"})
}

// userThreads counts the threads of the processes of real user uid.
func userThreads(fsys fs.FS, uid int) int {
	entries, err := fs.ReadDir(fsys, "proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join("proc", e.Name(), "status"))
		if err != nil {
			continue // the process ended
		}
		if st := parseTaskStatus(b); st.ruid == uid {
			n += st.threads
		}
	}
	return n
}
