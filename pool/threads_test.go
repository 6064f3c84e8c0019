package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/numapool/numapool/pin"
)

// maxThreadsEnv makes the test binary a child that lowers the runtime's
// thread limit (TestWorkersBeyondThreadLimit).
const maxThreadsEnv = "NUMAPOOL_TEST_MAX_THREADS"

// goMaxThreads reads the runtime's thread limit without changing it.
func goMaxThreads() int {
	limit := debug.SetMaxThreads(math.MaxInt32)
	debug.SetMaxThreads(limit)
	return limit
}

// More thread-locked workers than the runtime's thread limit allows are
// New's error, not the process's end ("fatal error: thread exhaustion"),
// and the room New computes follows the limit. Each limit is set in a
// child process, which the runtime would end.
func TestWorkersBeyondThreadLimit(t *testing.T) {
	if v := os.Getenv(maxThreadsEnv); v != "" {
		threadLimitChild(t, v)
		return
	}
	rooms := map[int]int{}
	for _, limit := range []int{150, 250} {
		t.Run(fmt.Sprintf("SetMaxThreads=%d", limit), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*hangBound)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorkersBeyondThreadLimit$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", maxThreadsEnv, limit))
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("child process hung:\n%s", out)
			}
			m := regexp.MustCompile(`child: room=(\d+)`).FindSubmatch(out)
			if err != nil || m == nil {
				t.Fatalf("child with the thread limit at %d (%v):\n%s", limit, err, out)
			}
			rooms[limit], _ = strconv.Atoi(string(m[1]))
		})
	}
	if len(rooms) != 2 {
		return
	}
	t.Logf("room for workers: %v", rooms)
	// The same test binary at the same point runs about the same threads
	// under both limits: the room moves with the limit.
	if d := rooms[250] - rooms[150]; d < 100-4 || d > 100+4 {
		t.Errorf("room %d under a limit of 150 threads, %d under 250: want it to grow by the 100 threads the limit did", rooms[150], rooms[250])
	}
}

// threadLimitChild lowers the runtime's thread limit to v and asks New
// for that many locked workers (an error naming the count, the room and
// the limit), then for the room it named (a pool, which runs a task on
// every worker), then for twice the limit under pin.Goroutines, which
// locks no thread (a pool). It prints the room for the parent.
func threadLimitChild(t *testing.T, v string) {
	limit, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	within(t, 3*hangBound, "the child", func() {
		debug.SetMaxThreads(limit)
		noEnv := func(string) (string, bool) { return "", false }

		_, err = newPool([]Option{WithWorkers(limit)}, noEnv)
		var le *workerLimitError
		if !errors.Is(err, ErrTooManyWorkers) || !errors.As(err, &le) {
			t.Fatalf("New with %d workers under a limit of %d threads: %v, want ErrTooManyWorkers", limit, limit, err)
		}
		for _, want := range []string{
			fmt.Sprintf("%d workers", limit),
			fmt.Sprintf("at most %d more", le.room),
			fmt.Sprintf("limit of %d threads", limit),
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if le.room <= 0 || le.room >= limit {
			t.Fatalf("room %d under a limit of %d threads", le.room, limit)
		}

		p, err := newPool([]Option{WithWorkers(le.room)}, noEnv)
		if err != nil {
			t.Fatalf("New with the %d workers the error allowed: %v", le.room, err)
		}
		onEveryWorker(t, p)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}

		p, err = newPool([]Option{WithWorkers(2 * limit), WithBinding(pin.Goroutines)}, noEnv)
		if err != nil {
			t.Fatalf("New with %d goroutine workers under a limit of %d threads: %v", 2*limit, limit, err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("child: room=%d\n", le.room)
	})
}

// onEveryWorker runs one task on each of p's workers at once: each waits
// until all have started, which only one task per worker can do, so every
// worker's thread is in use together.
func onEveryWorker(t *testing.T, p *Pool) {
	t.Helper()
	n := p.Workers()
	started := make(chan struct{}, n)
	release := make(chan struct{})
	for range n {
		if err := p.Submit(context.Background(), func(*Worker) {
			started <- struct{}{}
			<-release
		}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		<-started
	}
	close(release)
}

// The count is checked wherever it comes from, against the limit the
// runtime has: the environment's is named as such.
func TestWorkerCountOverThreadLimit(t *testing.T) {
	over := goMaxThreads() + 1
	for _, tc := range []struct {
		name string
		opts []Option
		env  map[string]string
		want string
	}{
		{"WithWorkers", []Option{WithWorkers(over)}, nil, fmt.Sprintf("pool: %d workers", over)},
		{envNumWorkers, nil, map[string]string{envNumWorkers: fmt.Sprint(over)}, fmt.Sprintf("pool: %s=%d: %d workers", envNumWorkers, over, over)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPool(tc.opts, env(tc.env))
			if err == nil {
				p.Close()
			}
			if !errors.Is(err, ErrTooManyWorkers) || !strings.HasPrefix(fmt.Sprint(err), tc.want) {
				t.Fatalf("New = %v, want ErrTooManyWorkers starting %q", err, tc.want)
			}
		})
	}
}

// The tightest limit is the one named, and the runtime's headroom comes
// off it.
func TestCheckThreadsNamesTheTightestLimit(t *testing.T) {
	bounds := []threadBound{{room: 1000, what: "loose"}, {room: 300, what: "tight"}, {room: 500, what: "middle"}}
	room := 300 - runtimeHeadroom()
	if err := checkThreads(room, "", bounds); err != nil {
		t.Errorf("%d workers in a room of %d: %v", room, room, err)
	}
	err := checkThreads(room+1, "", bounds)
	var le *workerLimitError
	if !errors.As(err, &le) || le.room != room || !strings.Contains(err.Error(), "tight") ||
		!strings.Contains(err.Error(), fmt.Sprintf("%d workers", room+1)) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d more", room)) {
		t.Errorf("%d workers in a room of %d: %v", room+1, room, err)
	}
	if err := checkThreads(1<<30, "", nil); err != nil {
		t.Errorf("no limit: %v", err)
	}
}
