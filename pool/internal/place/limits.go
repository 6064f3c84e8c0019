package place

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
)

// A worker under a binding that locks a thread (every binding but
// pin.Goroutines) holds an OS thread of its own for as long as it runs.
// A process cannot recover from starting more threads than it may: the Go
// runtime ends it with "thread exhaustion" past debug.SetMaxThreads, and
// with "failed to create new OS thread" when the kernel refuses one (a
// cgroup's pids.max, RLIMIT_NPROC). New therefore counts the threads the
// process may still start before it starts any worker, and returns an
// error wrapping ErrTooManyWorkers when the workers would not fit.
//
// The count is taken once, in New: threads that other goroutines or
// other pools start afterwards are not foreseen.

// spareThreads is part of the headroom New leaves to the Go runtime
// besides the workers' threads: sysmon, the template thread, and threads
// blocked in system calls or cgo calls, each of which holds a thread
// while its processor runs other goroutines on another.
const spareThreads = 32

// runtimeHeadroom is how many threads New leaves to the runtime: one per
// processor (GOMAXPROCS), since a parked worker keeps its thread and
// hands its processor to a thread of the runtime's to run the program's
// other goroutines, plus spareThreads.
func runtimeHeadroom() int { return runtime.GOMAXPROCS(0) + spareThreads }

// ErrTooManyWorkers: more workers locked to threads than the process may
// start threads for (the pool's error of that name).
var ErrTooManyWorkers = errors.New("pool: more workers than threads the process may start")

// threadBound is one limit on the threads the process may still start.
type threadBound struct {
	room int    // threads that may still start under this limit
	what string // the limit and what counts against it, for the error
}

// goThreadBound is the Go runtime's own limit, debug.SetMaxThreads, less
// the threads running now. SetMaxThreads is the only way to read the
// limit; raising it for the moment between the two calls cannot end the
// process, as lowering it below the count in use would.
func goThreadBound(running int) threadBound {
	limit := debug.SetMaxThreads(math.MaxInt32)
	debug.SetMaxThreads(limit)
	return threadBound{
		room: limit - running,
		what: fmt.Sprintf("the Go runtime's limit of %d threads (debug.SetMaxThreads) less the %d running", limit, running),
	}
}

// threadBounds lists the limits that apply to this process (limits.go,
// limits_linux.go); a variable so that tests can give others.
var threadBounds = func() []threadBound {
	running, osBounds := osThreadBounds()
	return append([]threadBound{goThreadBound(running)}, osBounds...)
}

// LimitError is New's error for more thread-locked workers than the
// process may start threads for.
type LimitError struct {
	from     string // where the count came from ("NUMAPOOL_NUM_WORKERS=…: "), or ""
	workers  int    // the workers asked for
	Room     int    // the threads the workers may have: bound.room less headroom
	headroom int
	bound    threadBound // the tightest limit
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("pool: %s%d workers each need a thread of their own, but this process may start at most %d more for them: %s, and %d left to the Go runtime (GOMAXPROCS %d + %d)",
		e.from, e.workers, max(e.Room, 0), e.bound.what, e.headroom, e.headroom-spareThreads, spareThreads)
}

func (e *LimitError) Unwrap() error { return ErrTooManyWorkers }

// checkThreads returns a *LimitError when workers thread-locked
// workers do not fit under the tightest of bounds once the runtime's
// headroom is kept, and otherwise the threads left beyond them
// (math.MaxInt when no bound applies).
func checkThreads(workers int, from string, bounds []threadBound) (left int, err error) {
	if len(bounds) == 0 {
		return math.MaxInt, nil
	}
	tight := bounds[0]
	for _, b := range bounds[1:] {
		if b.room < tight.room {
			tight = b
		}
	}
	headroom := runtimeHeadroom()
	room := tight.room - headroom
	if workers > room {
		return 0, &LimitError{from: from, workers: workers, Room: room, headroom: headroom, bound: tight}
	}
	return room - workers, nil
}
