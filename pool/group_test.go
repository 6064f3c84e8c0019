package pool

import (
	"os"
	"runtime/pprof"
	"testing"
	"time"
)

// watchdog panics with every goroutine's stack written to stderr unless
// the returned stop is called within d: a hang in the code under test
// shows where everything waits instead of running into the binary's
// -timeout.
func watchdog(t testing.TB, d time.Duration, what string) (stop func()) {
	t.Helper()
	name := t.Name()
	timer := time.AfterFunc(d, func() {
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		panic("watchdog: " + name + ": " + what + " did not finish within " + d.String())
	})
	return func() { timer.Stop() }
}
