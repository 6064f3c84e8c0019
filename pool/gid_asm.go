//go:build amd64 || arm64

package pool

// cheapGID: gid costs a couple of nanoseconds, so every build checks the
// owner of a Worker on every call.
const cheapGID = true

// gid identifies the calling goroutine: the address of its runtime g,
// unique among live goroutines only: the runtime gives an ended
// goroutine's g to a later one. A worker's goroutine that ends before its
// pool (runtime.Goexit in a task) gives up its g in the owner table and
// in ownerID before it ends (owner.go), so the later goroutine is not
// taken for the worker.
func gid() uintptr { return curG() }

func curG() uintptr
