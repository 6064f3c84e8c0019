package pool

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// threadState returns the scheduling state of thread tid of this process
// (R running, S sleeping, D in an uninterruptible wait, ...), from
// /proc/self/task/TID/stat; false when it cannot be read.
func threadState(tid int) (byte, bool) {
	if tid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: the state
	// follows the last ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	return b[i+2], true
}

// threadCPUs: threadCPUTime reads threads' CPU clocks here.
const threadCPUs = true

// threadCPUTime returns the CPU time thread tid of this process has had, from
// its CPU clock (clock_gettime on the clock ID Linux gives a thread:
// ^tid<<3 | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED); false when it cannot
// be read.
func threadCPUTime(tid int) (time.Duration, bool) {
	if tid <= 0 {
		return 0, false
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^tid<<3|4|2), &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
