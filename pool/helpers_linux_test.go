package pool

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time of the calling thread; ok is false where it
// cannot be read.
func threadCPU() (d time.Duration, ok bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// threadsCPU is the CPU time the threads tids have run, from
// /proc/self/task/TID/schedstat (its first field, in ns); ok is false
// when one cannot be read.
func threadsCPU(tids []int) (d time.Duration, ok bool) {
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
		if err != nil {
			return 0, false
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		d += time.Duration(ns)
	}
	return d, true
}

// sleepInKernel blocks the calling thread for d in nanosleep, as a read
// from a slow device does: the Go runtime does not see it coming.
func sleepInKernel(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
