package pool

import (
	"testing"
	"testing/synctest"
	"time"
)

// A worker keeps off a domain until the domain's hold ends, and no longer.
// holds answers from the clock as look read it, so a hold that ends
// during a search still holds until the next look; next names the
// earliest hold still running; once every hold has passed, look stops
// reading the clock. The bubble's clock moves only when the test sleeps,
// so each step sees the time it names exactly.
func TestKeepOffHoldsUntilItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var k keepOff
		k.look()
		if !k.now.IsZero() {
			t.Error("look read the clock with nothing held")
		}
		start := time.Now()
		k.hold(1, 3, start.Add(2*time.Millisecond))
		k.hold(2, 3, start.Add(5*time.Millisecond))
		k.look()
		if k.holds(0) || !k.holds(1) || !k.holds(2) {
			t.Errorf("at the start: holds = %v, %v, %v, want false, true, true", k.holds(0), k.holds(1), k.holds(2))
		}
		if got, want := k.next(k.now), start.Add(2*time.Millisecond); !got.Equal(want) {
			t.Errorf("at the start: next = %v, want %v", got.Sub(start), want.Sub(start))
		}

		time.Sleep(3 * time.Millisecond)
		if !k.holds(1) {
			t.Error("group 1's hold ended within a search: it must hold until the next look")
		}
		k.look()
		if k.holds(1) || !k.holds(2) {
			t.Errorf("after 3ms: holds(1), holds(2) = %v, %v, want false, true", k.holds(1), k.holds(2))
		}
		if got, want := k.next(k.now), start.Add(5*time.Millisecond); !got.Equal(want) {
			t.Errorf("after 3ms: next = %v, want %v", got.Sub(start), want.Sub(start))
		}

		time.Sleep(2 * time.Millisecond) // the last hold ends now
		k.look()
		if k.holds(1) || k.holds(2) {
			t.Errorf("after 5ms: holds(1), holds(2) = %v, %v, want false, false", k.holds(1), k.holds(2))
		}
		if !k.last.IsZero() {
			t.Error("every hold has passed, but look keeps reading the clock")
		}
		if got := k.next(time.Now()); !got.IsZero() {
			t.Errorf("after 5ms: next = %v, want zero", got.Sub(start))
		}
	})
}
