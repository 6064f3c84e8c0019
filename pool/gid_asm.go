//go:build amd64 || arm64

package pool

// cheapGID: gid costs a couple of nanoseconds, so every build checks the
// owner of a Worker on every call.
const cheapGID = true

// gid identifies the calling goroutine: the address of its runtime g,
// unique among live goroutines. A worker's goroutine lives as long as its
// pool, so no other goroutine can have its g while the check matters.
func gid() uintptr { return curG() }

func curG() uintptr
