package place

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
//     Machine with the next generation when they changed, then
//     re-plans (replan) and re-binds every worker's thread by its ID,
//     whether it runs a task or is parked. Workers compare the generation
//     at their stop points (a wake-up, every SpreadEvery tasks: Follow)
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
// worker's masking flag and recorded (Thread.set), so that the look
// can tell the pool's own masks from those of others.

// DefaultWatch is the monitor's interval unless WithMachineWatch
// or NUMAPOOL_MACHINE_WATCH sets another: about as often as Go's own
// GOMAXPROCS updater looks at the cgroup's CPU limit.
const DefaultWatch = time.Second

// Reading is what one look reads.
type Reading struct {
	PC    topology.ProcessCPUs
	Procs int // GOMAXPROCS
}

// Reader reads the process's CPUs from the calling thread's mask
// (the monitor's reference thread) and GOMAXPROCS. The first reading
// finds the cgroup cpuset's file; later ones read it again, and the
// online CPUs, from files kept open (machineFiles): a process keeps its
// cgroup while the cpuset changes, which is what the looks are for.
type Reader struct {
	first topology.ProcessCPUs
	last  topology.ProcessCPUs
	files *machineFiles
}

// NewReader opens a Reader on the calling thread's mask.
func NewReader() *Reader {
	pc := topology.ReadProcessCPUsOf(0)
	return &Reader{first: pc, last: pc, files: openMachineFiles(pc)}
}

// Read reads the machine once.
func (r *Reader) Read() Reading {
	r.last = r.files.read(r.last)
	return Reading{PC: r.last, Procs: runtime.GOMAXPROCS(0)}
}

// Machine is a pool's view of the machine, replaced whole on each
// change (Placer.machine).
type Machine struct {
	Gen  uint64 // 0 for the one New read; one more for each change
	Read Reading
	CPUs topology.CPUSet // Read.PC.Usable(): the process's CPUs
	At   time.Time
}

// monitor is the process's one monitor, while pools hold it.
var monitor struct {
	sync.Mutex
	holds int
	pools []*Placer // the live pools' placers that watch (watch > 0)
	run   *monitorRun
}

// monitorRun is one run of the monitor's goroutine, from the first hold
// to the last release.
type monitorRun struct {
	asks chan chan Reading // a reading from the reference thread, now
	kick chan struct{}     // the pools or their intervals changed
	stop chan struct{}     // the last hold is released
	tid  atomic.Int32      // the reference thread, once locked
}

// holdMonitor starts the monitor if it does not run and keeps it running
// until releaseMonitor.
func holdMonitor() {
	monitor.Lock()
	defer monitor.Unlock()
	monitor.holds++
	if monitor.run == nil {
		monitor.run = &monitorRun{asks: make(chan chan Reading), kick: make(chan struct{}, 1), stop: make(chan struct{})}
		go monitor.run.loop()
	}
}

// machineNow reads the machine for New: on the reference thread while
// the monitor runs, and holds it then (held); with no pool alive, on
// the process's main thread, which no worker can be on then: the
// monitor starts only once New has counted the threads it may start.
func machineNow() (_ Reading, held bool) {
	monitor.Lock()
	run := monitor.run
	if run != nil {
		monitor.holds++
	}
	monitor.Unlock()
	if run == nil {
		return Reading{PC: topology.ReadProcessCPUsOf(os.Getpid()), Procs: runtime.GOMAXPROCS(0)}, false
	}
	reply := make(chan Reading, 1)
	run.asks <- reply
	return <-reply, true
}

// ReleaseMonitor gives back a hold; the last one ends the monitor, and
// with it the reference thread.
func ReleaseMonitor() {
	monitor.Lock()
	defer monitor.Unlock()
	if monitor.holds--; monitor.holds == 0 {
		close(monitor.run.stop)
		monitor.run = nil
	}
}

// watch holds the monitor for p (unless New's reading did) and has it
// look at the machine for p, if p's interval is not 0.
func (p *Placer) watch(held bool) {
	if !held {
		holdMonitor()
	}
	if p.watchEvery <= 0 {
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
func (p *Placer) unwatch() {
	monitor.Lock()
	monitor.pools = slices.DeleteFunc(monitor.pools, func(o *Placer) bool { return o == p })
	run := monitor.run
	monitor.Unlock()
	run.poke()
	ReleaseMonitor()
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
		if d == 0 || p.watchEvery < d {
			d = p.watchEvery
		}
	}
	return d
}

// loop is the monitor's goroutine. It locks its thread and never sets its
// mask: when the goroutine returns, the thread ends with it.
func (r *monitorRun) loop() {
	runtime.LockOSThread()
	r.tid.Store(int32(ThreadID()))
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	interval := time.Duration(0)
	rd := NewReader()
	defer rd.Close()
	for {
		select {
		case <-r.stop:
			return
		case reply := <-r.asks:
			reply <- rd.Read()
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
func look(r *Reader) {
	rd := r.Read()
	monitor.Lock()
	pools := slices.Clone(monitor.pools)
	monitor.Unlock()
	for _, p := range pools {
		pr := rd
		if p.source != nil {
			pr = p.source()
		}
		p.observe(pr, time.Now())
	}
}

// FirstReading is the reading New plans from: the monitor's while it
// runs (held then: the monitor stays until ReleaseMonitor), or source's
// where a test gives one.
func FirstReading(source func() Reading) (_ Reading, held bool) {
	rd, held := machineNow()
	if source != nil {
		rd = source()
	}
	return rd, held
}

// observe takes one reading: a change of the process's CPUs makes a new
// generation and a re-plan, a change of GOMAXPROCS a new generation; then
// it checks the workers' thread masks. Monitor only.
func (p *Placer) observe(r Reading, now time.Time) {
	old := p.machine.Load()
	cpus := r.PC.Usable()
	if cpus.IsEmpty() {
		return // unreadable: keep what there is
	}
	st := old
	if !cpus.Equal(old.CPUs) || r.Procs != old.Read.Procs {
		st = &Machine{Gen: old.Gen + 1, Read: r, CPUs: cpus, At: now}
		p.machine.Store(st)
		var what []string
		if !cpus.Equal(old.CPUs) {
			what = append(what, fmt.Sprintf("process CPUs %s -> %s%s", setText(old.CPUs), setText(cpus), causeText(old.Read.PC, r.PC)))
		}
		if r.Procs != old.Read.Procs {
			what = append(what, fmt.Sprintf("GOMAXPROCS %d -> %d", old.Read.Procs, r.Procs))
		}
		moved := ""
		if !cpus.Equal(old.CPUs) {
			moved = p.replan(st, !r.PC.Mask.Equal(old.Read.PC.Mask))
		}
		p.logReplan(fmt.Sprintf("%s after start: %s%s", now.Sub(p.started).Round(time.Millisecond), joinText(what), moved))
	}
	p.checkMasks(st)
	if p.OnLook != nil {
		p.OnLook(now)
	}
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

func (p *Placer) logReplan(s string) {
	p.mu.Lock()
	p.replans = append(p.replans, s)
	if len(p.replans) > maxReplanLog {
		p.replans = slices.Delete(p.replans, 0, len(p.replans)-maxReplanLog)
	}
	p.nReplans++
	p.mu.Unlock()
	if trace.IsEnabled() {
		trace.Log(context.Background(), "numapool.replan", s)
	}
}

// CPUsNow returns the process's CPUs as the pool last saw them.
func (p *Placer) CPUsNow() topology.CPUSet { return p.machine.Load().CPUs }

// Close closes the files the reader keeps open.
func (r *Reader) Close() { r.files.close() }

// MonitorRunning reports whether the monitor's goroutine runs, and how
// many pools it watches.
func MonitorRunning() (running bool, pools int) {
	monitor.Lock()
	defer monitor.Unlock()
	return monitor.run != nil, len(monitor.pools)
}

// MonitorTID returns the monitor's reference thread, 0 while none runs.
func MonitorTID() int {
	monitor.Lock()
	defer monitor.Unlock()
	if monitor.run == nil {
		return 0
	}
	return int(monitor.run.tid.Load())
}
