package pool

import (
	"bytes"
	"os"
	"strconv"
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
