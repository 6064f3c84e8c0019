//go:build !linux

package bench

import "time"

// blockIn blocks for d; where no system call is at hand, in the Go
// runtime's sleep.
func blockIn(d time.Duration) { time.Sleep(d) }
