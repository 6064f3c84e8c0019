package pool

import "golang.org/x/sys/unix"

// threadID returns the calling thread's ID (for Explain and tests).
func threadID() int { return unix.Gettid() }
