//go:build !linux

package pool

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }

func threadsCPU([]int) (time.Duration, bool) { return 0, false }
