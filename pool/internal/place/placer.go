package place

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/launch"
	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// Placer is one pool's placement while it runs: the plan's topology and
// binding, the process's CPUs as the monitor last read them, the
// workers' threads, and the log of re-plans. The pool calls it at New
// (NewPlacer, Watch), through each worker's Thread, and at its end
// (Unwatch, Plan.Claim).
type Placer struct {
	topo    *topology.Topology
	binding pin.Binding
	nodes   []topology.Node // by domain index
	dist    [][]int         // distances between domains, by index
	threads []*Thread       // by worker ID
	byHome  [][]*Thread     // by domain index
	// awake reports whether a worker is awake (on a CPU): spreading
	// counts only those.
	awake func(worker int) bool
	// share reports how many workers run by the pool's share; nil:
	// every worker placed (Options.Share).
	share func() int

	watchEvery time.Duration  // the monitor's interval for this pool; 0: no looks
	source     func() Reading // a test's reading in place of the reference thread's
	started    time.Time      // the pool's start, for the log

	machine   atomic.Pointer[Machine]
	startCPUs topology.CPUSet // the process's CPUs the plan was made inside
	// OnLook, if set before Watch, runs on the monitor's goroutine after
	// each of its looks for this pool (the pool's stuck watch).
	OnLook func(now time.Time)
	looks  uint64 // the monitor's looks (monitor only)
	// maskNext is the thread the next look's checkMasks starts at
	// (monitor only).
	maskNext int

	mu       sync.Mutex
	replans  []string // the last maxReplanLog re-plans
	nReplans int
}

// Options of a Placer beyond its plan.
type Options struct {
	Binding pin.Binding
	// Awake reports whether worker id is awake (on a CPU).
	Awake func(id int) bool
	// Share reports how many workers run by the pool's share (Resize's):
	// not those in reserve, which take no CPU, nor those standing in for
	// blocked ones, which take the CPUs the blocked leave. nil: all.
	Share func() int
	// Watch is the monitor's interval for the pool; 0: it does not look.
	Watch time.Duration
	// Source reads the machine in place of the reference thread (tests).
	Source  func() Reading
	Started time.Time
}

// NewPlacer makes the placement of a pool planned as pl, from the
// machine as first read (FirstReading), with a Thread for each worker in
// the plan's order: node by node, each node's CPUs in order.
func NewPlacer(pl *Plan, first Reading, o Options) *Placer {
	p := &Placer{topo: pl.Topo, binding: o.Binding, awake: o.Awake, share: o.Share, watchEvery: o.Watch, source: o.Source, started: o.Started}
	cpus := first.PC.Usable()
	p.machine.Store(&Machine{Read: first, CPUs: cpus, At: o.Started})
	p.startCPUs = cpus
	for home, n := range pl.Nodes {
		p.nodes = append(p.nodes, n.Node)
		p.dist = append(p.dist, n.Dist)
		var mine []*Thread
		for _, cpu := range n.CPUs {
			t := &Thread{pl: p, worker: len(p.threads), home: home, cpu: cpu}
			t.onCPU.Store(-1)
			p.threads = append(p.threads, t)
			mine = append(mine, t)
		}
		p.byHome = append(p.byHome, mine)
	}
	return p
}

// Thread returns worker id's thread.
func (p *Placer) Thread(id int) *Thread { return p.threads[id] }

// Machine returns the machine as the monitor last read it.
func (p *Placer) Machine() *Machine { return p.machine.Load() }

// StartCPUs returns the process's CPUs the plan was made inside.
func (p *Placer) StartCPUs() topology.CPUSet { return p.startCPUs }

// Replans returns the last re-plans, oldest first, and how many there
// were in all.
func (p *Placer) Replans() (last []string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.replans), p.nReplans
}

// Watch has the monitor look at the machine for the pool (unless the
// pool's interval is 0) and holds it until Unwatch; held says
// FirstReading's hold is the pool's already.
func (p *Placer) Watch(held bool) { p.watch(held) }

// Unwatch ends the pool's looks and its hold on the monitor: the pool's
// last worker has ended.
func (p *Placer) Unwatch() { p.unwatch() }

// Observe takes one reading as the monitor does (tests).
func (p *Placer) Observe(r Reading, now time.Time) { p.observe(r, now) }

// within returns the part of cpus the process may run on now: a mask the
// pool sets never holds a CPU outside it. All of the process's CPUs when
// none of cpus is left; cpus itself when the process's are unknown.
func (p *Placer) within(cpus topology.CPUSet) topology.CPUSet {
	now := p.CPUsNow()
	switch x := cpus.And(now); {
	case now.IsEmpty():
		return cpus
	case x.IsEmpty():
		return now
	default:
		return x
	}
}

// placeWithin is where thread t goes when the process has cpus: on its
// planned CPUs that are left; if none, on the rest of its node; if its
// node has none, on the nearest node of the pool that has some; and
// with no node of the pool left, on any of cpus. why says which, and is
// empty for the first.
func (p *Placer) placeWithin(t *Thread, cpus topology.CPUSet) (topology.CPUSet, string) {
	if to := t.bound.And(cpus); !to.IsEmpty() {
		return to, ""
	}
	home := p.nodes[t.home]
	if to := p.topo.OSCPUs(home.CPUs).And(cpus); !to.IsEmpty() {
		return to, fmt.Sprintf("its CPUs %s are gone: on the rest of node %d", t.bound, home.ID)
	}
	order := make([]int, 0, len(p.nodes))
	for i := range p.nodes {
		if i != t.home {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return p.dist[t.home][a] - p.dist[t.home][b] })
	for _, i := range order {
		if to := p.topo.OSCPUs(p.nodes[i].CPUs).And(cpus); !to.IsEmpty() {
			return to, fmt.Sprintf("node %d has none of the process's CPUs: on node %d, the nearest that has", home.ID, p.nodes[i].ID)
		}
	}
	return cpus, fmt.Sprintf("no node of the pool has a CPU of the process's: on CPUs %s", cpus)
}

// replan re-binds every bound worker's thread inside st.CPUs
// (placeWithin), by thread ID, busy or parked; mask says the reference
// thread's mask changed, which rewrote every thread and ends what was
// honoured of masks set from outside. It returns what moved, for the
// log. Monitor only.
func (p *Placer) replan(st *Machine, mask bool) string {
	var moved []string
	for _, t := range p.threads {
		if t.now.Load() == nil {
			continue
		}
		to, why := p.placeWithin(t, st.CPUs)
		t.lockMask()
		if mask || t.seenAt+1 >= p.looks {
			// taskset -a -p rewrote every thread; or the look before this
			// one found the mask, and it may have been this change under
			// way (a cpuset change rewrites the threads' masks too).
			t.outside = topology.CPUSet{}
		}
		outside := false
		if !t.outside.IsEmpty() {
			if x := to.And(t.outside); !x.IsEmpty() {
				to, why, outside = x, fmt.Sprintf("its thread was set to CPUs %s from outside: honoured", t.outside), true
			} else {
				t.outside = topology.CPUSet{} // none of its CPUs is left
			}
		}
		prev := t.now.Load()
		t.now.Store(&Placed{CPUs: to, Why: why, Outside: outside})
		t.setNodeCPUs(to)
		// Set even when to is the mask the pool set last: taskset -a -p,
		// a cpuset change or hotplug may have rewritten it. The kernel may
		// refuse it for a while: a CPU that came online joins the cpusets
		// after it shows online (the kernel's hotplug work), and a mask of
		// it alone is refused until then. The next looks try again.
		if tid := t.TID(); tid > 0 {
			t.retry = pin.Aim(tid, to) != nil
			if !t.retry {
				t.set = to
			}
		}
		t.unlockMask()
		if !prev.CPUs.Equal(to) {
			m := fmt.Sprintf("worker %d %s -> %s", t.worker, prev.CPUs, to)
			if why != "" {
				m += " (" + why + ")"
			}
			moved = append(moved, m)
		}
	}
	if len(moved) == 0 {
		return "; no worker moved"
	}
	return "; " + strings.Join(moved, "; ")
}

// masksPerLook bounds the threads whose masks one look reads: a read is a
// system call, and a look of a pool of thousands of workers would
// otherwise cost its idle process milliseconds every second. A larger
// pool's threads are read in turn, each within len(threads)/masksPerLook
// looks.
const masksPerLook = 64

// checkMasks reads bound workers' thread masks, up to masksPerLook from
// where the last look stopped, and honours one that someone else set
// (see monitor.go). Monitor only.
func (p *Placer) checkMasks(st *Machine) {
	p.looks++
	n := len(p.threads)
	k := min(n, masksPerLook)
	for i := range k {
		t := p.threads[(p.maskNext+i)%n]
		if t.now.Load() == nil || !t.masking.CompareAndSwap(false, true) {
			continue // unbound, or the pool is setting its mask
		}
		note := ""
		if tid := t.TID(); tid > 0 && t.retry {
			if to := t.placed(); pin.Aim(tid, to) == nil {
				t.set, t.retry = to, false // the re-plan's re-bind, refused then (replan)
			}
		}
		if tid := t.TID(); tid > 0 && !t.set.IsEmpty() {
			expect := t.set.And(st.CPUs)
			if expect.IsEmpty() {
				expect = t.set
			}
			mask, err := topology.ThreadAffinity(tid)
			if err != nil || mask.Equal(expect) {
				t.unlockMask()
				continue // as the pool set it: the usual case, and all a look does
			}
			to, why := p.placeWithin(t, st.CPUs)
			if !mask.Equal(to) && expect.IsSubsetOf(mask) && mask.Equal(st.CPUs) {
				// Widened to every CPU of the process: what the kernel
				// does to a thread whose CPUs all went offline, even if
				// they were back before this look saw them go. Nobody
				// narrowed it: bind it where the pool would.
				if pin.Aim(tid, to) == nil {
					t.outside, t.set = topology.CPUSet{}, to
					t.now.Store(&Placed{CPUs: to, Why: why})
					t.setNodeCPUs(to)
				}
			} else if mask.Equal(to) {
				// Set back to where the pool would put it: nothing to honour.
				t.outside, t.set = topology.CPUSet{}, mask
				t.now.Store(&Placed{CPUs: to, Why: why})
				t.setNodeCPUs(to)
			} else {
				t.outside, t.set, t.seenAt = mask, mask, p.looks
				why := fmt.Sprintf("its thread %d was set to CPUs %s from outside (the pool had set %s): honoured", tid, mask, expect)
				t.now.Store(&Placed{CPUs: mask, Why: why, Outside: true})
				t.setNodeCPUs(mask.And(st.CPUs))
				note = fmt.Sprintf("worker %d: %s", t.worker, why)
			}
		}
		t.unlockMask()
		if note != "" {
			p.logReplan(fmt.Sprintf("%s after start: %s", time.Since(p.started).Round(time.Millisecond), note))
		}
	}
	if n > 0 {
		p.maskNext = (p.maskNext + k) % n
	}
}

// SetText is a CPU set as the log and Explain write it: "none" for the
// empty set.
func SetText(s topology.CPUSet) string { return setText(s) }

// Report writes what the monitor watches, the process's CPUs as last
// read and the re-plans (Explain's "machine:" part).
func (p *Placer) Report(b *strings.Builder) {
	st := p.machine.Load()
	last, n := p.Replans()
	watch := "off (WithMachineWatch(0))"
	if p.watchEvery > 0 {
		watch = "every " + p.watchEvery.String()
	}
	pc := st.Read.PC
	fmt.Fprintf(b, "machine: watched %s; process CPUs %s (mask %s, cgroup cpuset %s, online %s); GOMAXPROCS %d; %d re-plans\n",
		watch, setText(st.CPUs), setText(pc.Mask), setText(pc.Cgroup), setText(pc.Online), st.Read.Procs, n)
	if len(last) > 0 {
		if n > len(last) {
			fmt.Fprintf(b, "re-plans (the last %d):\n", len(last))
		} else {
			b.WriteString("re-plans:\n")
		}
		for _, r := range last {
			fmt.Fprintf(b, "  - %s\n", r)
		}
	}
}

// runningNow is how many workers run by the pool's share (Options.Share).
func (p *Placer) runningNow() int {
	if p.share == nil {
		return len(p.threads)
	}
	return p.share()
}

// Degraded lists how the placement is degraded by the machine as it is
// now: workers off their planned CPUs, threads narrowed from outside,
// fewer processors than workers, CPUs the pool has no worker for.
func (p *Placer) Degraded() []string {
	var out []string
	st := p.machine.Load()
	for _, t := range p.threads {
		if n := t.now.Load(); n != nil && n.Why != "" {
			out = append(out, fmt.Sprintf("worker %d (node %d) on CPUs %s now: %s", t.worker, p.nodes[t.home].ID, n.CPUs, n.Why))
		}
	}
	if procs, n := st.Read.Procs, p.runningNow(); procs > 0 && procs < n && p.binding.LocksThread() {
		out = append(out, fmt.Sprintf("GOMAXPROCS is %d, below the %d workers that run: the locked workers take turns on %d processors", procs, n, procs))
	}
	if extra := st.CPUs.AndNot(p.startCPUs); !p.startCPUs.IsEmpty() && !extra.IsEmpty() {
		out = append(out, fmt.Sprintf("CPUs %s came to the process after New: the pool has no worker for them (reported only)", extra))
	}
	return out
}

// ReportNodes writes Explain's lines for the nodes and their workers:
// each node's CPUs, workers, memory and distances, and where each
// worker's thread runs (Thread.Report), or that it locks none.
func (p *Placer) ReportNodes(b *strings.Builder) {
	for home, n := range p.nodes {
		fmt.Fprintf(b, "node %d: CPUs %s, %s", n.ID, n.CPUs, plural(len(p.byHome[home]), "worker"))
		if n.MemoryBytes > 0 {
			fmt.Fprintf(b, ", %d MiB memory", n.MemoryBytes>>20)
		}
		var near []string
		for i, d := range p.dist[home] {
			if i != home {
				near = append(near, fmt.Sprintf("%d:%d", p.nodes[i].ID, d))
			}
		}
		if len(near) > 0 {
			fmt.Fprintf(b, ", distance to %s", strings.Join(near, " "))
		}
		b.WriteByte('\n')
		for _, t := range p.byHome[home] {
			os := p.topo.OSCPUs(topology.NewCPUSet(t.cpu))
			kind := ""
			if k := KindName(p.topo, t.cpu); k != "" {
				kind = ", a " + k + " CPU"
			}
			if !p.binding.LocksThread() {
				fmt.Fprintf(b, "  worker %d: CPU %d (OS CPU %s%s) in the plan; a goroutine on any thread and CPU (not locked, not bound)\n", t.worker, t.cpu, os, kind)
				continue
			}
			fmt.Fprintf(b, "  worker %d: %s; placed on CPU %d (OS CPU %s%s)\n", t.worker, t.Report(), t.cpu, os, kind)
		}
	}
}

// Display writes one line per worker: its node, ID, thread and the CPUs
// its thread is bound to, as OMP_DISPLAY_AFFINITY does for OpenMP's
// threads.
func (p *Placer) Display(w io.Writer) {
	var b strings.Builder
	pid := os.Getpid()
	for _, t := range p.threads {
		bound := t.bound.String()
		if bound == "" {
			bound = "none (" + p.binding.String() + ")"
		}
		fmt.Fprintf(&b, "numapool: pid %d tid %d node %d worker %d cpu %d bound to %s\n",
			pid, t.TID(), p.nodes[t.home].ID, t.worker, t.cpu, bound)
	}
	io.WriteString(w, b.String())
}

// SlowKindWarnings are Explain's warnings about work that can run only
// on the least efficient kind: a pool whose workers are all on it, or a
// node whose workers are (strict work for that node runs at the slow
// kind's speed; its loop blocks are sized by capacity and are not slower).
func (p *Placer) SlowKindWarnings() []string {
	if !NamedKinds(p.topo) {
		return nil
	}
	var slowNodes []string
	for home, n := range p.nodes {
		slow := true
		for _, t := range p.byHome[home] {
			slow = slow && KindName(p.topo, t.cpu) == KindEfficiency
		}
		if slow {
			slowNodes = append(slowNodes, fmt.Sprint(n.ID))
		}
	}
	switch {
	case len(slowNodes) == 0:
		return nil
	case len(slowNodes) == len(p.nodes):
		return []string{"every worker is on an efficiency CPU: the pool's work runs at that kind's speed"}
	}
	which := "node " + slowNodes[0] + " are"
	if len(slowNodes) > 1 {
		which = "nodes " + strings.Join(slowNodes, ",") + " are"
	}
	return []string{fmt.Sprintf("the workers of %s all on efficiency CPUs: strict work for them runs at that kind's speed", which)}
}

// ReportLaunch writes the launcher line and its warnings, if any:
// nothing for a process that may use every online CPU and was not
// launched by a launcher it knows. The launcher's view is of the
// process's CPUs as the pool read them last (New, or the monitor's
// latest look), not as the process started.
func (p *Placer) ReportLaunch(b *strings.Builder) {
	info := launch.DetectFrom(launch.Inputs{Env: os.LookupEnv, CPUs: p.machine.Load().Read.PC})
	if info.Launcher != launch.None {
		fmt.Fprintf(b, "launcher: %s\n", info)
	}
	bound := make([]topology.CPUSet, len(p.threads))
	for i, t := range p.threads {
		bound[i] = t.Mask()
	}
	for _, w := range info.Warnings(p.runningNow(), bound...) {
		fmt.Fprintf(b, "warning: %s\n", w)
	}
}
