package pin_test

import (
	"fmt"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// A worker binds its thread to its node's CPUs (OpenMP's numa_domains),
// works, and puts the mask back before its thread ends.
func ExampleLock() {
	t := topology.Discover()
	cpu := t.Allowed.First()
	cpus, err := pin.Place(t, pin.NUMADomains, cpu)
	if err != nil {
		panic(err)
	}
	done := make(chan error)
	go func() {
		th, err := pin.Lock(cpus)
		if err != nil {
			done <- err // e.g. pin.ErrUnsupported off Linux
			return
		}
		// ... run tasks on this thread ...
		done <- th.Restore()
	}()
	fmt.Println(<-done == nil || t.Source == "fallback")
	// Output: true
}
