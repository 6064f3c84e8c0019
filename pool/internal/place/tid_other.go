//go:build !linux

package place

// ThreadID returns 0: the thread's ID is not known here.
func ThreadID() int { return 0 }
