// Package goruntime reads what the Go runtime knows and does not export
// cheaply: the calling goroutine's identity (G, the address of its
// runtime g, which the pool uses to tell a worker's goroutine from any
// other), and whether goroutines wait for a processor (Gauge, Crowding,
// which a spinning searcher reads to give way), and whether a deferred
// call runs for runtime.Goexit or a panic (Goexiting). They rely on the
// runtime as it is; g_asm.go says what G relies on and g_test.go checks
// it.
package goruntime
