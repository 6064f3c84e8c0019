//go:build !amd64 && !arm64

package pool

// cheapGID: here gid parses runtime.Stack (about a microsecond), so only
// race-enabled builds check the owner of a Worker on its hot methods.
const cheapGID = false

// gid identifies the calling goroutine by its id.
func gid() uintptr { return uintptr(goid()) }
