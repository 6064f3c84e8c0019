package pool

import "time"

// keepOff is when a worker may steal from each other domain again: it took
// work that the domain must keep, loop pieces (piece.run) or tasks that
// prefer their node while it keeps up (soft.go), and stealing more of it
// would only send that back too.
type keepOff struct {
	until []time.Time // per domain; nil until first used
	last  time.Time   // the latest of until, zero once passed
	now   time.Time   // the clock at the current search's look; zero if nothing is held
}

// hold keeps the worker off domain d (of n) until the given time.
func (k *keepOff) hold(d, n int, until time.Time) {
	if k.until == nil {
		k.until = make([]time.Time, n)
	}
	k.until[d] = until
	if until.After(k.last) {
		k.last = until
	}
}

// look starts a search: it reads the clock if some domain is held, so that
// holds answers for the whole search without reading it again.
func (k *keepOff) look() {
	k.now = time.Time{}
	if k.last.IsZero() {
		return
	}
	if now := time.Now(); now.Before(k.last) {
		k.now = now
	} else {
		k.last = time.Time{}
	}
}

// next returns when the first hold still running at now ends; zero if
// none does, or now is zero (look found nothing held).
func (k *keepOff) next(now time.Time) time.Time {
	var first time.Time
	if !k.last.After(now) {
		return first
	}
	for _, u := range k.until {
		if u.After(now) && (first.IsZero() || u.Before(first)) {
			first = u
		}
	}
	return first
}

// holds reports whether domain d is held as of the last look.
func (k *keepOff) holds(d int) bool { return !k.now.IsZero() && k.now.Before(k.until[d]) }
