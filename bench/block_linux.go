package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// blockIn blocks the calling thread for d in a system call (nanosleep),
// as a read from a slow device or a network service does: the Go runtime
// hands the thread's processor on, but a worker locked to the thread
// waits with it.
func blockIn(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
