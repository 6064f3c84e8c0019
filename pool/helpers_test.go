package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/queue"
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

// newTestPool makes a pool that ignores the environment. A test that
// counts allocations with testing.AllocsPerRun makes its pool with
// WithMachineWatch(0) (noLooks): AllocsPerRun counts the whole process's,
// and a look of the machine monitor allocates a few small objects.
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

// Helpers of the adversarial tests of shards that hold plain tasks as
// functions (item, task.go) beside records: backlogs far past the
// backlog threshold, with every plain submission form, bounded and
// unbounded pools, panics, and Shutdowns racing a Close. Every task has
// an id and counts its runs.

// ledger gives each plain task an id and counts its runs.
type ledger struct {
	runs     []atomic.Int32
	accepted []atomic.Bool
	next     atomic.Int64
	dbl      atomic.Int64
	dblMu    sync.Mutex
	dblIDs   []int
}

func newLedger(n int) *ledger {
	return &ledger{runs: make([]atomic.Int32, n), accepted: make([]atomic.Bool, n)}
}

// id reserves an id, or -1 when the ledger is full.
func (l *ledger) id() int {
	i := l.next.Add(1) - 1
	if i >= int64(len(l.runs)) {
		return -1
	}
	return int(i)
}

func (l *ledger) ran(i int) {
	if l.runs[i].Add(1) != 1 {
		l.dbl.Add(1)
		l.dblMu.Lock()
		if len(l.dblIDs) < 10 {
			l.dblIDs = append(l.dblIDs, i)
		}
		l.dblMu.Unlock()
	}
}

// tally returns accepted, ran (distinct), not run, ran-but-not-accepted.
func (l *ledger) tally() (acc, ran, notRun, stray int64) {
	n := min(l.next.Load(), int64(len(l.runs)))
	for i := range n {
		r := l.runs[i].Load()
		a := l.accepted[i].Load()
		switch {
		case a && r > 0:
			acc++
			ran++
		case a:
			acc++
			notRun++
		case r > 0:
			stray++
		}
	}
	return
}

var backlogSpecs = []string{"", "2x2", "4x1", "2x1"}

// backlog is a long backlog in a node's shard: many times what a
// worker's queue holds.
const backlog = 4 * queue.Capacity

// Helpers of the adversarial tests of record reuse: plain task records
// that the worker that ran them makes new tasks from, and that move
// between workers through the pool's stash (task.go), and the spawn
// paths every task made inside a task takes. Every task carries an index
// and counts its runs. A record reused while a queue, LIFO slot or shard
// still held it would show as one index run twice and another never.
// Each index runs exactly once, or, after a Shutdown gave up, is counted
// in Stats.Abandoned. Run them with -race, and with -tags
// numapool_smallqueue, whose 4-slot run queues overflow to the shards
// after a few spawns.

// reuseSpecs are the layouts the tests run on: one worker, this machine,
// and synthetic pools of several nodes.
var reuseSpecs = []string{"1w", "", "2x1", "2x2", "4x1"}

// reuseOpts returns the options of a layout of reuseSpecs.
func reuseOpts(spec string, opts ...Option) []Option {
	if spec == "1w" {
		return append(opts, WithWorkers(1))
	}
	return specOpts(spec, opts...)
}

// problems collects what tasks find wrong: a task must not call t.Errorf,
// which panics once a test that gave up on a hang has returned.
type problems struct {
	mu   sync.Mutex
	list []string
}

func (pr *problems) add(format string, args ...any) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if len(pr.list) < 20 {
		pr.list = append(pr.list, fmt.Sprintf(format, args...))
	}
}

// report fails t with what was collected.
func (pr *problems) report(t *testing.T) {
	t.Helper()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, s := range pr.list {
		t.Error(s)
	}
}

// reuseTree is a tree of numbered tasks. Each task counts its run and
// makes children through one of the ways a task makes tasks, chosen by
// its index, until n indexes are issued.
type reuseTree struct {
	runs   []atomic.Int32
	issued atomic.Int64
	// refused counts indexes whose task the pool refused (a submission
	// from a task after intake closed): they never run.
	refused atomic.Int64
	// abandoned counts indexes whose waiter was told the task was
	// dropped (a Join's b, a Future); plain tasks are counted only in
	// Stats.Abandoned.
	abandoned atomic.Int64
	wg        sync.WaitGroup // one per issued index, done at its first run's end
	pr        *problems
	// exact leaves out the ways whose tasks a Shutdown can give up
	// uncounted: a stopped loop gives up the rest of its range, and a
	// failed Group skips its functions that have not begun.
	exact bool
	// burstEvery: every burstEvery-th spawning task spawns more children
	// than a run queue holds.
	burstEvery int
}

func newReuseTree(n int, pr *problems) *reuseTree {
	return &reuseTree{runs: make([]atomic.Int32, n), pr: pr, burstEvery: 45}
}

// issue hands out the next index, or false once all are out.
func (tr *reuseTree) issue() (int, bool) {
	i := tr.issued.Add(1) - 1
	if i >= int64(len(tr.runs)) {
		return 0, false
	}
	tr.wg.Add(1)
	return int(i), true
}

// issuedN is how many indexes were handed out.
func (tr *reuseTree) issuedN() int64 { return min(tr.issued.Load(), int64(len(tr.runs))) }

// forget takes back an index whose task was refused.
func (tr *reuseTree) forget() {
	tr.refused.Add(1)
	tr.wg.Done()
}

// task returns the function of index i.
func (tr *reuseTree) task(i int) func(*Worker) {
	return func(w *Worker) {
		n := tr.runs[i].Add(1)
		if n > 1 {
			tr.pr.add("task %d ran %d times", i, n)
			return
		}
		tr.children(w, i)
		tr.wg.Done()
	}
}

// children makes index i's children, each way of making a task in turn.
func (tr *reuseTree) children(w *Worker, i int) {
	p := w.Pool()
	nodes := p.Nodes()
	node := nodes[(i/11)%len(nodes)]
	child := func() (func(*Worker), bool) {
		c, ok := tr.issue()
		if !ok {
			return nil, false
		}
		return tr.task(c), true
	}
	switch i % 11 {
	case 0, 1: // Spawn: the LIFO slot, the previous one to the back of the queue
		k := 3
		if tr.burstEvery > 0 && i%tr.burstEvery == 0 {
			k = queue.Capacity + 40 // past the run queue: overflow to the shard
		}
		for range k {
			if fn, ok := child(); ok {
				w.Spawn(fn)
			}
		}
	case 2: // Group.Go: the back of the queue; Wait helps
		if tr.exact {
			break
		}
		g := w.Pool().Group(context.Background())
		for range 3 {
			if fn, ok := child(); ok {
				g.Go(func(w *Worker) error { fn(w); return nil })
			}
		}
		if err := g.Wait(); err != nil {
			tr.dropped(err, "Group.Wait")
		}
	case 3: // Async on the worker: the LIFO slot; Wait helps
		if fn, ok := child(); ok {
			f := Async(w, func(w *Worker) (int, error) { fn(w); return 0, nil })
			if _, err := f.Wait(); err != nil {
				tr.dropped(err, "Async(w).Wait")
				tr.abandoned.Add(1)
			}
		}
	case 4: // Run on a node, strict: its pinned shard, often another node's
		if fn, ok := child(); ok {
			if _, err := Run(p.Node(node).Strict(), func(w *Worker) (int, error) {
				if w.Node() != node {
					tr.pr.add("strict Run for node %d ran on node %d", node, w.Node())
				}
				fn(w)
				return 0, nil
			}); err != nil {
				tr.dropped(err, "Run(Node.Strict)")
				tr.abandoned.Add(1)
			}
		}
	case 5: // Submit from a task: a plain record made by submit, soft or strict
		for k := range 2 {
			if fn, ok := child(); ok {
				var err error
				if k == 0 {
					err = p.Node(node).Strict().Submit(context.Background(), fn)
				} else {
					err = p.Node(node).Submit(context.Background(), fn)
				}
				if err != nil {
					tr.forget()
				}
			}
		}
	case 6: // Join: b in the join slot, a here; nested Joins in the children
		fa, okA := child()
		fb, okB := child()
		switch {
		case okA && okB:
			if err := w.Join(fa, fb); err != nil {
				tr.dropped(err, "Join")
				tr.abandoned.Add(1)
			}
		case okA:
			fa(w)
		}
	case 7: // a loop: pieces split to the back of the queue, sent home, bitten
		if tr.exact {
			break
		}
		var fns []func(*Worker)
		for range 6 {
			if fn, ok := child(); ok {
				fns = append(fns, fn)
			}
		}
		if err := w.Pool().ParallelFor(context.Background(), len(fns), 1, func(w *Worker, lo, hi int) error {
			for j := lo; j < hi; j++ {
				fns[j](w)
			}
			return nil
		}); err != nil {
			tr.pr.add("ParallelFor: %v", err)
		}
	case 8: // Pool.Submit from a task: a plain record in some node's shard
		if fn, ok := child(); ok {
			if err := p.Submit(context.Background(), fn); err != nil {
				tr.forget()
			}
		}
	case 9: // Async on a node, soft, waited for
		if fn, ok := child(); ok {
			f := Async(p.Node(node), func(w *Worker) (int, error) { fn(w); return 0, nil })
			if _, err := f.Wait(); err != nil {
				tr.dropped(err, "Async(Node).Wait")
				tr.abandoned.Add(1)
			}
		}
	case 10: // Async on the pool from a task (the LIFO slot), not waited for
		for range 2 {
			if fn, ok := child(); ok {
				f := Async(p, func(w *Worker) (int, error) { fn(w); return 0, nil })
				_ = f
			}
		}
	}
}

// dropped checks an error a waiter got for a child: only a Shutdown that
// gave up may make one.
func (tr *reuseTree) dropped(err error, what string) {
	if !errors.Is(err, ErrAbandoned) {
		tr.pr.add("%s: %v, want nil or ErrAbandoned", what, err)
	}
}

// checkOnce fails t at an index that ran more than once and reports how
// many never ran.
func (tr *reuseTree) checkOnce(t *testing.T) (missing int64) {
	t.Helper()
	for i := range tr.issuedN() {
		switch n := tr.runs[i].Load(); n {
		case 0:
			missing++
		case 1:
		default:
			t.Fatalf("task %d ran %d times", i, n)
		}
	}
	return missing
}

// chunks runs body over [0, n) in one contiguous block per goroutine.
func chunks(n, parts int, body func(lo, hi int)) {
	var wg sync.WaitGroup
	for k := range parts {
		lo, hi := n*k/parts, n*(k+1)/parts
		wg.Add(1)
		go func() { defer wg.Done(); body(lo, hi) }()
	}
	wg.Wait()
}

func threads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// isParked reports whether w is still registered as parked (a wake-up
// that did not come from notify, e.g. a stale token).
func (il *idle) isParked(w *Worker) bool {
	il.mu.Lock()
	defer il.mu.Unlock()
	return il.parked[w.id]
}
