//go:build !amd64 && !arm64

package goruntime

import (
	"bytes"
	"runtime"
	"strconv"
)

// Cheap: without the g register G parses runtime.Stack (about a
// microsecond), so only race-enabled builds check the owner of a Worker
// on its hot methods.
const Cheap = false

// G identifies the calling goroutine by its id.
func G() uintptr { return uintptr(goid()) }

// goid returns the calling goroutine's id, parsed from runtime.Stack (a
// microsecond or so): for platforms without a cheap G.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	n, _ := strconv.ParseUint(string(b), 10, 64)
	return n
}
