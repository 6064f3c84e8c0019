//go:build !linux

package pool

// threadID returns 0: the thread's ID is not known here.
func threadID() int { return 0 }
