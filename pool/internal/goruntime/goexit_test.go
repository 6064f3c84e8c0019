package goruntime

import (
	"runtime"
	"testing"
)

// A deferred call tells runtime.Goexit from a panic, panic(nil)
// included, which recover alone cannot.
func TestGoexiting(t *testing.T) {
	run := func(end func()) (goexit bool) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				_ = recover()
				goexit = Goexiting()
			}()
			end()
		}()
		<-done
		return goexit
	}
	if !run(runtime.Goexit) {
		t.Error("under runtime.Goexit: Goexiting is false")
	}
	if run(func() { panic("x") }) {
		t.Error("under a panic: Goexiting is true")
	}
	if run(func() {}) {
		t.Error("on a plain return: Goexiting is true")
	}
}
