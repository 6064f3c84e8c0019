package goruntime

import "runtime"

// Goexiting reports whether the deferred call that calls it runs because
// of runtime.Goexit, not a panic: recover gives nil for both Goexit and
// (under GODEBUG=panicnil=1) panic(nil), and only the stack tells them
// apart. Deferred calls run from the frame of runtime.Goexit or of
// runtime.gopanic, whichever is nearer.
func Goexiting() bool {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		switch f.Function {
		case "runtime.Goexit":
			return true
		case "runtime.gopanic":
			return false
		}
		if !more {
			return false
		}
	}
}
