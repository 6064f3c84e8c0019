//go:build !unix

package pool

import "time"

func processCPU() time.Duration { return 0 }
