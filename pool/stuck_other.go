//go:build !linux

package pool

// threadState cannot read a thread's state here.
func threadState(tid int) (byte, bool) { return 0, false }
