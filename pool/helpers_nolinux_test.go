//go:build !linux

package pool

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }

func threadsCPU([]int) (time.Duration, bool) { return 0, false }

// sleepInKernel is time.Sleep where no raw nanosleep is at hand.
func sleepInKernel(d time.Duration) { time.Sleep(d) }
