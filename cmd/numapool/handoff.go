package main

import (
	"fmt"
	"runtime"
	"slices"
	"time"
)

// A pool's worker runs on a goroutine locked to its thread. Handing work
// to one that sleeps, or getting a processor back from one, wakes its
// thread: the kernel's futex wake and a thread switch, where a hand-off
// between goroutines is the Go scheduler's alone. The suite's hand-off
// workloads (pingpong-spaced, spawn, blocking) are bound by that cost on
// a machine where it is high, as on a virtual machine whose idle virtual
// CPUs halt; bench prints it beside the cache line's round trip, so that
// a reader can tell such a machine from another.

// handOffRounds is how many hand-offs there and back one timing makes,
// handOffBatches how many timings give the median, handOffLimit how long
// the probe may take in all before it stops with the timings it has.
const (
	handOffRounds  = 500
	handOffBatches = 3
	handOffLimit   = time.Second
)

// handOff times a hand-off from one goroutine to another and back over
// unbuffered channels, both goroutines locked to their threads (locked)
// or neither: the median of up to handOffBatches timings, each the mean
// of handOffRounds round trips.
func handOff(locked bool) time.Duration {
	ping, pong := make(chan struct{}), make(chan struct{})
	go func() {
		if locked {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		for range ping {
			pong <- struct{}{}
		}
	}()
	defer close(ping)
	if locked {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	deadline := time.Now().Add(handOffLimit)
	var times []time.Duration
	for range handOffBatches {
		begin := time.Now()
		for range handOffRounds {
			ping <- struct{}{}
			<-pong
		}
		times = append(times, time.Since(begin)/handOffRounds)
		if time.Now().After(deadline) {
			break
		}
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// handOffLine is bench's line for the two figures.
func handOffLine() string {
	locked, free := handOff(true), handOff(false)
	return "a hand-off to another goroutine and back, both locked to their threads as a pool's workers are: " +
		micros(locked) + "; between goroutines: " + micros(free)
}

// micros formats d in microseconds: two decimals below 10, none above.
func micros(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 10 {
		return fmt.Sprintf("%.2f µs", us)
	}
	return fmt.Sprintf("%.0f µs", us)
}
