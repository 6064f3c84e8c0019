//go:build !linux

package topology

import (
	"errors"
	"runtime"
)

func discoverOS() (*Topology, error) {
	return nil, errors.New("NUMA discovery is implemented for Linux only, not " + runtime.GOOS)
}
