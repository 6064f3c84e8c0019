package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/queue"
	"go.uber.org/goleak"
)

// The life-cycle test drives a pool with random scripts: client
// goroutines submit in every way the API offers, wait on Groups and
// loops, and at random points close the pool or shut it down with a short
// deadline, some from inside tasks. Whatever the interleaving, every call
// returns, every accepted unit of work runs once or is counted abandoned,
// and the pool leaves no goroutine or thread behind.
//
// A failing round prints its seed; NUMAPOOL_TEST_LIFECYCLE_SEED=<seed> replays
// that round alone (the schedule differs run to run, the script does not).

const lifecycleSeedEnv = "NUMAPOOL_TEST_LIFECYCLE_SEED"

// lcBound is how long any call of a round may take.
const lcBound = 10 * time.Second

// unitKind says how a unit of work was accepted, which decides how its
// fate is checked.
type unitKind uint8

const (
	// plain: known to be accepted (Submit returned nil, Spawn, Go on a
	// Worker.Group); if it did not run, the pool counted it abandoned.
	plain unitKind = iota + 1
	// refused: a submission that returned an error; it must never run.
	refused
	// poolGroup: Go on a Pool.Group, which submits and may be refused
	// without telling the caller; it runs at most once.
	poolGroup
	// joinB: the b side of a Join; it runs, or Join says it was abandoned.
	joinB
)

const maxUnits = 1 << 16

// lcRound is one seeded round.
type lcRound struct {
	seed  uint64
	p     *Pool
	nodes []int
	runs  []atomic.Int32
	kinds []unitKind // written by the goroutine that made the unit, before it is handed out
	next  atomic.Int64

	mu       sync.Mutex
	problems []string
	loops    []*lcLoop
	joins    []lcJoin
	groups   []lcGroup
	exits    []lcExit
}

type lcLoop struct {
	what string
	runs []atomic.Int32
	err  error
}

type lcJoin struct {
	b   int
	err error
}

type lcGroup struct {
	what string
	ids  []int
	err  error
}

type lcExit struct {
	what   string
	inside bool
	n      int
	err    error
}

func (r *lcRound) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// unit allocates a unit of work of kind k.
func (r *lcRound) unit(k unitKind) int {
	id := int(r.next.Add(1) - 1)
	if id >= maxUnits {
		panic("lifecycle: script made too many units")
	}
	r.kinds[id] = k
	return id
}

// taskPlan is what a task does when it runs, fixed when it is made so
// that a seed replays the same script.
type taskPlan struct {
	seed  uint64
	depth int
}

// task returns the function of unit id.
func (r *lcRound) task(id int, plan taskPlan) func(*Worker) {
	return func(w *Worker) {
		if n := r.runs[id].Add(1); n > 1 {
			r.problem("unit %d ran %d times", id, n)
		}
		rng := rand.New(rand.NewPCG(plan.seed, uint64(id)))
		if d := rng.IntN(4); d > 0 {
			spinFor(time.Duration(d) * 5 * time.Microsecond)
		}
		if plan.depth >= 2 {
			return
		}
		child := func() taskPlan { return taskPlan{seed: rng.Uint64(), depth: plan.depth + 1} }
		switch x := rng.IntN(100); {
		case x < 35: // spawn children
			for range rng.IntN(4) {
				cid := r.unit(plain)
				w.Spawn(r.task(cid, child()))
			}
		case x < 45: // fork-join
			bid := r.unit(joinB)
			err := w.Join(func(*Worker) { spinFor(2 * time.Microsecond) }, func(*Worker) {
				if n := r.runs[bid].Add(1); n > 1 {
					r.problem("Join's b (unit %d) ran %d times", bid, n)
				}
			})
			r.mu.Lock()
			r.joins = append(r.joins, lcJoin{bid, err})
			r.mu.Unlock()
		case x < 55: // a Group inside the task
			g := w.Pool().Group(context.Background())
			var ids []int
			for range 1 + rng.IntN(4) {
				gid := r.unit(plain)
				ids = append(ids, gid)
				fn := r.task(gid, child())
				g.Go(func(w *Worker) error { fn(w); return nil })
			}
			err := g.Wait()
			r.mu.Lock()
			r.groups = append(r.groups, lcGroup{"Worker.Group", ids, err})
			r.mu.Unlock()
		case x < 62 && plan.depth == 0: // a loop inside the task
			l := &lcLoop{what: "w.ParallelFor", runs: make([]atomic.Int32, 1+rng.IntN(200))}
			l.err = w.Pool().ParallelFor(context.Background(), len(l.runs), rng.IntN(9), l.noError)
			r.mu.Lock()
			r.loops = append(r.loops, l)
			r.mu.Unlock()
		case x < 64: // an exit from inside a task: it cannot wait for itself
			e := lcExit{inside: true}
			if rng.IntN(2) == 0 {
				e.what, e.err = "Close", r.p.Close()
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(5))*time.Millisecond)
				e.what = "Shutdown"
				e.n, e.err = r.p.Shutdown(ctx)
				cancel()
			}
			r.mu.Lock()
			r.exits = append(r.exits, e)
			r.mu.Unlock()
		}
	}
}

func (l *lcLoop) noError(_ *Worker, lo, hi int) error {
	for i := lo; i < hi; i++ {
		l.runs[i].Add(1)
	}
	return nil
}

// client runs one client's script; op names the call in progress, for
// the report when one hangs.
func (r *lcRound) client(c int, op *atomic.Pointer[string]) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(1000+c)))
	ops := 2 + rng.IntN(12)
	exitAt := -1
	if rng.IntN(3) > 0 {
		exitAt = rng.IntN(ops)
	}
	set := func(format string, args ...any) {
		s := fmt.Sprintf("client %d op: ", c) + fmt.Sprintf(format, args...)
		op.Store(&s)
	}
	for i := range ops {
		if i == exitAt {
			r.exit(rng, set)
			continue
		}
		switch x := rng.IntN(100); {
		case x < 55:
			r.submit(rng, set)
		case x < 70:
			g := r.p.Group(context.Background())
			var ids []int
			n := 1 + rng.IntN(8)
			set("Pool.Group: Go x%d", n)
			for range n {
				id := r.unit(poolGroup)
				ids = append(ids, id)
				fn := r.task(id, taskPlan{seed: rng.Uint64()})
				g.Go(func(w *Worker) error { fn(w); return nil })
			}
			set("Pool.Group.Wait (%d tasks)", n)
			err := g.Wait()
			r.mu.Lock()
			r.groups = append(r.groups, lcGroup{"Pool.Group", ids, err})
			r.mu.Unlock()
		case x < 85:
			l := &lcLoop{what: "ParallelFor", runs: make([]atomic.Int32, 1+rng.IntN(500))}
			grain := rng.IntN(17)
			set("ParallelFor(%d, %d)", len(l.runs), grain)
			l.err = r.p.ParallelFor(context.Background(), len(l.runs), grain, l.noError)
			r.mu.Lock()
			r.loops = append(r.loops, l)
			r.mu.Unlock()
		default:
			// a burst of submissions
			for range 1 + rng.IntN(20) {
				r.submit(rng, set)
			}
		}
	}
	set("done")
}

// submit submits one task in one of the five ways.
func (r *lcRound) submit(rng *rand.Rand, set func(string, ...any)) {
	id := r.unit(plain)
	fn := r.task(id, taskPlan{seed: rng.Uint64()})
	node := r.nodes[rng.IntN(len(r.nodes))]
	var err error
	var how string
	switch rng.IntN(5) {
	case 0:
		how = "Submit"
		set(how)
		err = r.p.Submit(context.Background(), fn)
	case 1:
		how = fmt.Sprintf("Node(%d).Submit", node)
		set(how)
		err = r.p.Node(node).Submit(context.Background(), fn)
	case 2:
		how = fmt.Sprintf("Node(%d).Strict().Submit", node)
		set(how)
		err = r.p.Node(node).Strict().Submit(context.Background(), fn)
	case 3:
		how = "TrySubmit"
		set(how)
		err = r.p.TrySubmit(fn)
	default:
		d := time.Duration(rng.IntN(3)) * time.Millisecond
		how = fmt.Sprintf("SubmitCtx(%v)", d)
		set(how)
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err = r.p.Submit(ctx, fn)
		cancel()
	}
	if err != nil {
		r.kinds[id] = refused
		ok := errors.Is(err, ErrClosed) || errors.Is(err, ErrFull) && how == "TrySubmit" ||
			errors.Is(err, context.DeadlineExceeded) && strings.HasPrefix(how, "SubmitCtx")
		if !ok {
			r.problem("%s = %v", how, err)
		}
	}
}

// exit closes the pool, or shuts it down with a deadline of 0-5ms.
func (r *lcRound) exit(rng *rand.Rand, set func(string, ...any)) {
	var e lcExit
	if rng.IntN(3) == 0 {
		e.what = "Close"
		set("Close")
		e.err = r.p.Close()
	} else {
		d := time.Duration(rng.IntN(6)) * time.Millisecond
		e.what = fmt.Sprintf("Shutdown(%v)", d)
		set(e.what)
		ctx, cancel := context.WithTimeout(context.Background(), d)
		e.n, e.err = r.p.Shutdown(ctx)
		cancel()
	}
	r.mu.Lock()
	r.exits = append(r.exits, e)
	r.mu.Unlock()
}

// exitsSoFar lists the exits that have returned, for a hang's report.
func (r *lcRound) exitsSoFar() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.exits) == 0 {
		return "no exit had returned"
	}
	var out []string
	for _, e := range r.exits {
		where := ""
		if e.inside {
			where = " inside a task"
		}
		out = append(out, fmt.Sprintf("%s%s = %d, %v", e.what, where, e.n, e.err))
	}
	return "returned before: " + strings.Join(out, "; ")
}

// check compares what was accepted with what ran and what the pool
// counted abandoned. Every client and worker has ended.
func (r *lcRound) check() {
	abandoned := int(r.p.Stats().Abandoned)
	aborted := false
	for _, e := range r.exits {
		switch {
		case e.inside:
			if !errors.Is(e.err, ErrInsideTask) {
				r.problem("%s from inside a task = %v, want ErrInsideTask", e.what, e.err)
			}
		case e.err == nil:
		case errors.Is(e.err, context.DeadlineExceeded):
			aborted = true
		case errors.Is(e.err, ErrAbandoned):
			aborted = true // an exit after a Shutdown gave up: the count, not the other ctx's error
		default:
			r.problem("%s = %d, %v", e.what, e.n, e.err)
		}
		if !e.inside && e.n > abandoned {
			r.problem("%s reported %d abandoned, Stats says %d", e.what, e.n, abandoned)
		}
	}
	var accepted, ran, plainUnrun, otherUnrun int
	for id := range int(r.next.Load()) {
		n := int(r.runs[id].Load())
		if n > 1 {
			r.problem("unit %d ran %d times", id, n)
		}
		switch r.kinds[id] {
		case plain:
			accepted++
			ran += n
			if n == 0 {
				plainUnrun++
			}
		case refused:
			if n != 0 {
				r.problem("unit %d was refused, yet ran", id)
			}
		case poolGroup, joinB:
			if n == 0 {
				otherUnrun++
			}
		}
	}
	abandonedErr := func(what string, err error) {
		if !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) {
			r.problem("%s = %v; work was dropped: want an error wrapping ErrAbandoned and DeadlineExceeded", what, err)
		}
	}
	for _, l := range r.loops {
		unrun := 0
		for i := range l.runs {
			switch l.runs[i].Load() {
			case 0:
				unrun++
			case 1:
			default:
				r.problem("%s over %d: index %d ran %d times", l.what, len(l.runs), i, l.runs[i].Load())
			}
		}
		otherUnrun += unrun
		switch {
		case l.err == nil && unrun > 0:
			r.problem("%s over %d returned nil with %d indexes unrun", l.what, len(l.runs), unrun)
		case l.err == nil, errors.Is(l.err, ErrClosed) && l.what == "ParallelFor":
		default:
			abandonedErr(l.what, l.err)
		}
	}
	for _, j := range r.joins {
		n := r.runs[j.b].Load()
		switch {
		case j.err == nil && n != 1:
			r.problem("Join returned nil, its b (unit %d) ran %d times", j.b, n)
		case j.err != nil && n != 0:
			r.problem("Join's b (unit %d) ran, yet Join = %v", j.b, j.err)
		case j.err != nil:
			abandonedErr("Join", j.err)
		}
	}
	for _, g := range r.groups {
		unrun := 0
		for _, id := range g.ids {
			if r.runs[id].Load() == 0 {
				unrun++
			}
		}
		switch {
		case g.err == nil && unrun > 0:
			r.problem("%s.Wait returned nil with %d of %d tasks unrun", g.what, unrun, len(g.ids))
		case g.err == nil, errors.Is(g.err, ErrClosed) && g.what == "Pool.Group":
		default:
			abandonedErr(g.what+".Wait", g.err)
		}
	}
	// Every plain unit that did not run was dropped and counted; what
	// else the pool counted was a Group task, a Join's b or a loop piece
	// (each piece at least one unrun index).
	if !aborted && (plainUnrun > 0 || abandoned > 0) {
		r.problem("no Shutdown gave up, yet %d of %d accepted tasks did not run and %d were counted abandoned", plainUnrun, accepted, abandoned)
	}
	if abandoned < plainUnrun {
		r.problem("%d accepted, %d ran: %d lost (Stats().Abandoned = %d)", accepted, ran, plainUnrun-abandoned, abandoned)
	}
	if abandoned > plainUnrun+otherUnrun {
		r.problem("Stats().Abandoned = %d, but only %d plain tasks and at most %d other pieces of work went unrun", abandoned, plainUnrun, otherUnrun)
	}
}

// play runs the round and returns what went wrong.
func (r *lcRound) play(t *testing.T) []string {
	rng := rand.New(rand.NewPCG(r.seed, 0))
	var opts []Option
	layout := []string{"", "2x2", "2x1"}[rng.IntN(3)]
	if layout != "" {
		opts = append(opts, WithSpec(layout))
	}
	if rng.IntN(3) == 0 {
		opts = append(opts, WithShardBound(1+rng.IntN(32)))
	}
	opts = append(opts, WithPanicHandler(func(v any, _ []byte) { r.problem("a task panicked: %v", v) }))
	p, err := newPool(append(opts, WithoutEnv()), func(string) (string, bool) { return "", false })
	if err != nil {
		return []string{err.Error()}
	}
	r.p, r.nodes = p, p.Nodes()
	r.runs = make([]atomic.Int32, maxUnits)
	r.kinds = make([]unitKind, maxUnits)
	clients := 1 + rng.IntN(4)
	desc := fmt.Sprintf("layout %q, %d workers, %d clients", specName(layout), p.Workers(), clients)

	ops := make([]atomic.Pointer[string], clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(c, &ops[c])
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	timer := time.NewTimer(lcBound)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		var hung []string
		for c := range ops {
			if s := ops[c].Load(); s != nil && !strings.HasSuffix(*s, "op: done") {
				hung = append(hung, *s)
			}
		}
		return []string{fmt.Sprintf("%s: hung for %v in: %s (%s)", desc, lcBound, strings.Join(hung, "; "), r.exitsSoFar())}
	}
	// The last exit, from outside, waits for the workers.
	final := "Close"
	var finalN int
	var finalErr error
	finished := make(chan struct{})
	go func() {
		if rng.IntN(2) == 0 {
			final = "final Shutdown(2ms) then Close"
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
			finalN, finalErr = p.Shutdown(ctx)
			cancel()
		}
		_ = p.Close()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(lcBound):
		return []string{fmt.Sprintf("%s: the %s after the clients did not return within %v (%s)", desc, final, lcBound, r.exitsSoFar())}
	}
	if finalErr != nil || finalN != 0 {
		r.mu.Lock()
		r.exits = append(r.exits, lcExit{what: "final Shutdown", n: finalN, err: finalErr})
		r.mu.Unlock()
	}
	r.check()
	if len(r.problems) > 0 {
		return append([]string{desc}, r.problems...)
	}
	return nil
}

func TestLifecycleRandomInterleavings(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	var list []uint64
	if v := os.Getenv(lifecycleSeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a seed", lifecycleSeedEnv, v)
		}
		list = []uint64{s}
	} else {
		for s := range uint64(seeds) {
			list = append(list, s+1)
		}
	}
	ignore := []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	}
	// A pool's locked worker threads end with its workers. The runtime
	// keeps idle threads it made meanwhile for other goroutines (about one
	// per P, plus helpers), so the count may settle a few above the
	// baseline, but must not grow round after round.
	baseT := threads()
	threadSlack := runtime.GOMAXPROCS(0) + 6
	replay := func(seed uint64) string {
		return fmt.Sprintf("replay: %s=%d go test -race -run 'TestLifecycleRandomInterleavings$' ./pool", lifecycleSeedEnv, seed)
	}
	for _, seed := range list {
		r := &lcRound{seed: seed}
		if problems := r.play(t); len(problems) > 0 {
			t.Fatalf("seed %d: %s\n%s", seed, strings.Join(problems, "\n\t"), replay(seed))
		}
		if err := goleak.Find(ignore...); err != nil {
			t.Fatalf("seed %d: goroutines left behind after the pool's last exit: %v\n%s", seed, err, replay(seed))
		}
		if baseT > 0 && !eventually(5*time.Second, func() bool { return threads() <= baseT+threadSlack }) {
			t.Fatalf("seed %d: %d OS threads after the pool's last exit, %d before the first round\n%s", seed, threads(), baseT, replay(seed))
		}
	}
}

// ---------------------------------------------------------------------
// A Shutdown that gives up while a task never ends.

// giveUpBound is how long after its ctx is done a Shutdown may take to
// return in these tests: the 25 ms its doc allows, and room for a shared
// 2-CPU machine under -race to schedule the goroutines involved.
const giveUpBound = 225 * time.Millisecond

// stuckWatchdog is how long a test waits for a Shutdown that should give
// up before it dumps every goroutine and fails.
const stuckWatchdog = 3 * time.Second

// One task blocks on a channel nobody closes until the test says so;
// Shutdown with a deadline, or with a ctx cancelled, returns soon after
// its ctx is done, says one task is still running and how many queued
// tasks it dropped; their waiters return ErrAbandoned. What the stuck task
// queues afterwards is dropped too, counted, and never runs. A later Close
// waits for the stuck task and then returns.
func TestShutdownGivesUpOnAStuckTask(t *testing.T) {
	for _, c := range []struct {
		name    string
		workers int
		ctx     func() (ctx context.Context, doneAt func() time.Time, cancel func())
		cause   error
	}{
		{"deadline", 1, func() (context.Context, func() time.Time, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			d, _ := ctx.Deadline()
			return ctx, func() time.Time { return d }, cancel
		}, context.DeadlineExceeded},
		{"cancelled", 1, func() (context.Context, func() time.Time, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			var at atomic.Int64
			timer := time.AfterFunc(300*time.Millisecond, func() { at.Store(time.Now().UnixNano()); cancel() })
			return ctx, func() time.Time { return time.Unix(0, at.Load()) }, func() { timer.Stop(); cancel() }
		}, context.Canceled},
		// The other workers end; the one in the task is the only one
		// still running.
		{"deadline-3-workers", 3, func() (context.Context, func() time.Time, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			d, _ := ctx.Deadline()
			return ctx, func() time.Time { return d }, cancel
		}, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			testShutdownGivesUp(t, c.workers, c.ctx, c.cause)
		})
	}
}

func testShutdownGivesUp(t *testing.T, workers int, newCtx func() (context.Context, func() time.Time, func()), cause error) {
	p := newTestPool(t, WithWorkers(workers))
	node := p.Nodes()[0]
	started := make(chan struct{})
	release := make(chan struct{}) // the stuck task goes on
	var releaseOnce sync.Once
	unstick := func() { releaseOnce.Do(func() { close(release) }) }
	defer unstick() // whatever fails, the worker ends before the test does

	// What the stuck task does once released, after Shutdown returned.
	type afterwards struct {
		submitErr error         // Submit from the task: refused
		innerErr  error         // a Future of its own it waited for
		outer     *Future[int]  // queued on a node, waited for from outside
		childRan  *atomic.Int32 // a child it spawned
	}
	after := make(chan afterwards, 1)
	if err := p.Submit(context.Background(), func(w *Worker) {
		close(started)
		<-release
		var a afterwards
		a.childRan = new(atomic.Int32)
		w.Spawn(func(*Worker) { a.childRan.Add(1) })
		a.outer = Async(p.Node(node), func(*Worker) (int, error) { return 1, nil })
		_, a.innerErr = Async(w, func(*Worker) (int, error) { return 2, nil }).Wait()
		a.submitErr = p.Submit(context.Background(), func(*Worker) { a.childRan.Add(1) })
		after <- a
	}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, hangBound, "the stuck task starting")

	// Queued behind it (one worker: nobody else takes them; with three,
	// the others run them before Shutdown, so queue nothing).
	var plainRan atomic.Int32
	queued := 0
	var fut *Future[int]
	var runErr chan error
	var g *Group
	groupRan := new(atomic.Int32)
	if workers == 1 {
		for range 3 {
			if err := p.Submit(context.Background(), func(*Worker) { plainRan.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		fut = Async(p, func(*Worker) (int, error) { return 1, nil })
		runErr = make(chan error, 1)
		runQueued := make(chan struct{})
		go func() {
			f := Async(p, func(*Worker) (int, error) { return 1, nil }) // as Run does, observably queued
			close(runQueued)
			_, err := f.Wait()
			runErr <- err
		}()
		<-runQueued
		g = p.Group(context.Background())
		for range 2 {
			g.Go(func(*Worker) error { groupRan.Add(1); return nil })
		}
		queued = 3 + 1 + 1 + 2
	}

	ctx, doneAt, cancel := newCtx()
	defer cancel()
	var n int
	var err error
	returned := make(chan struct{})
	go func() {
		n, err = p.Shutdown(ctx)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(300*time.Millisecond + stuckWatchdog):
		dumpGoroutines()
		unstick()
		<-returned
		_ = p.Close()
		t.Fatalf("Shutdown had not returned %v after its ctx was done, with one task blocked", stuckWatchdog)
	}
	took := time.Since(doneAt())
	st := p.Stats()
	t.Logf("Shutdown returned %v after its ctx was done: %d, %v", took, n, err)

	if took > giveUpBound {
		t.Errorf("Shutdown returned %v after its ctx was done; want within %v", took, giveUpBound)
	}
	if !errors.Is(err, ErrAbandoned) || !errors.Is(err, cause) {
		t.Errorf("Shutdown = %d, %v; want an error wrapping ErrAbandoned and %v", n, err, cause)
	}
	wantText := fmt.Sprintf("1 task still running, %d dropped", queued)
	if err == nil || !strings.Contains(err.Error(), wantText) {
		t.Errorf("Shutdown's error %q does not say %q", err, wantText)
	}
	if n != queued {
		t.Errorf("Shutdown reports %d dropped, want the %d queued behind the stuck task", n, queued)
	}
	if st.BusyWorkers != 1 || st.Abandoned != uint64(queued) {
		t.Errorf("after Shutdown gave up, Stats says %d running, %d abandoned; want 1 and %d", st.BusyWorkers, st.Abandoned, queued)
	}
	// The waiters of what was dropped have returned, before the stuck task ends.
	if workers == 1 {
		if !isDone(fut.Done()) {
			t.Error("the Future queued behind the stuck task is not done when Shutdown returns")
		} else if _, ferr := fut.Wait(); !errors.Is(ferr, ErrAbandoned) || !errors.Is(ferr, cause) {
			t.Errorf("dropped Future = %v; want ErrAbandoned and %v", ferr, cause)
		}
		if rerr := recv(t, runErr, "Wait of a dropped Future in another goroutine"); !errors.Is(rerr, ErrAbandoned) {
			t.Errorf("dropped Run = %v; want ErrAbandoned", rerr)
		}
		var gerr error
		within(t, hangBound, "Pool.Group.Wait on dropped tasks", func() { gerr = g.Wait() })
		if !errors.Is(gerr, ErrAbandoned) || !errors.Is(gerr, cause) {
			t.Errorf("Group.Wait of dropped tasks = %v; want ErrAbandoned and %v", gerr, cause)
		}
	}

	// Another Shutdown, its ctx already done, gives up too, at once and
	// with the same counts, while the task is still stuck.
	again, cancelAgain := context.WithCancel(context.Background())
	cancelAgain()
	var n2 int
	var err2 error
	start := time.Now()
	within(t, hangBound, "a second Shutdown with a done ctx", func() { n2, err2 = p.Shutdown(again) })
	if took := time.Since(start); took > giveUpBound {
		t.Errorf("a second Shutdown with a done ctx took %v; want within %v", took, giveUpBound)
	}
	if n2 != queued || !gaveUpEarly(err2) || !errors.Is(err2, context.Canceled) {
		t.Errorf("a second Shutdown = %d, %v; want %d and an error saying a task is still running, wrapping context.Canceled", n2, err2, queued)
	}

	// Close waits for the stuck task.
	closed := make(chan struct{})
	var closeErr error
	go func() { closeErr = p.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a task was still running")
	case <-time.After(50 * time.Millisecond): // no event says "Close is waiting"; a wrong Close returns at once
	}
	unstick()
	a := recv(t, after, "the stuck task finishing once released")
	waitClosed(t, closed, hangBound, "Close once the stuck task ended")

	// What the task queued after Shutdown gave up never ran; it was counted.
	if !errors.Is(a.submitErr, ErrClosed) {
		t.Errorf("Submit from the running task after Shutdown = %v, want ErrClosed", a.submitErr)
	}
	if !errors.Is(a.innerErr, ErrAbandoned) {
		t.Errorf("a Future the running task queued and waited for = %v, want ErrAbandoned", a.innerErr)
	}
	if !isDone(a.outer.Done()) {
		t.Error("a Future the running task queued on a node is not done after Close")
	} else if _, oerr := a.outer.Wait(); !errors.Is(oerr, ErrAbandoned) {
		t.Errorf("a Future the running task queued on a node = %v, want ErrAbandoned", oerr)
	}
	if a.childRan.Load() != 0 || plainRan.Load() != 0 || groupRan.Load() != 0 {
		t.Errorf("work ran after Shutdown gave up: %d children, %d plain, %d group tasks", a.childRan.Load(), plainRan.Load(), groupRan.Load())
	}
	final := p.Stats()
	if want := uint64(queued + 3); final.Abandoned != want {
		t.Errorf("after Close, Stats().Abandoned = %d; want %d: %d queued before Shutdown, 3 by the task after it", final.Abandoned, want, queued)
	}
	if final.BusyWorkers != 0 {
		t.Errorf("after Close, Stats().Running = %d, want 0", final.BusyWorkers)
	}
	if !errors.Is(closeErr, ErrAbandoned) || !strings.Contains(closeErr.Error(), fmt.Sprintf("%d tasks", queued+3)) {
		t.Errorf("Close after Shutdown gave up = %v; want ErrAbandoned with the %d tasks dropped", closeErr, queued+3)
	}
}

// gaveUpEarly reports whether err, from a Shutdown, says it returned
// while tasks were still running (or workers still ending): its count of
// dropped tasks is then the count so far, which Stats().Abandoned may
// exceed once the rest of the workers have ended. Otherwise its count is
// final.
func gaveUpEarly(err error) bool {
	return errors.Is(err, ErrAbandoned) && strings.Contains(err.Error(), " still running, ")
}

// closeRacingSubmits is one round: eight goroutines submit (Submit,
// Node.Submit, TrySubmit) in a loop until they are refused, and once closeAt
// submissions are accepted, Close runs among them. It returns how many
// submissions were accepted, how many tasks ran and how many the pool
// reports abandoned.
func closeRacingSubmits(t *testing.T, spec string, closeAt int64) (accepted, ran, abandoned int64) {
	t.Helper()
	p := newTestPool(t, specOpts(spec)...)
	nodes := p.Nodes()
	var ranN, acceptedN atomic.Int64
	task := func(*Worker) { ranN.Add(1) }
	const submitters = 8
	var done sync.WaitGroup
	closed := make(chan struct{})
	allDone := make(chan struct{})
	errs := make(chan error, submitters)
	for s := range submitters {
		done.Add(1)
		go func() {
			defer done.Done()
			for i := s; ; i++ {
				var err error
				switch i % 3 {
				case 0:
					err = p.Submit(context.Background(), task)
				case 1:
					err = p.Node(nodes[i%len(nodes)]).Submit(context.Background(), task)
				default:
					err = p.TrySubmit(task)
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("submitter %d: %w", s, err)
					return
				}
				if acceptedN.Add(1) == closeAt {
					go func() { _ = p.Close(); close(closed) }()
				}
			}
		}()
	}
	go func() { done.Wait(); close(allDone) }()
	waitClosed(t, closed, hangBound, "Close racing eight submitters")
	waitClosed(t, allDone, hangBound, "submitters seeing ErrClosed after Close")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return acceptedN.Load(), ranN.Load(), int64(p.Stats().Abandoned)
}

// Every submission that Close's racing does not refuse runs (or is
// counted abandoned): none is accepted into a shard that the workers have
// already given up on.
func TestCloseRacingSubmitsLosesNothing(t *testing.T) {
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	for _, spec := range []string{"", "2x2"} {
		t.Run(specName(spec), func(t *testing.T) {
			// The rounds are short; a time budget keeps slow machines
			// (and -race) within a few seconds.
			budget := time.Now().Add(2500 * time.Millisecond)
			lostRounds, played := 0, 0
			var lost, total int64
			for r := 0; r < rounds && time.Now().Before(budget); r++ {
				accepted, ran, abandoned := closeRacingSubmits(t, spec, int64(16<<(r%6)))
				played++
				total += accepted
				if ran+abandoned != accepted {
					if lostRounds < 5 {
						t.Errorf("round %d: %d submissions accepted, %d ran, %d abandoned: %d lost",
							r, accepted, ran, abandoned, accepted-ran-abandoned)
					}
					lostRounds++
					lost += accepted - ran - abandoned
				}
			}
			if lostRounds > 0 {
				t.Errorf("%d of %d rounds lost tasks (%d of %d accepted)", lostRounds, played, lost, total)
			}
			t.Logf("%d rounds, %d tasks accepted", played, total)
		})
	}
}

// stuckPool returns a one-worker pool whose worker runs a task that holds
// it until release is closed, with queued tasks behind it that count
// their runs in ran.
func stuckPool(t *testing.T, queued int) (p *Pool, release chan struct{}, ran *atomic.Int64) {
	t.Helper()
	p = newTestPool(t, WithWorkers(1))
	release = make(chan struct{})
	started := make(chan struct{})
	ran = new(atomic.Int64)
	if err := p.Submit(context.Background(), func(*Worker) { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, hangBound, "the long task starting")
	for range queued {
		if err := p.Submit(context.Background(), func(*Worker) { ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	return p, release, ran
}

// releaseAt closes release 20ms after ctx is done: the long task ends
// after Shutdown has given up on the queued ones. Nothing public tells
// when Shutdown has given up; should the worker still start a queued task
// or two first, the tests count what ran rather than expect every queued
// task abandoned.
func releaseAt(ctx context.Context, release chan struct{}) {
	go func() {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
}

type exitResult struct {
	what string
	n    int
	err  error
}

// A Shutdown that gave up at its deadline leaves the pool stopped:
// later exits (Close, Shutdown, in any order, concurrently) return and
// report the same abandoned count.
func TestCloseAfterTimedOutShutdownReturns(t *testing.T) {
	const queued = 100
	// timedOut shuts p down with a deadline the long task outlasts and
	// returns how many tasks it abandoned.
	timedOut := func(t *testing.T, p *Pool, release chan struct{}, ran *atomic.Int64) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		releaseAt(ctx, release)
		var n int
		var err error
		within(t, hangBound, "Shutdown with a 20ms deadline", func() { n, err = p.Shutdown(ctx) })
		if !errors.Is(err, context.DeadlineExceeded) || n+int(ran.Load()) != queued || n == 0 {
			t.Errorf("Shutdown = %d, %v with %d of %d queued tasks run; want the rest abandoned, DeadlineExceeded",
				n, err, ran.Load(), queued)
		}
		return n
	}
	// checkAfter runs the exits concurrently, each several times, and
	// checks that every one returns, the Shutdowns with the abandoned count.
	checkAfter := func(t *testing.T, p *Pool, want int, exits map[string]func() (int, error)) {
		t.Helper()
		results := make(chan exitResult, 3*len(exits))
		var wg sync.WaitGroup
		for what, exit := range exits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					n, err := exit()
					results <- exitResult{what, n, err}
				}
			}()
		}
		within(t, hangBound, "exits after a timed-out Shutdown", wg.Wait)
		close(results)
		for r := range results {
			if r.what != "Close" && r.n != want {
				t.Errorf("%s after a timed-out Shutdown = %d, %v; want %d abandoned", r.what, r.n, r.err, want)
			}
		}
		if got := int(p.Stats().Abandoned); got != want {
			t.Errorf("Stats().Abandoned = %d, want %d", got, want)
		}
	}
	closeExit := func(p *Pool) func() (int, error) {
		return func() (int, error) { return 0, p.Close() }
	}
	shutdownExit := func(p *Pool, d time.Duration) func() (int, error) {
		return func() (int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			return p.Shutdown(ctx)
		}
	}

	t.Run("Close", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		timedOut(t, p, release, ran)
		within(t, hangBound, "Close after a timed-out Shutdown", func() { _ = p.Close() })
	})
	t.Run("Shutdown-again", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		want := timedOut(t, p, release, ran)
		var n int
		within(t, hangBound, "Shutdown(Background) after a timed-out Shutdown", func() {
			n, _ = p.Shutdown(context.Background())
		})
		if n != want {
			t.Errorf("second Shutdown reports %d abandoned, want %d", n, want)
		}
	})
	t.Run("many-concurrently", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		want := timedOut(t, p, release, ran)
		checkAfter(t, p, want, map[string]func() (int, error){
			"Close":                 closeExit(p),
			"Shutdown(Background)":  shutdownExit(p, time.Hour),
			"Shutdown(1ms)":         shutdownExit(p, time.Millisecond),
			"Shutdown(expired ctx)": shutdownExit(p, 0),
		})
	})
	// Close is already waiting for the drain when a Shutdown gives up:
	// both return.
	t.Run("Close-then-timed-out-Shutdown", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		closed := make(chan struct{})
		go func() { _ = p.Close(); close(closed) }()
		timedOut(t, p, release, ran)
		waitClosed(t, closed, hangBound, "Close that was waiting when a Shutdown timed out")
	})
	// Several Shutdowns time out at once: each returns the same count,
	// the tasks are dropped once, and a Close after them returns.
	t.Run("timed-out-Shutdowns-concurrently", func(t *testing.T) {
		p, release, ran := stuckPool(t, queued)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		releaseAt(ctx, release)
		results := make(chan exitResult, 4)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := p.Shutdown(ctx)
				results <- exitResult{"Shutdown", n, err}
			}()
		}
		within(t, hangBound, "four concurrent Shutdowns with a 20ms deadline", wg.Wait)
		close(results)
		want := queued - int(ran.Load())
		for r := range results {
			if r.n != want || !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("concurrent Shutdown = %d, %v; want %d (of %d queued, %d ran), DeadlineExceeded", r.n, r.err, want, queued, ran.Load())
			}
		}
		within(t, hangBound, "Close after concurrent timed-out Shutdowns", func() { _ = p.Close() })
		if got := int(p.Stats().Abandoned); got != want {
			t.Errorf("Stats().Abandoned = %d, want %d (each task dropped once)", got, want)
		}
	})
}

// Waiters for work that a timed-out Shutdown dropped are released with an
// error saying so: ErrAbandoned, wrapping the deadline.
func TestTimedOutShutdownReleasesWaiters(t *testing.T) {
	wantAbandoned := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v; want an error wrapping ErrAbandoned and context.DeadlineExceeded", what, err)
		}
	}
	shutdownIn := func(t *testing.T, p *Pool, d time.Duration, release chan struct{}) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		if release != nil {
			releaseAt(ctx, release)
		}
		within(t, hangBound, fmt.Sprintf("Shutdown with a %v deadline", d), func() { _, _ = p.Shutdown(ctx) })
	}

	t.Run("ParallelFor", func(t *testing.T) {
		p := newTestPool(t, WithWorkers(2))
		const n = 1 << 12
		runs := make([]atomic.Int32, n)
		release := make(chan struct{})
		var blocked atomic.Int32
		allBlocked := make(chan struct{})
		body := func(w *Worker, lo, hi int) error {
			select {
			case <-release:
			default:
				if blocked.Add(1) == 2 {
					close(allBlocked)
				}
				<-release
			}
			for i := lo; i < hi; i++ {
				runs[i].Add(1)
			}
			return nil
		}
		var err error
		done := make(chan struct{})
		go func() { err = p.ParallelFor(context.Background(), n, 1, body); close(done) }()
		waitClosed(t, allBlocked, hangBound, "both workers entering the loop body")
		shutdownIn(t, p, 20*time.Millisecond, release)
		waitClosed(t, done, hangBound, "ParallelFor from outside when Shutdown gave up on its pieces")
		missing := unrun(t, runs)
		if missing > 0 {
			wantAbandoned(t, "ParallelFor", err)
		}
		if missing == 0 {
			// The workers finished the loop before they saw that Shutdown
			// had given up: nothing was dropped.
			if err != nil {
				t.Errorf("every index ran, yet ParallelFor = %v", err)
			}
			t.Logf("the loop finished before Shutdown gave up: nothing dropped")
		}
	})

	t.Run("Pool.Group", func(t *testing.T) {
		p := newTestPool(t, WithWorkers(1))
		release := make(chan struct{})
		started := make(chan struct{})
		g := p.Group(context.Background())
		g.Go(func(*Worker) error { close(started); <-release; return nil })
		const queued = 500
		var ran atomic.Int32
		for range queued {
			g.Go(func(*Worker) error { ran.Add(1); return nil })
		}
		waitClosed(t, started, hangBound, "the group's first task starting")
		var err error
		done := make(chan struct{})
		go func() { err = g.Wait(); close(done) }()
		shutdownIn(t, p, 20*time.Millisecond, release)
		waitClosed(t, done, hangBound, "Pool.Group.Wait when Shutdown gave up on the group's tasks")
		abandoned := int(p.Stats().Abandoned)
		if int(ran.Load())+abandoned != queued {
			t.Errorf("%d queued group tasks ran, %d abandoned; want %d in all", ran.Load(), abandoned, queued)
		}
		if abandoned > 0 {
			wantAbandoned(t, "Group.Wait", err)
		} else if err != nil {
			t.Errorf("every group task ran, yet Wait = %v", err)
		}
	})

	// A task waits in Join or Fork while the pool gives up: the call
	// returns; if b did not run, its error says it was abandoned (and
	// Fork's b value is zero). join runs a, which blocks until release,
	// and b, which counts itself and gives 7; it returns b's value.
	for _, c := range []struct {
		name string
		join func(w *Worker, a, b func()) (int, error)
	}{
		{"Join", func(w *Worker, a, b func()) (int, error) {
			rb := 0
			err := w.Join(func(*Worker) { a() }, func(*Worker) { b(); rb = 7 })
			return rb, err
		}},
		{"Fork", func(w *Worker, a, b func()) (int, error) {
			_, rb, err := Fork(w, func(*Worker, int) int { a(); return 1 }, 0, func(_ *Worker, x int) int { b(); return x }, 7)
			return rb, err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			release := make(chan struct{})
			inA := make(chan struct{})
			var bRan atomic.Int32
			var rb int
			var joinErr error
			joined := make(chan struct{})
			if err := p.Submit(context.Background(), func(w *Worker) {
				rb, joinErr = c.join(w, func() { close(inA); <-release }, func() { bRan.Add(1) })
				close(joined)
			}); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, inA, hangBound, c.name+"'s a starting")
			shutdownIn(t, p, 20*time.Millisecond, release)
			waitClosed(t, joined, hangBound, c.name+" in a task when Shutdown gave up")
			switch {
			case bRan.Load() > 1:
				t.Errorf("%s's b ran %d times", c.name, bRan.Load())
			case bRan.Load() == 1 && (joinErr != nil || rb != 7):
				t.Errorf("%s's b ran, yet %s = %d, %v", c.name, c.name, rb, joinErr)
			case bRan.Load() == 0 && (!errors.Is(joinErr, ErrAbandoned) || rb != 0):
				t.Errorf("%s's b was dropped, yet %s = %d, %v; want 0 and an error wrapping ErrAbandoned", c.name, c.name, rb, joinErr)
			}
		})
	}

	// A task waits in w.ParallelFor whose other node's block is queued
	// behind that node's long tasks when the pool gives up: the loop
	// returns (ErrAbandoned if it did not run every index), and Shutdown
	// with it.
	t.Run("Worker.ParallelFor", func(t *testing.T) {
		p := newTestPool(t, WithSpec("2x1"))
		nodes := p.Nodes()
		release := make(chan struct{})
		busy := make(chan struct{})
		if err := p.Node(nodes[1]).Strict().Submit(context.Background(), func(*Worker) { close(busy); <-release }); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, busy, hangBound, "node 1's worker taking the long task")
		const n = 64
		runs := make([]atomic.Int32, n)
		var loopErr error
		looping := make(chan struct{})
		looped := make(chan struct{})
		if err := p.Node(nodes[0]).Strict().Submit(context.Background(), func(w *Worker) {
			close(looping)
			loopErr = w.Pool().ParallelFor(context.Background(), n, 1, func(_ *Worker, lo, hi int) error {
				for i := lo; i < hi; i++ {
					runs[i].Add(1)
				}
				return nil
			})
			close(looped)
		}); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, looping, hangBound, "the looping task starting")
		shutdownIn(t, p, 20*time.Millisecond, release)
		waitClosed(t, looped, hangBound, "w.ParallelFor when Shutdown gave up on a block")
		missing := unrun(t, runs)
		if missing > 0 && !errors.Is(loopErr, ErrAbandoned) {
			t.Errorf("w.ParallelFor left %d indexes unrun and returned %v; want an error wrapping ErrAbandoned", missing, loopErr)
		}
		if missing == 0 && loopErr != nil {
			t.Errorf("w.ParallelFor ran every index and returned %v", loopErr)
		}
	})

	// Shutdown gives up at its deadline: it returns within the deadline,
	// plus the longest running task, plus a little to drop the backlog;
	// dropping does not wait for the backlog to be worked through.
	t.Run("returns-at-deadline", func(t *testing.T) {
		p := newTestPool(t, WithSpec("2x2"))
		const task = 200 * time.Microsecond
		// Enough queued tasks that working through them, or dropping
		// them one at a time, would show.
		backlog := 1_000_000
		if raceEnabled {
			backlog = 200_000
		}
		if testing.Short() {
			backlog /= 4
		}
		var ran atomic.Int64
		for range backlog {
			if err := p.Submit(context.Background(), func(*Worker) { spinFor(task); ran.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		// On a quiet machine Shutdown returns about 1 ms after the deadline;
		// the slack is for a shared 2-CPU machine, where another process
		// can hold a worker's thread off its CPU for tens of milliseconds.
		// Working through the backlog instead would take minutes.
		const deadline = 100 * time.Millisecond
		slack := 50 * time.Millisecond
		if raceEnabled {
			slack = 100 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		var n int
		var err error
		within(t, hangBound, "Shutdown with a 100ms deadline and a large backlog", func() { n, err = p.Shutdown(ctx) })
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %d, %v; want DeadlineExceeded", n, err)
		}
		if got := int64(n) + ran.Load(); got != int64(backlog) {
			t.Errorf("%d abandoned + %d ran = %d; want %d", n, ran.Load(), got, backlog)
		}
		if took > deadline+task+slack {
			t.Errorf("Shutdown with a %v deadline took %v (tasks take %v; %d abandoned)", deadline, took, task, n)
		}
		t.Logf("Shutdown took %v, %d of %d abandoned", took, n, backlog)
	})
}

// unrun returns how many indexes never ran, and fails the test at one
// that ran more than once.
func unrun(t *testing.T, runs []atomic.Int32) (missing int) {
	t.Helper()
	for i := range runs {
		switch runs[i].Load() {
		case 0:
			missing++
		case 1:
		default:
			t.Fatalf("index %d ran %d times", i, runs[i].Load())
		}
	}
	return missing
}

// After an abort, a worker waiting inside a task (runUntil) runs nothing
// but must still complete what it waits for: here that sits in a busy
// worker's LIFO slot, and that worker's task waits for the waiter. The
// waiter drops it from there, so both tasks and Shutdown return (a 3 s
// timeout inside T1 bounds the test if they do not).
func lifecycleAbortWaiterTakesFromBusyWorkers(t *testing.T) {
	for _, abort := range []bool{false, true} {
		name := "running"
		if abort {
			name = "aborting"
		}
		t.Run(name, func(t *testing.T) {
			p := newTestPool(t, WithWorkers(2))
			var fut atomic.Pointer[Future[int]]
			startWait := make(chan struct{})
			t2done := make(chan struct{})
			t2entered := make(chan struct{})
			var t2err error
			var t1TimedOut atomic.Bool
			// T2 occupies one worker until told to wait for F.
			if err := p.Submit(context.Background(), func(w *Worker) {
				close(t2entered)
				<-startWait
				_, t2err = fut.Load().Wait()
				close(t2done)
			}); err != nil {
				t.Fatal(err)
			}
			<-t2entered
			t1started := make(chan struct{})
			if err := p.Submit(context.Background(), func(w *Worker) {
				// F goes to this worker's LIFO slot.
				fut.Store(Async(w, func(*Worker) (int, error) { return 1, nil }))
				close(t1started)
				if abort {
					// wait for the pool to abort (Shutdown below)
					for p.state.Load() != aborting {
						time.Sleep(time.Millisecond)
					}
				}
				close(startWait)
				select {
				case <-t2done:
				case <-time.After(3 * time.Second):
					t1TimedOut.Store(true)
				}
			}); err != nil {
				t.Fatal(err)
			}
			<-t1started
			var shutErr error
			shutDone := make(chan struct{})
			go func() {
				if abort {
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					defer cancel()
					_, shutErr = p.Shutdown(ctx)
				} else {
					shutErr = p.Close()
				}
				close(shutDone)
			}()
			select {
			case <-shutDone:
			case <-time.After(10 * time.Second):
				t.Fatal("exit hung")
			}
			t.Logf("T1 timed out waiting for T2 (a permanent hang without the bound): %v; T2's Wait: %v; exit: %v; abandoned %d",
				t1TimedOut.Load(), t2err, shutErr, p.Stats().Abandoned)
			if t1TimedOut.Load() {
				t.Errorf("hang: T2's Future.Wait (inside a task, pool aborting) neither ran nor dropped F while F sat in busy worker's LIFO slot")
			}
		})
	}
}

// Waiting on one pool's Group/Future/loop from inside tasks of another
// pool, while the first pool closes or aborts: every waiter returns.
func lifecycleCrossPoolWaitersDuringExit(t *testing.T) {
	for iter := range 30 {
		a := newTestPool(t, WithSpec("2x1"))
		b := newTestPool(t, WithWorkers(2))
		var ran, accepted atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					fin := make(chan struct{})
					err := b.Submit(context.Background(), func(w *Worker) {
						defer close(fin)
						switch (c + i) % 4 {
						case 0:
							g := a.Group(context.Background())
							for range 4 {
								g.Go(func(w *Worker) error {
									w.Spawn(func(*Worker) { ran.Add(1) })
									return nil
								})
							}
							_ = g.Wait()
						case 1:
							f := Async(a, func(w *Worker) (int, error) { spinFor(10 * time.Microsecond); return 1, nil })
							_, _ = f.Wait()
						case 2:
							_ = a.ParallelFor(context.Background(), 1000, 10, func(*Worker, int, int) error { return nil })
						case 3:
							_, _ = MapReduce(context.Background(), a, 1000, 10, func(w *Worker, lo, hi int) (int, error) { return hi - lo, nil }, func(x, y int) int { return x + y })
						}
					})
					if err != nil {
						return
					}
					accepted.Add(1)
					select {
					case <-fin:
					case <-time.After(5 * time.Second):
						t.Errorf("iter %d: a waiter in pool b waiting on pool a hung", iter)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(iter%5) * time.Millisecond)
		if iter%2 == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iter%3)*100*time.Microsecond)
			within(t, 5*time.Second, "a.Shutdown", func() { a.Shutdown(ctx) })
			cancel()
		} else {
			within(t, 5*time.Second, "a.Close", func() { a.Close() })
		}
		close(stop)
		wg.Wait()
		within(t, 5*time.Second, "b.Close", func() { b.Close() })
	}
}

// Submit blocked on a full bounded shard while Close runs from
// inside a task, then from outside; TrySubmit/SubmitCtx racing.
func lifecycleBoundedCloseFromInside(t *testing.T) {
	for iter := range 50 {
		p := newTestPool(t, WithSpec("2x1"), WithShardBound(2))
		var accepted, ran atomic.Int64
		release := make(chan struct{})
		// occupy both workers
		for range 2 {
			accepted.Add(1)
			p.Submit(context.Background(), func(*Worker) { ran.Add(1); <-release })
		}
		var wg sync.WaitGroup
		for c := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var err error
					fn := func(*Worker) { ran.Add(1) }
					switch c % 3 {
					case 0:
						err = p.Submit(context.Background(), fn)
					case 1:
						err = p.TrySubmit(fn)
						if errors.Is(err, ErrFull) {
							runtime.Gosched()
							continue
						}
					case 2:
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Microsecond)
						err = p.Submit(ctx, fn)
						cancel()
						if errors.Is(err, context.DeadlineExceeded) {
							continue
						}
					}
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("submit: %v", err)
						}
						return
					}
					accepted.Add(1)
				}
			}()
		}
		time.Sleep(time.Millisecond)
		close(release)
		if err := p.Node(p.Nodes()[iter%2]).Strict().Submit(context.Background(), func(w *Worker) { ran.Add(1); _ = w.Pool().Close() }); err == nil {
			accepted.Add(1)
		}
		within(t, 5*time.Second, "outside Close", func() { p.Close() })
		within(t, 5*time.Second, "submitters", func() { wg.Wait() })
		if ran.Load()+int64(p.Stats().Abandoned) != accepted.Load() {
			t.Fatalf("iter %d: accepted %d, ran %d, abandoned %d", iter, accepted.Load(), ran.Load(), p.Stats().Abandoned)
		}
	}
}

// Exact accounting of plain tasks, Futures and Join halves while
// several Shutdowns with tiny deadlines and Closes race the drain.
func lifecycleShutdownRacesDrainAccounting(t *testing.T) {
	specs := []string{"", "2x2", "4x1", "2x1"}
	for iter := range 60 {
		spec := specs[iter%len(specs)]
		rng := rand.New(rand.NewPCG(uint64(iter), 7))
		opts := specOpts(spec)
		if iter%3 == 0 {
			opts = append(opts, WithShardBound(1+rng.IntN(8)))
		}
		if iter%5 == 0 {
			opts = append(opts, WithPanicHandler(func(any, []byte) {}))
		}
		p := newTestPool(t, opts...)
		var plainAcc, plainRan atomic.Int64
		var futRan, futAband, futOther atomic.Int64
		var joinBRan, joinBAband atomic.Int64
		var dblRun atomic.Int64
		var futMu sync.Mutex
		var futs []*Future[int]
		nodes := p.Nodes()
		var leaf func(depth int) func(*Worker)
		leaf = func(depth int) func(*Worker) {
			var once atomic.Bool
			return func(w *Worker) {
				if once.Swap(true) {
					dblRun.Add(1)
				}
				plainRan.Add(1)
				if depth > 0 {
					for range 2 {
						plainAcc.Add(1)
						w.Spawn(leaf(depth - 1))
					}
					if depth%2 == 0 {
						var bOnce atomic.Bool
						err := w.Join(func(*Worker) { spinFor(time.Microsecond) }, func(*Worker) {
							if bOnce.Swap(true) {
								dblRun.Add(1)
							}
							joinBRan.Add(1)
						})
						if errors.Is(err, ErrAbandoned) {
							joinBAband.Add(1)
						}
					}
					if depth == 3 {
						f := Async(w, func(*Worker) (int, error) { futRan.Add(1); return 1, nil })
						if _, err := f.Wait(); errors.Is(err, ErrAbandoned) {
							futAband.Add(1)
						} else if err != nil {
							futOther.Add(1)
						}
					}
				}
				if iter%5 == 0 && depth == 1 && rng2(depth) {
					panic("x")
				}
			}
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for c := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					var err error
					fn := leaf(i % 6)
					switch (c + i) % 4 {
					case 0:
						err = p.Submit(context.Background(), fn)
					case 1:
						err = p.Node(nodes[i%len(nodes)]).Strict().Submit(context.Background(), fn)
					case 2:
						err = p.TrySubmit(fn)
						if errors.Is(err, ErrFull) {
							continue
						}
					case 3:
						f := Async(p, func(w *Worker) (int, error) { futRan.Add(1); return 0, nil })
						futMu.Lock()
						futs = append(futs, f)
						futMu.Unlock()
						if f.isDone() && errors.Is(f.err, ErrClosed) {
							return
						}
						continue
					}
					if err != nil {
						return
					}
					plainAcc.Add(1)
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		var exits sync.WaitGroup
		var ns [4]int
		var errs [4]error
		for e := range 4 {
			exits.Add(1)
			go func() {
				defer exits.Done()
				if e == 3 {
					errs[e] = p.Close()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng2i(e, iter))*50*time.Microsecond)
				defer cancel()
				ns[e], errs[e] = p.Shutdown(ctx)
			}()
		}
		within(t, 10*time.Second, "exits", func() { exits.Wait() })
		close(stop)
		within(t, 10*time.Second, "clients", func() { wg.Wait() })
		st := p.Stats()
		// Futures from Async(p): they count in abandoned too.
		within(t, 5*time.Second, "outside futures", func() {
			for _, f := range futs {
				_, err := f.Wait()
				if errors.Is(err, ErrAbandoned) {
					futAband.Add(1)
				} else if err != nil && !errors.Is(err, ErrClosed) {
					futOther.Add(1)
				}
			}
		})
		abandoned := int64(st.Abandoned)
		lost := plainAcc.Load() - plainRan.Load()
		other := futAband.Load() + joinBAband.Load()
		if dblRun.Load() != 0 {
			t.Fatalf("iter %d: %d double runs", iter, dblRun.Load())
		}
		if lost+other != abandoned {
			t.Errorf("iter %d (%s): plain accepted %d ran %d (not run %d); futures aband %d, joinB aband %d; Stats.Abandoned %d; exits %v %v",
				iter, specName(spec), plainAcc.Load(), plainRan.Load(), lost, futAband.Load(), joinBAband.Load(), abandoned, ns, errs)
		}
		for e := range 3 {
			// A Shutdown that gave up with tasks still running counted
			// what was dropped until it returned.
			if ns[e] > int(abandoned) || ns[e] != int(abandoned) && !gaveUpEarly(errs[e]) {
				t.Errorf("iter %d: Shutdown %d returned n=%d, %v; Stats.Abandoned=%d", iter, e, ns[e], errs[e], abandoned)
			}
		}
		if futOther.Load() != 0 {
			t.Errorf("iter %d: %d futures with unexpected errors", iter, futOther.Load())
		}
	}
}

// ParallelFor, MapReduce and Groups with limits, from outside and
// inside, failing while Shutdown aborts: every waiter returns.
func lifecycleLoopsFailingDuringAbort(t *testing.T) {
	specs := []string{"", "2x2", "4x1"}
	for iter := range 40 {
		spec := specs[iter%len(specs)]
		opts := specOpts(spec)
		if iter%2 != 0 {
			opts = append(opts, WithCrossNodeLoops())
		}
		p := newTestPool(t, opts...)
		var wg sync.WaitGroup
		errc := make(chan string, 1000)
		boom := errors.New("boom")
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					fail := (c+i)%3 == 0
					body := func(w *Worker, lo, hi int) error {
						spinFor(5 * time.Microsecond)
						if fail && lo > 500 {
							return boom
						}
						return nil
					}
					var err error
					switch (c + i) % 4 {
					case 0:
						err = p.ParallelFor(context.Background(), 2000, 7, body)
					case 1:
						_, err = MapReduce(context.Background(), p, 2000, 7, func(w *Worker, lo, hi int) (int, error) {
							return hi - lo, body(w, lo, hi)
						}, func(a, b int) int { return a + b })
					case 2:
						_, err = Run(p, func(w *Worker) (int, error) {
							return 0, w.Pool().ParallelFor(context.Background(), 2000, 7, body)
						})
					case 3:
						_, err = Run(p, func(w *Worker) (int, error) {
							g := w.Pool().Group(context.Background())
							g.SetLimit(2)
							for k := range 20 {
								g.Go(func(w *Worker) error { return body(w, k*100, k*100+100) })
							}
							return 0, g.Wait()
						})
					}
					if err != nil && !errors.Is(err, boom) && !errors.Is(err, ErrAbandoned) && !errors.Is(err, ErrClosed) {
						select {
						case errc <- fmt.Sprintf("op %d: %v", (c+i)%4, err):
						default:
						}
					}
					if errors.Is(err, ErrClosed) {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(iter%4) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iter%3)*time.Millisecond)
		within(t, 10*time.Second, "Shutdown", func() { p.Shutdown(ctx) })
		cancel()
		within(t, 10*time.Second, "loop callers", func() { wg.Wait() })
		close(errc)
		for e := range errc {
			t.Errorf("iter %d: %s", iter, e)
		}
	}
}

// Huge Spawn backlogs (far beyond backlog) with outside submissions of
// every plain kind, while Shutdowns with tiny deadlines and a Close race:
// every accepted task runs at most once, and the ones that did not run
// are exactly the abandoned count.
func lifecycleBacklogAbortAccounting(t *testing.T) {
	t.Logf("queue.Capacity=%d backlog=%d", queue.Capacity, backlog)
	iters := 24
	for iter := range iters {
		spec := backlogSpecs[iter%len(backlogSpecs)]
		rng := rand.New(rand.NewPCG(uint64(iter), 99))
		opts := specOpts(spec)
		if iter%3 != 0 {
			opts = append(opts, WithShardBound(1+rng.IntN(8)))
		}
		if (iter/4)%3 == 1 {
			opts = append(opts, WithBinding(pin.Goroutines)) // each spec twice
		}
		var panics atomic.Int64
		var panicky func() bool
		if iter%4 == 1 {
			opts = append(opts, WithPanicHandler(func(any, []byte) { panics.Add(1) }))
			var k atomic.Int64
			panicky = func() bool { return k.Add(1)%997 == 0 }
		}
		p := newTestPool(t, opts...)
		l := newLedger(1 << 17)
		fanout := 3*backlog + rng.IntN(backlog)
		nodes := p.Nodes()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if i%16 == 15 {
						time.Sleep(50 * time.Microsecond)
					}
					select {
					case <-stop:
						return
					default:
					}
					id := l.id()
					if id < 0 {
						return
					}
					depth := (i + c) % 3
					fn := ledgerTree(l, id, depth, fanout, panicky)
					err := submitPlain(p, (c+i)%5, nodes[i%len(nodes)], fn)
					if err == nil {
						l.accepted[id].Store(true)
						continue
					}
					if errors.Is(err, ErrClosed) {
						return
					}
				}
			}()
		}
		pause := time.Duration(1000+rng.IntN(15000)) * time.Microsecond
		if iter%2 == 1 {
			pause *= 4
		}
		time.Sleep(pause)
		var exits sync.WaitGroup
		var ns [4]int
		var errs [4]error
		for e := range 4 {
			exits.Add(1)
			d := time.Duration(rng.IntN(6)) * 100 * time.Microsecond
			go func() {
				defer exits.Done()
				if e == 3 {
					errs[e] = p.Close()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				ns[e], errs[e] = p.Shutdown(ctx)
			}()
		}
		within(t, 10*time.Second, "exits", func() { exits.Wait() })
		close(stop)
		within(t, 10*time.Second, "clients", func() { wg.Wait() })
		abandoned := int64(p.Stats().Abandoned)
		acc, ran, notRun, stray := l.tally()
		if l.dbl.Load() != 0 {
			t.Fatalf("iter %d (%s): %d double runs, ids %v", iter, specName(spec), l.dbl.Load(), l.dblIDs)
		}
		if stray != 0 {
			t.Errorf("iter %d: %d tasks ran whose submission failed", iter, stray)
		}
		if notRun != abandoned {
			t.Errorf("iter %d (%s): accepted %d ran %d not run %d, but abandoned %d; exits %v %v",
				iter, specName(spec), acc, ran, notRun, abandoned, ns, errs)
		}
		for e := range 3 {
			// A Shutdown that gave up with tasks still running counted
			// what was dropped until it returned.
			if ns[e] > int(abandoned) || ns[e] != int(abandoned) && !gaveUpEarly(errs[e]) {
				t.Errorf("iter %d: Shutdown %d returned %d, %v; Stats %d", iter, e, ns[e], errs[e], abandoned)
			}
		}
		if testing.Verbose() && iter%6 == 0 {
			t.Logf("iter %d (%s): accepted %d ran %d abandoned %d panics %d", iter, specName(spec), acc, ran, abandoned, panics.Load())
		}
	}
}

// The same backlogs drained by Close alone: every accepted task runs
// exactly once and nothing is abandoned. Bounded records and function
// items interleave in one shard.
func lifecycleBacklogDrain(t *testing.T) {
	for iter := range 16 {
		spec := backlogSpecs[iter%len(backlogSpecs)]
		opts := specOpts(spec, WithShardBound(1+iter%8))
		if (iter/4)%2 == 1 {
			opts = append(opts, WithBinding(pin.Goroutines))
		}
		p := newTestPool(t, opts...)
		l := newLedger(1 << 17)
		fanout := 2*backlog + 7
		nodes := p.Nodes()
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 60 {
					id := l.id()
					if id < 0 {
						return
					}
					fn := ledgerTree(l, id, (i+c)%3, fanout, nil)
					err := submitPlain(p, (c+i)%4, nodes[i%len(nodes)], fn)
					if err == nil {
						l.accepted[id].Store(true)
					}
				}
			}()
		}
		within(t, 10*time.Second, "clients", func() { wg.Wait() })
		within(t, 10*time.Second, "Close", func() {
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		acc, ran, notRun, stray := l.tally()
		if l.dbl.Load() != 0 || notRun != 0 || stray != 0 || p.Stats().Abandoned != 0 {
			t.Fatalf("iter %d (%s): accepted %d ran %d notRun %d stray %d double %d (%v) abandoned %d",
				iter, specName(spec), acc, ran, notRun, stray, l.dbl.Load(), l.dblIDs, p.Stats().Abandoned)
		}
	}
}

// Shutdowns with tiny deadlines race task trees that reuse records:
// every index runs at most once, and every index that did not run was
// refused or is counted in Stats.Abandoned, exactly (each index is one
// task: a plain record, a Future, a Join's b or a Group's task). Bursts
// past the run queue's capacity overflow to the shards while the pool
// aborts.
func lifecycleReuseAbortAccounting(t *testing.T) {
	iters := 40
	if testing.Short() {
		iters = 10
	}
	budget := time.Now().Add(4 * time.Second)
	for iter := 0; iter < iters && time.Now().Before(budget); iter++ {
		spec := reuseSpecs[iter%len(reuseSpecs)]
		rng := rand.New(rand.NewPCG(uint64(iter), 11))
		p := newTestPool(t, reuseOpts(spec)...)
		var pr problems
		tr := newReuseTree(1<<16, &pr)
		tr.exact = true
		tr.burstEvery = 9
		stop := make(chan struct{})
		var clients sync.WaitGroup
		for range 2 {
			clients.Add(1)
			go func() {
				defer clients.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					i, ok := tr.issue()
					if !ok {
						return
					}
					if err := p.Submit(context.Background(), tr.task(i)); err != nil {
						tr.forget()
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		var exits sync.WaitGroup
		var ns [3]int
		var errs [3]error
		for e := range 3 {
			exits.Add(1)
			go func() {
				defer exits.Done()
				if e == 2 {
					errs[e] = p.Close()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng2i(e, iter))*100*time.Microsecond)
				defer cancel()
				ns[e], errs[e] = p.Shutdown(ctx)
			}()
		}
		within(t, hangBound, "exits", exits.Wait)
		close(stop)
		within(t, hangBound, "clients", clients.Wait)
		pr.report(t)
		missing := tr.checkOnce(t)
		st := p.Stats()
		if want := missing - tr.refused.Load(); int64(st.Abandoned) != want {
			t.Errorf("iter %d (%s): %d issued, %d never ran, %d refused: %d dropped, Stats.Abandoned %d (waiters told %d); exits %v %v",
				iter, specName(spec), tr.issuedN(), missing, tr.refused.Load(), want, st.Abandoned, tr.abandoned.Load(), ns, errs)
		}
		if st.Submitted != st.Total.TasksRun+st.Abandoned {
			t.Errorf("iter %d (%s): Submitted %d != TasksRun %d + Abandoned %d",
				iter, specName(spec), st.Submitted, st.Total.TasksRun, st.Abandoned)
		}
		for e := range 2 {
			// A Shutdown that gave up with tasks still running counted
			// what was dropped until it returned.
			if ns[e] > int(st.Abandoned) || ns[e] != int(st.Abandoned) && !gaveUpEarly(errs[e]) {
				t.Errorf("iter %d: Shutdown %d returned %d, %v; Stats.Abandoned %d", iter, e, ns[e], errs[e], st.Abandoned)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// TestLifecycleAdversarial runs the adversarial cases of Close and Shutdown, one subtest
// each: races and load meant to break what the tests above assert.
func TestLifecycleAdversarial(t *testing.T) {
	t.Run("AbortWaiterTakesFromBusyWorkers", lifecycleAbortWaiterTakesFromBusyWorkers)
	t.Run("CrossPoolWaitersDuringExit", lifecycleCrossPoolWaitersDuringExit)
	t.Run("BoundedCloseFromInside", lifecycleBoundedCloseFromInside)
	t.Run("ShutdownRacesDrainAccounting", lifecycleShutdownRacesDrainAccounting)
	t.Run("LoopsFailingDuringAbort", lifecycleLoopsFailingDuringAbort)
	t.Run("BacklogAbortAccounting", lifecycleBacklogAbortAccounting)
	t.Run("BacklogDrain", lifecycleBacklogDrain)
	t.Run("ReuseAbortAccounting", lifecycleReuseAbortAccounting)
}

var rngMu sync.Mutex

var grng = rand.New(rand.NewPCG(1, 2))

func rng2(int) bool { rngMu.Lock(); defer rngMu.Unlock(); return grng.IntN(4) == 0 }

func rng2i(e, iter int) int {
	rngMu.Lock()
	defer rngMu.Unlock()
	return grng.IntN(1 + (iter % 7))
}

// ledgerTree returns a plain task that records its run and spawns two
// children at each of depth levels, and fanout at level 2: enough to
// overflow the run queue well past backlog, so that the node's shard
// holds function items (task.go).
func ledgerTree(l *ledger, id, depth, fanout int, panicky func() bool) func(*Worker) {
	return func(w *Worker) {
		l.ran(id)
		if depth > 0 {
			n := 2
			if depth == 2 {
				n = fanout
			}
			for range n {
				c := l.id()
				if c < 0 {
					break
				}
				l.accepted[c].Store(true) // Spawn always accepts
				w.Spawn(ledgerTree(l, c, depth-1, fanout, panicky))
			}
		}
		if panicky != nil && panicky() {
			panic("ledger tree")
		}
	}
}

// submitPlain submits fn from outside the pool in one of five ways, by
// kind: Submit, a Node's Submit, a Strict Node's Submit, TrySubmit, or a
// Strict Node's Submit with a context that gives up after 200µs.
func submitPlain(p *Pool, kind, node int, fn func(*Worker)) error {
	switch kind {
	case 0:
		return p.Submit(context.Background(), fn)
	case 1:
		return p.Node(node).Submit(context.Background(), fn)
	case 2:
		return p.Node(node).Strict().Submit(context.Background(), fn)
	case 3:
		return p.TrySubmit(fn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Microsecond)
	defer cancel()
	return p.Node(node).Strict().Submit(ctx, fn)
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	var ran atomic.Int32
	block := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { <-block })
	for range 1000 {
		_ = p.Submit(context.Background(), func(w *Worker) { ran.Add(1); w.Spawn(func(*Worker) { ran.Add(1) }) })
	}
	time.AfterFunc(20*time.Millisecond, func() { close(block) })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ran.Load(); n != 2000 {
		t.Errorf("Close ran %d of 2000 tasks", n)
	}
	if err := p.Submit(context.Background(), func(*Worker) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestShutdownReportsAbandoned(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	block := make(chan struct{})
	started := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { close(started); <-block })
	<-started
	for range 100 {
		_ = p.Submit(context.Background(), func(*Worker) {})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	time.AfterFunc(60*time.Millisecond, func() { close(block) })
	n, err := p.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || n != 100 {
		t.Errorf("Shutdown = %d, %v; want 100 abandoned, DeadlineExceeded", n, err)
	}
	if p.Stats().Abandoned != 100 {
		t.Errorf("Stats().Abandoned = %d", p.Stats().Abandoned)
	}
}

// Close from inside a task would wait for itself: it closes intake and
// returns ErrInsideTask at once; the pool still runs what was queued, and
// Close from outside waits for it.
func TestCloseFromInsideATask(t *testing.T) {
	p := newTestPool(t, WithWorkers(2))
	release := make(chan struct{})
	blocked := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { close(blocked); <-release }) // holds one worker
	<-blocked
	var ran atomic.Int32
	for range 10 {
		_ = p.Submit(context.Background(), func(*Worker) { ran.Add(1) })
	}
	got := make(chan error, 1)
	if err := p.Submit(context.Background(), func(*Worker) { got <- p.Close() }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, ErrInsideTask) {
			t.Errorf("Close inside a task = %v, want ErrInsideTask", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close inside a task did not return")
	}
	if err := p.Submit(context.Background(), func(*Worker) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close inside a task = %v, want ErrClosed", err)
	}
	close(release)
	if err := p.Close(); err != nil {
		t.Errorf("Close from outside: %v", err)
	}
	if ran.Load() != 10 {
		t.Errorf("%d of 10 queued tasks ran", ran.Load())
	}
}

// Close ends the workers' threads: none of them is left behind. (The
// thread count alone cannot tell: the runtime keeps idle threads it
// started meanwhile.)
func TestCloseLeavesNoThreads(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc/self/task")
	}
	p := newTestPool(t, WithSpec("4x2"))
	var tids []int
	for _, w := range p.workers {
		tids = append(tids, w.th.TID()) // set before the worker reported to New
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	left := func() (alive []int) {
		for _, tid := range tids {
			if tid == os.Getpid() {
				// The main thread cannot exit: the runtime parks it for
				// good once a goroutine locked to it ends (its mask was
				// put back first).
				continue
			}
			if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err == nil {
				alive = append(alive, tid)
			}
		}
		return alive
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(left()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive := left(); len(alive) > 0 {
		t.Errorf("worker threads %v of %v still alive 5s after Close", alive, tids)
	}
}

// A worker that waits inside a task when a Shutdown gives up drops the
// queues and the shards itself (dropQueued) and counts what it drops:
// function items (plain tasks queued without a record) as well as
// records. Shutdown then reports every one of them.
func TestDropQueuedCountsFunctionItems(t *testing.T) {
	p := newTestPool(t, WithSpec("1x1"))
	node := p.Nodes()[0]
	started, proceed := make(chan struct{}), make(chan struct{})
	var ran atomic.Int32
	var waitErr error
	if err := p.Submit(context.Background(), func(w *Worker) {
		close(started)
		<-proceed // the Shutdown has given up
		f := Async(w.Pool().Node(node), func(*Worker) (int, error) { ran.Add(1); return 0, nil })
		_, waitErr = f.Wait() // helps: drops everything queued instead
	}); err != nil {
		t.Fatal(err)
	}
	<-started // the only worker is busy: what follows stays queued
	const n = 10
	for range n {
		if err := p.Submit(context.Background(), func(*Worker) { ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := p.Shutdown(expired)
		done <- result{n, err}
	}()
	for !p.aborted() {
		time.Sleep(100 * time.Microsecond)
	}
	close(proceed)
	var r result
	within(t, 10*time.Second, "Shutdown", func() { r = <-done })
	if r.n != n+1 || !errors.Is(r.err, context.Canceled) {
		t.Errorf("Shutdown = %d, %v; want %d abandoned (%d plain tasks, one Future)", r.n, r.err, n+1, n)
	}
	if !errors.Is(waitErr, ErrAbandoned) {
		t.Errorf("the Future dropped while its waiter helped returned %v, want ErrAbandoned", waitErr)
	}
	if got := ran.Load(); got != 0 {
		t.Errorf("%d dropped tasks ran", got)
	}
}

// A worker takes a Group's task and finds the pool running (runUntil
// looks at its state between taking a task and running it), and before
// it starts the task a Shutdown gives up and its sweep drops the task's
// sibling, which fails the group. The task then skips its function, as a
// failed group's tasks do: it is dropped too, and must be counted, or it
// is neither run nor counted (TestLifecycleRandomInterleavings' "lost").
// The test takes the task itself, from the task that made the group, to
// hold the worker in that window.
func TestGroupTaskSkippedAfterAbortIsCounted(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	taken, gaveUp, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var ran atomic.Int32
	var waitErr error
	if err := p.Submit(context.Background(), func(w *Worker) {
		defer close(done)
		g := w.Pool().Group(context.Background())
		for range 2 {
			g.Go(func(*Worker) error { ran.Add(1); return nil }) // to w's run queue
		}
		it, ok := w.local.Pop() // as runUntil takes it, with the pool running
		if !ok {
			t.Error("the Group's tasks are not in the worker's run queue")
			return
		}
		close(taken)
		<-gaveUp  // the Shutdown gave up meanwhile; its sweep dropped the other task
		w.run(it) // what runUntil does next with the task it took
		waitErr = g.Wait()
	}); err != nil {
		t.Fatal(err)
	}
	<-taken
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	var n int
	var err error
	within(t, 10*time.Second, "Shutdown", func() { n, err = p.Shutdown(expired) })
	if n != 1 || !errors.Is(err, ErrAbandoned) {
		t.Errorf("Shutdown = %d, %v; want 1 dropped by the sweep, 1 task still running", n, err)
	}
	close(gaveUp)
	<-done
	within(t, 10*time.Second, "Close", func() { err = p.Close() })
	if !errors.Is(waitErr, ErrAbandoned) {
		t.Errorf("Group.Wait = %v, want ErrAbandoned", waitErr)
	}
	st := p.Stats()
	if got, abandoned := ran.Load(), st.Abandoned; got+int32(abandoned) != 2 {
		t.Errorf("of the Group's 2 tasks %d ran and %d were counted abandoned: %d lost (Close = %v)", got, abandoned, 2-got-int32(abandoned), err)
	}
	// The skipped function counts as dropped, not also as run.
	if st.Submitted != st.Total.TasksRun+st.Abandoned || st.Total.Completed != st.Total.TasksRun {
		t.Errorf("after Close: Submitted %d, TasksRun %d, Completed %d, Abandoned %d; want Submitted = TasksRun + Abandoned, Completed = TasksRun",
			st.Submitted, st.Total.TasksRun, st.Total.Completed, st.Abandoned)
	}
}

// lateCtx is a context whose deadline has passed while its Done is not
// closed yet: a context.WithTimeout between its deadline and the moment
// its timer fires, held open here until the test closes done.
type lateCtx struct {
	context.Context
	deadline time.Time
	done     chan struct{}
}

func (c *lateCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *lateCtx) Done() <-chan struct{}       { return c.done }
func (c *lateCtx) Err() error {
	if isDone(c.done) {
		return context.DeadlineExceeded
	}
	return nil
}

// The workers give up at a Shutdown's deadline themselves, and may see it
// pass before the ctx's timer fires. Shutdown then still returns with
// ctx done and ctx's error, the count of tasks dropped once: it returned
// before ctx was done with "pool: task dropped by Shutdown: N tasks:
// pool: task dropped by Shutdown: context deadline exceeded", ctx.Err()
// still nil, now and then with a context.WithTimeout and every time with
// lateCtx. Close afterwards names the sentinel once, the count, and
// no context's error: its own never ends.
func TestShutdownErrorWhenWorkersSeeTheDeadlineFirst(t *testing.T) {
	p := newTestPool(t, WithWorkers(1))
	const queued = 100
	started := make(chan struct{})
	release := make(chan struct{})
	_ = p.Submit(context.Background(), func(*Worker) { close(started); <-release })
	<-started
	for range queued {
		_ = p.Submit(context.Background(), func(*Worker) {})
	}
	ctx := &lateCtx{Context: context.Background(), deadline: time.Now(), done: make(chan struct{})}
	go func() {
		// Once Shutdown has set its deadline, the worker returns to find it
		// passed. Released before, it could run the queue empty first on a
		// loaded machine, leaving Shutdown nothing to drop.
		for p.deadline.Load() == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		close(release)
	}()
	time.AfterFunc(30*time.Millisecond, func() { close(ctx.done) })
	var n int
	var err, ctxErr error
	within(t, hangBound, "Shutdown past its deadline", func() { n, err = p.Shutdown(ctx); ctxErr = ctx.Err() })
	if ctxErr == nil || !errors.Is(err, ctxErr) || n != queued {
		t.Errorf("Shutdown = %d, %v with ctx.Err() %v on return; want %d dropped, ctx done and its error", n, err, ctxErr, queued)
	}
	err = p.Close()
	want := fmt.Sprintf("%v: %d tasks", ErrAbandoned, queued)
	if !errors.Is(err, ErrAbandoned) || errors.Is(err, context.DeadlineExceeded) || err.Error() != want {
		t.Errorf("Close after it = %v; want %q", err, want)
	}
}

// Shutdown with context.WithTimeout, many rounds: whenever it returns a
// deadline error, its ctx is done, and the error names ErrAbandoned at
// most once.
func TestShutdownDeadlineErrorOnlyWithCtxDone(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for round := range rounds {
		p := newTestPool(t, WithWorkers(2))
		for range 2000 {
			_ = p.Submit(context.Background(), func(*Worker) { spinFor(20 * time.Microsecond) })
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		var err, ctxErr error
		within(t, hangBound, "Shutdown with a 5ms deadline", func() { _, err = p.Shutdown(ctx); ctxErr = ctx.Err() })
		cancel()
		if err != nil && ctxErr == nil && errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("round %d: Shutdown = %v before its ctx was done", round, err)
		}
		if err != nil && strings.Count(err.Error(), ErrAbandoned.Error()) > 1 {
			t.Errorf("round %d: Shutdown = %q: the sentinel more than once", round, err)
		}
		if err := p.Close(); err != nil && strings.Count(err.Error(), ErrAbandoned.Error()) > 1 {
			t.Errorf("round %d: Close = %q: the sentinel more than once", round, err)
		}
	}
}

// Close and Shutdown from inside a task each return ErrInsideTask, in an
// error that names the call made.
func TestExitsFromInsideATaskNameTheCall(t *testing.T) {
	for _, exit := range []struct {
		name string
		call func(p *Pool) error
	}{
		{"Close", func(p *Pool) error { return p.Close() }},
		{"Shutdown", func(p *Pool) error { _, err := p.Shutdown(context.Background()); return err }},
	} {
		p := newTestPool(t, WithWorkers(1))
		got := make(chan error, 1)
		if err := p.Submit(context.Background(), func(w *Worker) { got <- exit.call(w.Pool()) }); err != nil {
			t.Fatal(err)
		}
		err := recv(t, got, exit.name+" from inside a task")
		if !errors.Is(err, ErrInsideTask) || !strings.HasPrefix(err.Error(), "pool: "+exit.name+" from inside one of the pool's tasks") {
			t.Errorf("%s from inside a task = %q, want ErrInsideTask naming %s", exit.name, err, exit.name)
		}
		if err := p.Close(); err != nil {
			t.Errorf("Close from outside: %v", err)
		}
	}
}
