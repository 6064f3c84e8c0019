package pool

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/topology"
)

// The machine monitor. The process's CPUs change under a running pool:
// taskset -a -p rewrites every thread's mask, a cgroup's cpuset shrinks
// and grows again, CPUs go offline and come back, Go changes GOMAXPROCS
// when a CPU limit changes. No kernel event covers these (cgroupfs and
// sysfs raise no inotify event on them), so one goroutine of the process
// looks on a timer, off every worker's path:
//
//   - It runs while a pool lives, locked to a thread of its own that no
//     pool ever pins: the reference thread. Its mask is the process's as
//     taskset -a -p, a cgroup or hotplug leave it; a thread of any other
//     goroutine could be one a task pinned and unlocked. The process's
//     CPUs are that mask within the cgroup cpuset and the online CPUs
//     (topology.ProcessCPUs.Usable); New reads them there too, so a pool
//     made after a narrowing plans inside it.
//   - Each look (every watch interval, the shortest the live pools ask
//     for) reads them and GOMAXPROCS, and, for each pool, publishes a new
//     machineState with the next generation when they changed, then
//     re-plans (replan) and re-binds every worker's thread by its ID,
//     whether it runs a task or is parked. Workers compare the generation
//     at their stop points (a wake-up, every spreadEvery tasks: settle)
//     and take the new placement up there too.
//   - It then reads each worker's thread mask. A mask that differs from
//     the one the pool last set, with the process's CPUs unchanged, was
//     set from outside (taskset -p on one thread): the pool honours it,
//     sets no other on that thread while it holds CPUs of the process,
//     and says so in Explain. Workers and their wakers read the mask
//     before they set one (ownsMask) and leave such a mask alone until
//     the monitor's look. A change of the reference thread's mask
//     (taskset -a -p) rewrote every thread and ends what was honoured; so
//     does a change of the process's CPUs on the look right after the
//     one that found the mask, which may have been that change under way.
//
// Every mask the pool sets on a worker's thread is taken under the
// worker's masking flag and recorded (placement.set), so that the look
// can tell the pool's own masks from those of others.

// defaultMachineWatch is the monitor's interval unless WithMachineWatch
// or NUMAPOOL_MACHINE_WATCH sets another: about as often as Go's own
// GOMAXPROCS updater looks at the cgroup's CPU limit.
const defaultMachineWatch = time.Second

// machineReading is what one look reads.
type machineReading struct {
	pc    topology.ProcessCPUs
	procs int // GOMAXPROCS
}

// machineReader reads the process's CPUs from the calling thread's mask
// (the monitor's reference thread) and GOMAXPROCS. The first reading
// finds the cgroup cpuset's file; later ones read it again, and the
// online CPUs, from files kept open (machineFiles): a process keeps its
// cgroup while the cpuset changes, which is what the looks are for.
type machineReader struct {
	first topology.ProcessCPUs
	last  topology.ProcessCPUs
	files *machineFiles
}

func newMachineReader() *machineReader {
	pc := topology.ReadProcessCPUsOf(0)
	return &machineReader{first: pc, last: pc, files: openMachineFiles(pc)}
}

func (r *machineReader) read() machineReading {
	r.last = r.files.read(r.last)
	return machineReading{pc: r.last, procs: runtime.GOMAXPROCS(0)}
}

// machineState is a pool's view of the machine, replaced whole on each
// change (sched.machine).
type machineState struct {
	gen  uint64 // 0 for the one New read; one more for each change
	read machineReading
	cpus topology.CPUSet // read.pc.Usable(): the process's CPUs
	at   time.Time
}

// monitor is the process's one monitor, while pools hold it.
var monitor struct {
	sync.Mutex
	holds int
	pools []*sched // the live pools that watch (watch > 0)
	run   *monitorRun
}

// monitorRun is one run of the monitor's goroutine, from the first hold
// to the last release.
type monitorRun struct {
	asks chan chan machineReading // a reading from the reference thread, now
	kick chan struct{}            // the pools or their intervals changed
	stop chan struct{}            // the last hold is released
	tid  atomic.Int32             // the reference thread, once locked
}

// holdMonitor starts the monitor if it does not run and keeps it running
// until releaseMonitor.
func holdMonitor() {
	monitor.Lock()
	defer monitor.Unlock()
	monitor.holds++
	if monitor.run == nil {
		monitor.run = &monitorRun{asks: make(chan chan machineReading), kick: make(chan struct{}, 1), stop: make(chan struct{})}
		go monitor.run.loop()
	}
}

// machineNow reads the machine for New: on the reference thread while
// the monitor runs, and holds it then (held); with no pool alive, on
// the process's main thread, which no worker can be on then: the
// monitor starts only once New has counted the threads it may start.
func machineNow() (_ machineReading, held bool) {
	monitor.Lock()
	run := monitor.run
	if run != nil {
		monitor.holds++
	}
	monitor.Unlock()
	if run == nil {
		return machineReading{pc: topology.ReadProcessCPUsOf(os.Getpid()), procs: runtime.GOMAXPROCS(0)}, false
	}
	reply := make(chan machineReading, 1)
	run.asks <- reply
	return <-reply, true
}

// releaseMonitor gives back a hold; the last one ends the monitor, and
// with it the reference thread.
func releaseMonitor() {
	monitor.Lock()
	defer monitor.Unlock()
	if monitor.holds--; monitor.holds == 0 {
		close(monitor.run.stop)
		monitor.run = nil
	}
}

// watch holds the monitor for p (unless New's reading did) and has it
// look at the machine for p, if p's interval is not 0.
func (p *sched) watch(held bool) {
	if !held {
		holdMonitor()
	}
	if p.cfg.watch <= 0 {
		return
	}
	monitor.Lock()
	monitor.pools = append(monitor.pools, p)
	run := monitor.run
	monitor.Unlock()
	run.poke()
}

// unwatch ends p's looks and its hold on the monitor: p's last worker
// has ended.
func (p *sched) unwatch() {
	monitor.Lock()
	monitor.pools = slices.DeleteFunc(monitor.pools, func(o *sched) bool { return o == p })
	run := monitor.run
	monitor.Unlock()
	run.poke()
	releaseMonitor()
}

func (r *monitorRun) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// interval is the shortest interval the watching pools ask for; 0: none.
func monitorInterval() time.Duration {
	monitor.Lock()
	defer monitor.Unlock()
	var d time.Duration
	for _, p := range monitor.pools {
		if d == 0 || p.cfg.watch < d {
			d = p.cfg.watch
		}
	}
	return d
}

// loop is the monitor's goroutine. It locks its thread and never sets its
// mask: when the goroutine returns, the thread ends with it.
func (r *monitorRun) loop() {
	runtime.LockOSThread()
	r.tid.Store(int32(threadID()))
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	interval := time.Duration(0)
	rd := newMachineReader()
	defer rd.files.close()
	for {
		select {
		case <-r.stop:
			return
		case reply := <-r.asks:
			reply <- rd.read()
			continue
		case <-r.kick:
			if d := monitorInterval(); d != interval {
				interval = d
				timer.Stop()
				if d > 0 {
					timer.Reset(d)
				}
			}
			continue
		case <-timer.C:
		}
		look(rd)
		if interval = monitorInterval(); interval > 0 {
			timer.Reset(interval)
		}
	}
}

// look reads the machine once and shows each watching pool its reading.
func look(r *machineReader) {
	rd := r.read()
	monitor.Lock()
	pools := slices.Clone(monitor.pools)
	monitor.Unlock()
	for _, p := range pools {
		pr := rd
		if p.cfg.machine != nil {
			pr = p.cfg.machine()
		}
		p.observe(pr, time.Now())
	}
}

// firstReading is the reading New plans from (machineNow), or the test
// source's.
func firstReading(c config) (_ machineReading, held bool) {
	rd, held := machineNow()
	if c.machine != nil {
		rd = c.machine()
	}
	return rd, held
}

// observe takes one reading: a change of the process's CPUs makes a new
// generation and a re-plan, a change of GOMAXPROCS a new generation; then
// it checks the workers' thread masks. Monitor only.
func (p *sched) observe(r machineReading, now time.Time) {
	old := p.machine.Load()
	cpus := r.pc.Usable()
	if cpus.IsEmpty() {
		return // unreadable: keep what there is
	}
	st := old
	if !cpus.Equal(old.cpus) || r.procs != old.read.procs {
		st = &machineState{gen: old.gen + 1, read: r, cpus: cpus, at: now}
		p.machine.Store(st)
		var what []string
		if !cpus.Equal(old.cpus) {
			what = append(what, fmt.Sprintf("process CPUs %s -> %s%s", setText(old.cpus), setText(cpus), causeText(old.read.pc, r.pc)))
		}
		if r.procs != old.read.procs {
			what = append(what, fmt.Sprintf("GOMAXPROCS %d -> %d", old.read.procs, r.procs))
		}
		moved := ""
		if !cpus.Equal(old.cpus) {
			moved = p.replan(st, !r.pc.Mask.Equal(old.read.pc.Mask))
		}
		p.logReplan(fmt.Sprintf("%s after start: %s%s", now.Sub(p.started).Round(time.Millisecond), joinText(what), moved))
	}
	p.checkMasks(st)
}

// causeText says which of the three sets changed.
func causeText(a, b topology.ProcessCPUs) string {
	var c []string
	if !a.Mask.Equal(b.Mask) {
		c = append(c, "affinity mask "+setText(b.Mask))
	}
	if !a.Cgroup.Equal(b.Cgroup) {
		c = append(c, "cgroup cpuset "+setText(b.Cgroup))
	}
	if !a.Online.Equal(b.Online) {
		c = append(c, "online "+setText(b.Online))
	}
	if len(c) == 0 {
		return ""
	}
	return " (" + joinText(c) + ")"
}

func setText(s topology.CPUSet) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}

func joinText(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

// maxReplanLog is how many re-plans Explain lists, the latest.
const maxReplanLog = 16

func (p *sched) logReplan(s string) {
	p.degradedMu.Lock()
	p.replans = append(p.replans, s)
	if len(p.replans) > maxReplanLog {
		p.replans = slices.Delete(p.replans, 0, len(p.replans)-maxReplanLog)
	}
	p.nReplans++
	p.degradedMu.Unlock()
	if trace.IsEnabled() {
		trace.Log(context.Background(), "numapool.replan", s)
	}
}

// cpusNow returns the process's CPUs as the pool last saw them.
func (p *sched) cpusNow() topology.CPUSet { return p.machine.Load().cpus }

// follow is a worker's look at the generation at its stop point: a new
// one re-binds its thread to its placement, if a re-bind by thread ID
// missed it, and counts it. Owner only.
func (w *Worker) follow() {
	st := w.pool.machine.Load()
	if st.gen == w.place.gen {
		return
	}
	w.place.gen = st.gen
	if w.thread == nil {
		return
	}
	w.lockMask()
	if to := w.placed(); !to.IsEmpty() && !to.Equal(w.place.set) && w.ownsMask(0) && w.thread.Set(to) == nil {
		w.place.set = to
	}
	w.unlockMask()
	w.c.Replans++
}
