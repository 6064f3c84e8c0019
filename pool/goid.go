package pool

import (
	"bytes"
	"runtime"
	"strconv"
)

// goid returns the calling goroutine's id, parsed from runtime.Stack (a
// microsecond or so): for checks off the hot path, and for every check
// under -race.
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

// onWorker reports whether the calling goroutine is one of p's workers.
func (p *Pool) onWorker() bool {
	g := goid()
	for _, w := range p.workers {
		if w.gid.Load() == g {
			return true
		}
	}
	return false
}
