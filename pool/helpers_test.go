package pool

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// hangBound is how long a call that must return may take before the test
// calls it hung: far beyond what any of them needs.
const hangBound = 5 * time.Second

// within runs fn on the calling goroutine and returns when fn does; fn
// may call t.Fatal. If fn has not returned after d, within dumps every
// goroutine's stack and panics, naming the test, what hung, and report
// (read at that moment; none, or a log of what fn did): a hang ends the
// test binary with the stacks that explain it instead of stalling it
// until the go test timeout, and leaves no hung call behind to disturb
// the tests after it.
func within(t testing.TB, d time.Duration, what string, fn func(), report ...fmt.Stringer) {
	t.Helper()
	name := t.Name()
	timer := time.AfterFunc(d, func() {
		dumpGoroutines()
		msg := fmt.Sprintf("%s: %s did not return within %v (goroutines dumped above)", name, what, d)
		for _, r := range report {
			msg += ": " + r.String()
		}
		panic(msg)
	})
	defer timer.Stop()
	fn()
}

// dumpGoroutines writes every goroutine's stack to stderr, for a test
// that found a call hung.
func dumpGoroutines() { _ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2) }

// waitClosed waits for ch to be closed, failing the test after d.
func waitClosed(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("%s: not within %v", what, d)
	}
}

// eventually polls cond until it holds or d has passed, and reports
// whether it held. For conditions no event announces (the collector, the
// OS reaping threads).
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// recovered runs fn and returns what it panicked with (nil if it did not).
func recovered(fn func()) (r any) {
	defer func() { r = recover() }()
	fn()
	return nil
}

// specName names a layout in subtest names.
func specName(spec string) string {
	if spec == "" {
		return "real"
	}
	return spec
}

func specOpts(spec string, opts ...Option) []Option {
	if spec != "" {
		opts = append(opts, WithSpec(spec))
	}
	return opts
}

// spinFor busy-waits for d: a task that takes time without blocking its
// thread.
func spinFor(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

func newTestPool(t *testing.T, opts ...Option) *Pool {
	t.Helper()
	p, err := newPool(append(opts, WithoutEnv()), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var errBody = errors.New("body failed")

// loopStopSlack is how many loop bodies (of ~5 µs each) may start on the
// other workers between the moment a body returns its error and the
// moment the loop records it and stops handing out parts: a couple per
// worker, and some room for a failing worker that the OS (a loaded
// machine, the race detector) holds up for tens of microseconds in that
// window. Without the stop the count is in the thousands.
func loopStopSlack(p *Pool) int64 { return int64(4*p.Workers() + 8) }

// isDone reports whether ch is closed now, without waiting.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// panicsWith panics with v from a frame of its own, as a user's function
// would; it returns int so that it fits where a value is expected.
//
//go:noinline
func panicsWith(v any) int { panic(v) }

// recv returns the next value from ch, or fails the test when none comes
// within hangBound: what says what hung.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangBound):
		t.Fatal(what)
	}
	panic("unreachable")
}
