package main

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// roundTripPair picks two CPUs of the process to time a cache line
// between: the first allowed CPU and the first allowed one on another
// core of the same node (a hand-off between two of a node's workers), or
// ok false without two such cores.
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
// back; roundTripBatches how many timings give the median; roundTripLimit
// how long the probe may take in all before it gives up (a CPU other
// processes keep busy, where the pinned thread waits its turn).
const (
	roundTripRounds  = 10000
	roundTripBatches = 5
	roundTripLimit   = time.Second
)

// errRoundTripSlow is roundTrip's error when it gives up.
var errRoundTripSlow = errors.New("gave up after " + roundTripLimit.String())

// roundTrip times a cache line written on CPU a, read and answered on CPU
// b, and read back on a: the floor under any hand-off between threads on
// those CPUs. On a virtual machine it moves with where the host runs the
// virtual CPUs, by several times from one minute to the next; a suite
// run's figures for work that crosses CPUs move with it. The two sides
// spin at once, so the caller needs two processors (GOMAXPROCS); with
// one, each answer waits for a preemption and the probe gives up after
// roundTripLimit. Both sides run on threads locked and pinned for the
// purpose, which get their masks back and end with their goroutines.
func roundTrip(a, b int) (time.Duration, error) {
	var line struct {
		_ cpu.CacheLinePad
		v atomic.Int64 // 2i+1: a's i-th ping; 2i+2: b's answer; -1: a gave up
		_ cpu.CacheLinePad
	}
	ready := make(chan error, 2)
	start := make(chan bool, 1) // true: go; false: end
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		th, err := pin.Lock(topology.NewCPUSet(b))
		if err != nil {
			ready <- err
			return
		}
		defer func() { _ = th.RestoreMask() }() // the thread ends with the goroutine either way
		ready <- nil
		if !<-start {
			return
		}
		for i := int64(0); i < roundTripBatches*roundTripRounds; i++ {
			for v := line.v.Load(); v != 2*i+1; v = line.v.Load() {
				if v < 0 {
					return
				}
			}
			// A compare-and-swap, not a store: the timing side may have
			// given up (-1) since the load, and an answer stored over
			// that would leave this side waiting for a ping that never
			// comes.
			if !line.v.CompareAndSwap(2*i+1, 2*i+2) {
				return
			}
		}
	}()
	var times []time.Duration
	done := make(chan error, 1)
	go func() {
		th, err := pin.Lock(topology.NewCPUSet(a))
		if err != nil {
			done <- err
			return
		}
		var result error
		defer func() {
			// The mask first, then the answer: the caller may look at the
			// process's threads once it has it. The thread ends with the
			// goroutine either way.
			_ = th.RestoreMask()
			done <- result
		}()
		if result = <-ready; result != nil {
			return
		}
		start <- true
		deadline := time.Now().Add(roundTripLimit)
		for k := range int64(roundTripBatches) {
			begin := time.Now()
			for i := k * roundTripRounds; i < (k+1)*roundTripRounds; i++ {
				line.v.Store(2*i + 1)
				for spins := 1; line.v.Load() != 2*i+2; spins++ {
					if spins%(1<<16) == 0 && time.Now().After(deadline) {
						line.v.Store(-1)
						result = errRoundTripSlow
						return
					}
				}
			}
			times = append(times, time.Since(begin)/roundTripRounds)
		}
	}()
	err := <-done
	if err != nil {
		start <- false // if the answering side waits to start, it ends
	}
	<-answered
	if err != nil {
		return 0, fmt.Errorf("timing CPUs %d and %d: %w", a, b, err)
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// roundTripsBetweenRounds returns the suite's BeforeRound: it times the
// round trip between CPUs a and b before each round of a workload and
// keeps, in notes under the workload's name, the range of those timings
// (and how many failed, with the last error). A host that slows down for
// a minute shows there, next to the figures it moved.
func roundTripsBetweenRounds(a, b int, notes map[string]string) func(workload string) {
	type trips struct {
		lo, hi        time.Duration
		timed, failed int
		err           error
	}
	seen := map[string]*trips{}
	return func(wl string) {
		tr := seen[wl]
		if tr == nil {
			tr = &trips{}
			seen[wl] = tr
		}
		if d, err := roundTrip(a, b); err != nil {
			tr.failed, tr.err = tr.failed+1, err
		} else {
			if tr.timed == 0 || d < tr.lo {
				tr.lo = d
			}
			tr.hi = max(tr.hi, d)
			tr.timed++
		}
		note := fmt.Sprintf("a cache line from CPU %d to %d and back, before its rounds: ", a, b)
		switch {
		case tr.timed == 0:
			note += fmt.Sprintf("not measured (%v)", tr.err)
		case tr.failed == 0:
			note += fmt.Sprintf("%d-%d ns", tr.lo.Nanoseconds(), tr.hi.Nanoseconds())
		default:
			note += fmt.Sprintf("%d-%d ns, %d of %d not measured (%v)", tr.lo.Nanoseconds(), tr.hi.Nanoseconds(), tr.failed, tr.timed+tr.failed, tr.err)
		}
		notes[wl] = note
	}
}
