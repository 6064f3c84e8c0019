package main

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// roundTripPair picks two CPUs of the process to time a cache line
// between: the first allowed CPU and the first allowed one on another
// core of the same node (a hand-off between two of a node's workers), or
// ok false with fewer than two cores.
func roundTripPair(t *topology.Topology) (a, b int, ok bool) {
	a = t.Allowed.First()
	if a < 0 {
		return 0, 0, false
	}
	coreOf := func(cpu int) int {
		for i, c := range t.Cores {
			if c.CPUs.Has(cpu) {
				return i
			}
		}
		return -1
	}
	var node topology.CPUSet
	for _, n := range t.Nodes {
		if n.CPUs.Has(a) {
			node = n.CPUs
		}
	}
	for _, c := range t.Allowed.And(node).List() {
		if c != a && (coreOf(c) != coreOf(a) || coreOf(a) < 0) {
			return a, c, true
		}
	}
	return 0, 0, false
}

// roundTripRounds is how many times each timing passes the line there and
// back; roundTripBatches how many timings give the median.
const (
	roundTripRounds  = 10000
	roundTripBatches = 5
)

// roundTrip times a cache line written on CPU a, read and answered on CPU
// b, and read back on a: the floor under any hand-off between threads on
// those CPUs. On a virtual machine it moves with where the host runs the
// virtual CPUs, by several times from one minute to the next; a suite
// run's figures for work that crosses CPUs move with it. Both threads are
// locked and pinned, and end with their goroutines, masks and all.
func roundTrip(a, b int) (time.Duration, error) {
	var line struct {
		_ [64]byte
		v atomic.Int64
		_ [64]byte
	}
	ready := make(chan error, 2)
	start := make(chan bool, 1) // true: go; false: end
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		if _, err := pin.Lock(topology.NewCPUSet(b)); err != nil {
			ready <- err
			return
		}
		ready <- nil
		if !<-start {
			return
		}
		for i := int64(0); i < roundTripBatches*roundTripRounds; i++ {
			for line.v.Load() != 2*i+1 {
			}
			line.v.Store(2*i + 2)
		}
	}()
	var times []time.Duration
	err := func() error {
		done := make(chan error, 1)
		go func() {
			if _, err := pin.Lock(topology.NewCPUSet(a)); err != nil {
				done <- err
				return
			}
			if err := <-ready; err != nil {
				done <- err
				return
			}
			start <- true
			for k := range int64(roundTripBatches) {
				begin := time.Now()
				for i := k * roundTripRounds; i < (k+1)*roundTripRounds; i++ {
					line.v.Store(2*i + 1)
					for line.v.Load() != 2*i+2 {
					}
				}
				times = append(times, time.Since(begin)/roundTripRounds)
			}
			done <- nil
		}()
		return <-done
	}()
	if err != nil {
		start <- false // the answering side, if it was pinned, ends
		<-answered
		return 0, fmt.Errorf("timing CPUs %d and %d: %w", a, b, err)
	}
	<-answered
	slices.Sort(times)
	return times[len(times)/2], nil
}
