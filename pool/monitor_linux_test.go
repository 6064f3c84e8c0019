package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// Tests of the pool while the machine changes under it. The host tests
// change the masks of this process's threads as taskset does, with
// sched_setaffinity on every thread (taskset -a -p) or on one; the fake
// machine stands for what the host cannot change without root (a cgroup
// cpuset, hotplug), while the masks it makes the pool set are real.

// hostWatch is the monitor's interval in the host tests, and watchBound
// how long after a change every worker must be placed inside it: two
// looks and room for a loaded machine.
const (
	hostWatch  = 100 * time.Millisecond
	watchBound = 2*hostWatch + 100*time.Millisecond
)

// setEveryThread sets the mask of every thread of this process to cpus,
// as taskset -a -p does: one thread after another.
func setEveryThread(t *testing.T, cpus topology.CPUSet) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := setThreadMask(tid, cpus); err != nil && err != unix.ESRCH {
			t.Fatalf("sched_setaffinity of thread %d to %s: %v", tid, cpus, err)
		}
	}
}

func setThreadMask(tid int, cpus topology.CPUSet) error {
	var set unix.CPUSet
	for c := range cpus.All() {
		set.Set(c)
	}
	return unix.SchedSetaffinity(tid, &set)
}

// TestProcessNarrowedFromOutside narrows every thread of the process to
// one CPU under a counted stream, as taskset -a -p -c does, then widens
// it again: within the bound no worker's mask leaves the narrowed set
// (and none gets out of it afterwards), and once widened every worker is
// bound where the plan put it again.
func TestProcessNarrowedFromOutside(t *testing.T) {
	all, a, _ := twoCPUs(t)
	t.Cleanup(func() { setEveryThread(t, all) })
	for _, spec := range []string{"", "2x1"} {
		t.Run(specName(spec), func(t *testing.T) {
			setEveryThread(t, all)
			opts := []Option{WithWorkers(2)}
			if spec != "" {
				opts = append(opts, WithSpec(spec))
			}
			p, err := newPool(opts, env(map[string]string{envMachineWatch: hostWatch.String()}))
			if err != nil {
				t.Fatal(err)
			}
			planned := make([]topology.CPUSet, len(p.workers))
			for i, w := range p.workers {
				planned[i] = w.th.Bound()
			}
			s := startStream(t, p, 1<<20)
			if !masksAre(p, planned, hangBound) {
				t.Fatalf("before any change: worker masks %v, want the plan's %v", workerMasks(p), planned)
			}
			one := topology.NewCPUSet(a)
			setEveryThread(t, one)
			inside := func() bool {
				for _, m := range workerMasks(p) {
					if m.IsEmpty() || !m.AndNot(one).IsEmpty() {
						return false
					}
				}
				return true
			}
			if !eventually(watchBound, inside) {
				t.Errorf("%v after narrowing every thread to %s: worker masks %v", watchBound, one, workerMasks(p))
			}
			if bad := holdsInside(p, one, 5*hostWatch); bad != "" {
				t.Errorf("after narrowing every thread to %s: %s", one, bad)
			}
			explain := p.Explain()
			if !strings.Contains(explain, "process CPUs "+all.String()+" -> "+one.String()) {
				t.Errorf("Explain lists no re-plan to CPUs %s:\n%s", one, explain)
			}
			for i, ws := range p.Stats().Workers {
				if ws.Bound != one.String() {
					t.Errorf("Stats: worker %d bound to %q, want %q (its thread's mask)", i, ws.Bound, one)
				}
			}
			setEveryThread(t, all)
			if !masksAre(p, planned, watchBound) {
				t.Errorf("%v after widening every thread to %s again: worker masks %v, want the plan's %v", watchBound, all, workerMasks(p), planned)
			}
			s.finish(t, p)
		})
	}
}

// TestOneThreadNarrowedFromOutsideIsHonoured narrows one worker's thread
// from outside (taskset -p on that thread): the pool leaves it there
// under a stream that wakes and spreads its workers, and says so.
func TestOneThreadNarrowedFromOutsideIsHonoured(t *testing.T) {
	all, _, b := twoCPUs(t)
	t.Cleanup(func() { setEveryThread(t, all) })
	p, err := newPool([]Option{WithWorkers(2)}, env(map[string]string{envMachineWatch: hostWatch.String()}))
	if err != nil {
		t.Fatal(err)
	}
	s := startStream(t, p, 1<<20)
	w := p.workers[1]
	if w.th.Bound().Len() < 2 {
		s.finish(t, p)
		t.Skipf("worker 1 is bound to %s: nothing to narrow", w.th.Bound())
	}
	one := topology.NewCPUSet(b)
	var tid int
	if !eventually(hangBound, func() bool { tid = w.th.TID(); return tid > 0 }) {
		t.Fatal("worker 1 has no thread")
	}
	if err := setThreadMask(tid, one); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(watchBound + 5*hostWatch); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if m, err := topology.ThreadAffinity(tid); err == nil && !m.Equal(one) {
			t.Errorf("worker 1's thread %d, narrowed to %s from outside, has mask %s", tid, one, m)
			break
		}
	}
	if e := p.Explain(); !strings.Contains(e, "from outside") {
		t.Errorf("Explain does not report the mask set from outside:\n%s", e)
	}
	if got := p.Stats().Workers[1].Bound; got != one.String() {
		t.Errorf("Stats: worker 1 bound to %q, want %q", got, one)
	}
	// Set back from outside to the CPUs the pool would bind it to: the
	// pool takes it as its own again.
	if err := setThreadMask(tid, w.th.Bound()); err != nil {
		t.Fatal(err)
	}
	if !eventually(watchBound, func() bool { return !strings.Contains(p.Explain(), "worker 1 (node") }) {
		t.Errorf("worker 1's thread set back to %s: Explain still reports it degraded:\n%s", w.th.Bound(), p.Explain())
	}
	s.finish(t, p)
}

// TestPoolMadeAfterNarrowing makes a pool after every thread of the
// process was narrowed to one CPU: it places and binds its workers there.
func TestPoolMadeAfterNarrowing(t *testing.T) {
	all, _, b := twoCPUs(t)
	t.Cleanup(func() { setEveryThread(t, all) })
	one := topology.NewCPUSet(b)
	setEveryThread(t, one)
	for _, spec := range []string{"", "2x1"} {
		opts := []Option{WithoutEnv()}
		if spec != "" {
			opts = append(opts, WithSpec(spec))
		}
		p := newTestPool(t, opts...)
		var ran atomic.Int64
		for range 100 {
			_ = p.Submit(context.Background(), func(*Worker) { ran.Add(1) })
		}
		for i, m := range workerMasks(p) {
			if !m.AndNot(one).IsEmpty() {
				t.Errorf("%s: worker %d of a pool made after narrowing to %s has mask %s", specName(spec), i, one, m)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if ran.Load() != 100 {
			t.Errorf("%s: %d of 100 tasks ran", specName(spec), ran.Load())
		}
	}
}

// TestCoresBindingFollowsACPUThatComesBack is the VM suite's hotplug
// case on the host's CPUs: with cores binding on two one-CPU nodes, the
// CPU of worker 1 goes offline (the kernel widens its mask) and comes
// back; it is bound to it alone again.
func TestCoresBindingFollowsACPUThatComesBack(t *testing.T) {
	all, a, b := twoCPUs(t)
	f := newFakeMachine(all, 2)
	p := newTestPool(t, WithSpec("2x1"), WithBinding(pin.Cores), withMachine(f, fakeWatch))
	s := startStream(t, p, 1<<20)
	w1 := p.workers[1]
	if !w1.th.Bound().Equal(topology.NewCPUSet(b)) {
		s.finish(t, p)
		t.Skipf("worker 1 bound to %s, not CPU %d", w1.th.Bound(), b)
	}
	f.offline(topology.NewCPUSet(b))
	if !masksAre(p, []topology.CPUSet{topology.NewCPUSet(a), topology.NewCPUSet(a)}, hangBound) {
		t.Errorf("CPU %d offline: worker masks %v", b, workerMasks(p))
	}
	tid := w1.th.TID()
	_ = setThreadMask(tid, all) // what the kernel does to a thread whose only CPU went
	f.set(all, 2)
	if !masksAre(p, []topology.CPUSet{topology.NewCPUSet(a), topology.NewCPUSet(b)}, hangBound) {
		t.Errorf("CPU %d back: worker masks %v, want each on its own CPU", b, workerMasks(p))
	}
	s.finish(t, p)
}

// cpusetV1 returns the directory of this process's cgroup-v1 cpuset, or
// skips the test saying why there is none to use.
func cpusetV1(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("moving the process to a cpuset of its own needs root")
	}
	mounts, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Skip(err)
	}
	mnt := ""
	for line := range strings.SplitSeq(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "cgroup" && slices.Contains(strings.Split(f[3], ","), "cpuset") {
			mnt = f[1]
		}
	}
	if mnt == "" {
		t.Skip("no cgroup-v1 cpuset controller mounted (a v2 cpuset is tested in the VM suite's kernel, if at all)")
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	for line := range strings.SplitSeq(string(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpuset") {
			return filepath.Join(mnt, parts[2])
		}
	}
	t.Skip("the process is in no cgroup-v1 cpuset")
	return ""
}

// TestCgroupCpusetShrinksAndGrows moves the test process into a cpuset
// of its own, shrinks it to one CPU under a counted stream and restores
// it: the kernel narrows every thread, and the pool then places its
// workers inside the cpuset; once restored (the kernel widens every
// thread to the whole cpuset) every worker is bound where the plan put
// it again.
func TestCgroupCpusetShrinksAndGrows(t *testing.T) {
	all, a, b := twoCPUs(t)
	parent := cpusetV1(t)
	mems, err := os.ReadFile(filepath.Join(parent, "cpuset.mems"))
	if err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("numapool-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cpuset: %v", err)
	}
	write := func(name, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0); err != nil {
			t.Fatalf("%s/%s = %q: %v", dir, name, v, err)
		}
	}
	pid := strconv.Itoa(os.Getpid())
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(parent, "cgroup.procs"), []byte(pid), 0)
		setEveryThread(t, all)
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the test's cpuset: %v", err)
		}
	})
	pair := fmt.Sprintf("%d,%d", a, b)
	write("cpuset.mems", strings.TrimSpace(string(mems)))
	write("cpuset.cpus", pair)
	write("cgroup.procs", pid)

	p, err := newPool([]Option{WithSpec("2x1")}, env(map[string]string{envMachineWatch: hostWatch.String()}))
	if err != nil {
		t.Fatal(err)
	}
	planned := []topology.CPUSet{p.workers[0].th.Bound(), p.workers[1].th.Bound()}
	s := startStream(t, p, 1<<20)
	one := topology.NewCPUSet(a)
	write("cpuset.cpus", strconv.Itoa(a))
	if !masksAre(p, []topology.CPUSet{one, one}, watchBound) {
		t.Errorf("cpuset shrunk to %s: worker masks %v", one, workerMasks(p))
	}
	if bad := holdsInside(p, one, 3*hostWatch); bad != "" {
		t.Errorf("cpuset shrunk to %s: %s", one, bad)
	}
	write("cpuset.cpus", pair)
	if !masksAre(p, planned, watchBound) {
		t.Errorf("cpuset restored to %s: worker masks %v, want the plan's %v", pair, workerMasks(p), planned)
	}
	s.finish(t, p)
}

// TestMasksReadInTurn narrows, from outside, the thread of the last
// worker of a pool with more workers than one look reads masks of: the
// looks take the threads in turn, so it is honoured within a few looks.
func TestMasksReadInTurn(t *testing.T) {
	all, a, b := twoCPUs(t)
	t.Cleanup(func() { setEveryThread(t, all) })
	const workers = 200
	p, err := newPool([]Option{WithSpec(fmt.Sprintf("1x%d", workers))}, env(map[string]string{envMachineWatch: hostWatch.String()}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w := p.workers[workers-1]
	var tid int
	if !eventually(hangBound, func() bool { tid = w.th.TID(); return tid > 0 }) {
		t.Fatalf("worker %d has no thread", w.id)
	}
	other := topology.NewCPUSet(a)
	if w.th.Bound().Equal(other) {
		other = topology.NewCPUSet(b)
	}
	if err := setThreadMask(tid, other); err != nil {
		t.Fatal(err)
	}
	// Each thread is read within workers/64+1 looks; a margin of as many
	// again for the load of a shared machine.
	bound := watchBound + 2*(workers/64+1)*hostWatch
	want := fmt.Sprintf("worker %d: its thread %d was set to CPUs %s from outside", w.id, tid, other)
	if !eventually(bound, func() bool { return strings.Contains(p.Explain(), want) }) {
		t.Errorf("after %s, Explain does not report %q:\n%s", bound, want, p.Explain())
	}
}
