package place

import "golang.org/x/sys/unix"

// ThreadID returns the calling thread's ID (for Explain and tests).
func ThreadID() int { return unix.Gettid() }
