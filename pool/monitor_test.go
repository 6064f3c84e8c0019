package pool

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/topology"
)

// fakeMachine is a machine for tests: the process's CPUs and GOMAXPROCS
// as the test sets them, in place of what the reference thread reads.
type fakeMachine struct {
	mu sync.Mutex
	r  place.Reading
}

func newFakeMachine(cpus topology.CPUSet, procs int) *fakeMachine {
	f := &fakeMachine{}
	f.set(cpus, procs)
	return f
}

// set makes cpus the process's CPUs: its mask, and the online CPUs.
func (f *fakeMachine) set(cpus topology.CPUSet, procs int) {
	f.mu.Lock()
	f.r = place.Reading{PC: topology.ProcessCPUs{Mask: cpus, Online: cpus}, Procs: procs}
	f.mu.Unlock()
}

// offline takes cpus offline, as hotplug does: the mask stays.
func (f *fakeMachine) offline(cpus topology.CPUSet) {
	f.mu.Lock()
	f.r.PC.Online = f.r.PC.Online.AndNot(cpus)
	f.mu.Unlock()
}

func (f *fakeMachine) read() place.Reading {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r
}

// withMachine has the pool read f every interval.
func withMachine(f *fakeMachine, interval time.Duration) Option {
	return optionFunc(func(c *config) error {
		c.machine, c.watch, c.watchSet = f.read, interval, true
		return nil
	})
}

// twoCPUs returns two CPUs of this process's mask, or skips.
func twoCPUs(t *testing.T) (all topology.CPUSet, a, b int) {
	t.Helper()
	all, err := topology.ThreadAffinity(os.Getpid())
	if err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	if all.Len() < 2 {
		t.Skipf("the process may use %d CPU (%s); these tests narrow it to one of two", all.Len(), all)
	}
	l := all.List()
	return all, l[0], l[1]
}

// workerMasks reads each worker's thread mask by its thread ID; a worker
// between two threads reads as empty.
func workerMasks(p *Pool) []topology.CPUSet {
	out := make([]topology.CPUSet, len(p.workers))
	for i, w := range p.workers {
		if tid := w.th.TID(); tid > 0 {
			out[i], _ = topology.ThreadAffinity(tid)
		}
	}
	return out
}

// stream keeps submitting counted tasks until stopped; every task must
// run exactly once.
type stream struct {
	l    *ledger
	stop atomic.Bool
	done sync.WaitGroup
}

func startStream(t *testing.T, p *Pool, n int) *stream {
	s := &stream{l: newLedger(n)}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for !s.stop.Load() {
			i := s.l.id()
			if i < 0 {
				return
			}
			s.l.accepted[i].Store(true)
			if err := p.Submit(context.Background(), func(*Worker) { spinFor(20 * time.Microsecond); s.l.ran(i) }); err != nil {
				s.l.accepted[i].Store(false)
				t.Errorf("Submit: %v", err)
				return
			}
			if i%64 == 0 {
				time.Sleep(200 * time.Microsecond) // let workers park and be woken
			}
		}
	}()
	return s
}

// finish stops the stream, closes p and checks every task ran once.
func (s *stream) finish(t *testing.T, p *Pool) {
	t.Helper()
	s.stop.Store(true)
	s.done.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	acc, ran, notRun, stray := s.l.tally()
	if notRun != 0 || stray != 0 || s.l.dbl.Load() != 0 || acc != ran {
		t.Errorf("tasks: %d accepted, %d ran, %d never ran, %d ran unaccepted, %d ran twice", acc, ran, notRun, stray, s.l.dbl.Load())
	}
	t.Logf("%d tasks, each ran once", ran)
}

// holdsInside checks, for d, that no worker's mask has a CPU outside
// cpus; it returns the first violation.
func holdsInside(p *Pool, cpus topology.CPUSet, d time.Duration) string {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for i, m := range workerMasks(p) {
			if !m.IsEmpty() && !m.AndNot(cpus).IsEmpty() {
				return fmt.Sprintf("worker %d's thread mask is %s", i, m)
			}
		}
	}
	return ""
}

// masksAre waits up to d for every worker's mask to be want[i].
func masksAre(p *Pool, want []topology.CPUSet, d time.Duration) bool {
	return eventually(d, func() bool {
		for i, m := range workerMasks(p) {
			if !m.Equal(want[i]) {
				return false
			}
		}
		return true
	})
}

// fakeWatch is the monitor's interval with a fake machine.
const fakeWatch = 20 * time.Millisecond

// TestReplanMovesWorkersInsideTheProcessCPUs takes the CPUs of synthetic
// node 1 away from the process (its mask, then the online CPUs) and gives
// them back, under a counted stream: worker 1 moves to node 0, the
// nearest with CPUs, says so, and goes back; every task runs once.
func TestReplanMovesWorkersInsideTheProcessCPUs(t *testing.T) {
	all, a, b := twoCPUs(t)
	for _, how := range []string{"mask", "offline"} {
		t.Run(how, func(t *testing.T) {
			f := newFakeMachine(all, 2)
			p := newTestPool(t, WithSpec("2x1"), withMachine(f, fakeWatch))
			w0, w1 := p.workers[0], p.workers[1]
			if !w0.th.Bound().Equal(topology.NewCPUSet(a)) || !w1.th.Bound().Equal(topology.NewCPUSet(b)) {
				_ = p.Close()
				t.Skipf("2x1 placed the workers on %s and %s, not on CPUs %d and %d", w0.th.Bound(), w1.th.Bound(), a, b)
			}
			s := startStream(t, p, 1<<20)
			left := topology.NewCPUSet(a)
			if how == "mask" {
				f.set(left, 2)
			} else {
				f.offline(topology.NewCPUSet(b))
			}
			want := []topology.CPUSet{left, left}
			if !masksAre(p, want, hangBound) {
				t.Fatalf("node 1's CPU gone: worker masks %v, want %v", workerMasks(p), want)
			}
			explain := p.Explain()
			for _, say := range []string{"re-plans:", "worker 1 " + w1.th.Bound().String() + " -> " + left.String(), "node 1 has none of the process's CPUs: on node 0"} {
				if !strings.Contains(explain, say) {
					t.Errorf("Explain does not say %q:\n%s", say, explain)
				}
			}
			if got := p.Stats().Workers[1].Bound; got != left.String() {
				t.Errorf("Stats: worker 1 bound to %q, want %q", got, left)
			}
			f.set(all, 2)
			want = []topology.CPUSet{w0.th.Bound(), w1.th.Bound()}
			if !masksAre(p, want, hangBound) {
				t.Errorf("node 1's CPU back: worker masks %v, want %v", workerMasks(p), want)
			}
			if e := p.Explain(); !eventually(hangBound, func() bool { return !strings.Contains(p.Explain(), "worker 1 (node 1) on CPUs") }) {
				t.Errorf("Explain still reports worker 1 off its node:\n%s", e)
			}
			s.finish(t, p)
			if got := p.Stats().Total.Replans; got == 0 {
				t.Errorf("Counters.Replans: 0 after two re-plans")
			}
		})
	}
}

// TestExplainReportsFewerProcessorsThanWorkers: GOMAXPROCS below the
// worker count is a degradation Explain reports while it lasts.
func TestExplainReportsFewerProcessorsThanWorkers(t *testing.T) {
	all, _, _ := twoCPUs(t)
	f := newFakeMachine(all, 2)
	p := newTestPool(t, WithSpec("2x1"), withMachine(f, fakeWatch))
	defer p.Close()
	f.set(all, 1)
	say := "GOMAXPROCS is 1, below the 2 workers"
	if !eventually(hangBound, func() bool { return strings.Contains(p.Explain(), say) }) {
		t.Errorf("Explain does not say %q:\n%s", say, p.Explain())
	}
	f.set(all, 2)
	if !eventually(hangBound, func() bool { return !strings.Contains(p.Explain(), say) }) {
		t.Errorf("Explain still says %q with GOMAXPROCS 2:\n%s", say, p.Explain())
	}
}

// Counters.Replans counts re-plans a worker took up on a thread of its
// own: workers that lock no thread (pin.Goroutines) take none up, however
// often the machine changes, and count none; bound workers count them.
func TestReplansCountOnlyBoundThreads(t *testing.T) {
	all, _, _ := twoCPUs(t)
	for _, b := range []pin.Binding{pin.Goroutines, pin.NUMADomains} {
		t.Run(b.String(), func(t *testing.T) {
			f := newFakeMachine(all, 2)
			p := newTestPool(t, WithSpec("2x1"), WithBinding(b), withMachine(f, fakeWatch))
			defer p.Close()
			gen := p.placer.Machine().Gen
			f.set(all, 1) // a GOMAXPROCS change: a new generation, no move
			if !eventually(hangBound, func() bool { return p.placer.Machine().Gen > gen }) {
				t.Fatal("the monitor made no new generation")
			}
			// Wake every worker: each passes a stop point (settle).
			for range 20 {
				if _, err := Run(p, func(*Worker) (int, error) { return 0, nil }); err != nil {
					t.Fatal(err)
				}
				g := p.Group(context.Background())
				for range 4 {
					g.Go(func(*Worker) error { spinFor(100 * time.Microsecond); return nil })
				}
				_ = g.Wait()
			}
			got := p.Stats().Total.Replans
			switch {
			case !b.LocksThread() && got != 0:
				t.Errorf("%d re-plans counted by workers that lock no thread", got)
			case b.LocksThread() && got == 0:
				t.Errorf("no re-plan counted by bound workers after a new generation")
			}
		})
	}
}

// TestExplainReportsCPUsThatCameAfterNew: a pool made while the process
// had one CPU keeps its plan when a second comes, and says so.
func TestExplainReportsCPUsThatCameAfterNew(t *testing.T) {
	all, a, b := twoCPUs(t)
	f := newFakeMachine(topology.NewCPUSet(a), 2)
	p := newTestPool(t, withMachine(f, fakeWatch))
	defer p.Close()
	f.set(all, 2)
	say := fmt.Sprintf("CPUs %d came to the process after New", b)
	if !eventually(hangBound, func() bool { return strings.Contains(p.Explain(), say) }) {
		t.Errorf("Explain does not say %q:\n%s", say, p.Explain())
	}
}

// TestMonitorRunsWhilePoolsLive: the monitor's goroutine starts with the
// first pool and ends with the last; a watch of 0 makes no look.
func TestMonitorRunsWhilePoolsLive(t *testing.T) {
	running := func() bool {
		on, _ := place.MonitorRunning()
		return on
	}
	if !eventually(hangBound, func() bool { return !running() }) {
		t.Skip("a pool of another test still runs")
	}
	off := newFakeMachine(topology.CPUSet{}, 2)
	p := newTestPool(t, withMachine(off, 0))
	q := newTestPool(t, WithMachineWatch(time.Hour))
	if !running() {
		t.Error("no monitor while two pools live")
	}
	_ = p.Close()
	if !running() {
		t.Error("no monitor while a pool lives")
	}
	_ = q.Close()
	if running() {
		t.Error("the monitor runs on after the last pool ended")
	}
	if _, n := place.MonitorRunning(); n != 0 {
		t.Errorf("the monitor still watches %d pools", n)
	}
}

func TestMachineWatchSettings(t *testing.T) {
	for _, tc := range []struct {
		env  string
		opts []Option
		want time.Duration
		err  string
	}{
		{"", nil, time.Second, ""},
		{"200ms", nil, 200 * time.Millisecond, ""},
		{"0", nil, 0, ""},
		{"200ms", []Option{WithMachineWatch(0)}, 0, ""},
		{"soon", nil, 0, `NUMAPOOL_MACHINE_WATCH="soon": want a duration`},
		{"-1s", nil, 0, `NUMAPOOL_MACHINE_WATCH="-1s"`},
		{"", []Option{WithMachineWatch(-time.Second)}, 0, "WithMachineWatch(-1s)"},
	} {
		c, err := newConfig(tc.opts, env(map[string]string{envMachineWatch: tc.env}))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q %d options: error %v, want one saying %q", tc.env, len(tc.opts), err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.env, err)
		case tc.err == "" && c.watch != tc.want:
			t.Errorf("%q %d options: interval %v, want %v", tc.env, len(tc.opts), c.watch, tc.want)
		}
	}
}

// BenchmarkMachineLook is what one look costs the monitor's thread: the
// reading (a mask, the cgroup cpuset and online CPUs, GOMAXPROCS) and a
// pool's check of its workers' masks.
func BenchmarkMachineLook(b *testing.B) {
	p, err := newPool([]Option{WithWorkers(2), WithMachineWatch(0), WithoutEnv()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	r := place.NewReader()
	defer r.Close()
	b.ResetTimer()
	for range b.N {
		p.placer.Observe(r.Read(), time.Now())
	}
}

// When every CPU of a thread goes offline the kernel widens its mask to
// all of the process's CPUs, and leaves it so when they come back. A
// look that missed the offline (it lasted less than the interval) then
// finds worker 1's thread on every CPU: that is no one's narrowing to
// honour, and the worker is bound to its CPU again.
func TestKernelWideningIsNotHonoured(t *testing.T) {
	all, a, b := twoCPUs(t)
	f := newFakeMachine(all, 2)
	p := newTestPool(t, WithSpec("2x1"), withMachine(f, fakeWatch))
	defer p.Close()
	w0, w1 := p.workers[0], p.workers[1]
	if !w0.th.Bound().Equal(topology.NewCPUSet(a)) || !w1.th.Bound().Equal(topology.NewCPUSet(b)) {
		t.Skipf("2x1 placed the workers on %s and %s, not on CPUs %d and %d", w0.th.Bound(), w1.th.Bound(), a, b)
	}
	s := startStream(t, p, 1<<20)
	var tid int
	if !eventually(hangBound, func() bool { tid = w1.th.TID(); return tid > 0 }) {
		t.Fatal("worker 1 has no thread")
	}
	if err := pin.Aim(tid, all); err != nil { // as the kernel does
		t.Fatal(err)
	}
	want := []topology.CPUSet{w0.th.Bound(), w1.th.Bound()}
	if !masksAre(p, want, hangBound) {
		t.Errorf("worker 1 widened to %s by the kernel: masks %v, want %v", all, workerMasks(p), want)
	}
	if e := p.Explain(); strings.Contains(e, "from outside") {
		t.Errorf("Explain honours the kernel's widening as a mask set from outside:\n%s", e)
	}
	s.finish(t, p)
}

// Explain's launcher line is read from the process's CPUs as the pool saw
// them last, not as the process started: after a cgroup cpuset shrinks
// to one CPU it says the process was given one.
func TestExplainLauncherFollowsTheCpuset(t *testing.T) {
	all, a, _ := twoCPUs(t)
	f := newFakeMachine(all, 2)
	p := newTestPool(t, WithSpec("2x1"), withMachine(f, fakeWatch))
	defer p.Close()
	one := topology.NewCPUSet(a)
	f.mu.Lock()
	f.r.PC = topology.ProcessCPUs{Mask: one, Online: all, Cgroup: one, CgroupFile: "/sys/fs/cgroup/job/cpuset.cpus.effective"}
	f.mu.Unlock()
	want := "CPUs given 1 of " + fmt.Sprint(all.Len()) + " online"
	if !eventually(hangBound, func() bool { return strings.Contains(p.Explain(), want) }) {
		t.Errorf("after the cpuset shrank to CPU %d, Explain does not say %q:\n%s", a, want, p.Explain())
	}
}

// A re-plan is a log event of category numapool.replan in an execution
// trace, with what moved.
func TestReplanIsTraced(t *testing.T) {
	all, a, _ := twoCPUs(t)
	if trace.IsEnabled() {
		t.Skip("a trace is already being recorded")
	}
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skip(err)
	}
	f := newFakeMachine(all, 2)
	p := newTestPool(t, WithSpec("2x1"), withMachine(f, fakeWatch))
	f.set(topology.NewCPUSet(a), 2)
	replanned := eventually(hangBound, func() bool { return strings.Contains(p.Explain(), "re-plans:") })
	_ = p.Close()
	trace.Stop()
	if !replanned {
		t.Fatal("no re-plan after node 1's CPU left the process")
	}
	for _, want := range []string{"numapool.replan", "worker 1 "} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("the trace holds no %q", want)
		}
	}
}
