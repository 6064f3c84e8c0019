//go:build !linux

package place

import "runtime/pprof"

// osThreadBounds returns the threads the Go runtime runs (the
// threadcreate profile lists every live thread of the runtime) and no
// limit of the kernel's: they are read on Linux only.
func osThreadBounds() (running int, bounds []threadBound) {
	return max(pprof.Lookup("threadcreate").Count(), 1), nil
}
