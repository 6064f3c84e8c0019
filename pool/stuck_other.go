//go:build !linux

package pool

import "time"

// threadState cannot read a thread's state here.
func threadState(tid int) (byte, bool) { return 0, false }

// threadCPUs: there is no reading of another thread's CPU clock here.
const threadCPUs = false

func threadCPUTime(tid int) (time.Duration, bool) { return 0, false }
