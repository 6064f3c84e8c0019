//go:build amd64 || arm64

package goruntime

// Cheap: G costs a couple of nanoseconds, so every build checks the
// owner of a Worker on every call.
const Cheap = true

// G identifies the calling goroutine: the address of its runtime g,
// unique among live goroutines only: the runtime gives an ended
// goroutine's g to a later one. A worker's goroutine that ends before its
// pool (runtime.Goexit in a task) gives up its g in the owner table and
// in its owner before it ends (the pool's owner.go), so the later goroutine is not
// taken for the worker.
//
// curG (g_amd64.s, g_arm64.s) relies on runtime internals that no
// release promises, checked against Go 1.26 (gVerifiedGo in
// g_test.go, whose test fails on a newer release until they are
// checked again):
//   - where the current g is kept. On amd64, in a thread-local slot: the
//     assembler's (TLS) operand loads it, as the runtime's own get_tls
//     and g macros (runtime/go_tls.h) do. Go code compiled for
//     ABIInternal also keeps g in R14, but an assembly function is ABI0,
//     where R14 is not promised. On arm64, in R28, which the assembler
//     calls g, in every ABI.
//   - that a g is never freed or moved: the runtime keeps every g it has
//     made in allgs (runtime/proc.go) and hands a dead one to a later
//     goroutine, so the address stays the same for as long as the
//     goroutine lives, and no two live goroutines share one.
//
// curG reads no field of the g, so the g's layout does not matter to it;
// the test reads two fields (goid, the stack bounds) at their Go 1.26
// offsets to check that the address is the calling goroutine's g.
func G() uintptr { return curG() }

func curG() uintptr
