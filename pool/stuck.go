package pool

import (
	"bufio"
	"bytes"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// A pool that is stuck says so. A task that blocks without Worker.Block
// holds its worker; when every worker of a node does so with work queued
// for the node, nothing runs that work, and nothing in the process says
// why: Go's deadlock detector sees only goroutines, and a worker parked
// in a task is one goroutine among many. So the machine monitor, at each
// of its looks (WithMachineWatch, every second by default), also looks
// at each node:
//
//   - work is queued for it (its shards, or its workers' queues and
//     slots), none of its workers is parked or searching, and no thread of
//     any of its workers is in Block (a spare runs its work then);
//   - each worker's published progress (its counters of finished tasks
//     and parks) has not moved for stuckAfter, and its thread, where the
//     kernel says, is asleep (state S or D in /proc/self/task/TID/stat),
//     not computing: a task that computes for minutes is not stuck.
//
// Such a node is stuck: Stats marks it (NodeStats.Stuck) and says for
// each of its workers how long and in which function
// (WorkerStats.BlockedFor, BlockedIn, read from the goroutine profile by
// the worker's pprof labels); Explain has a line; and the pool writes one
// warning to stderr, once (off with WithStuckWarning(false)). It costs
// the monitor a few loads per worker per look, and the profile and the
// /proc reads only for a node that has stopped moving; nothing on a
// worker's path. With the monitor off (WithMachineWatch(0)) nothing
// looks.

// stuckAfter is how long a node's workers must all have stalled before
// the node counts as stuck (config.stuckAfter in tests).
const stuckAfter = 5 * time.Second

// stuckWatch is the pool's stuck watch: the monitor's goroutine alone
// writes mark and since; Stats and Explain read report.
type stuckWatch struct {
	mark   []uint64    // per worker: its published progress at the last look
	since  []time.Time // per worker: when that progress last moved, or it was idle
	calm   []time.Time // per node: its last look that found it not stalled
	warned bool
	report atomic.Pointer[stuckReport]
}

// stuckReport is the last look's verdict: nil entries are nodes that
// are not stuck.
type stuckReport struct {
	nodes [][]stuckWorker // by domain index
}

type stuckWorker struct {
	id  int
	tid int
	dur time.Duration
	in  string // the function of its task, from its goroutine's stack; "" if not found
}

// lookStuck is the monitor's look at whether a node is stuck (see above).
func (p *sched) lookStuck(now time.Time) {
	sw := &p.stuck
	if sw.mark == nil {
		sw.mark = make([]uint64, len(p.workers))
		sw.since = make([]time.Time, len(p.workers))
		sw.calm = make([]time.Time, len(p.domains))
	}
	rep := &stuckReport{nodes: make([][]stuckWorker, len(p.domains))}
	found := false
	var funcs map[int]string
	st := p.state.Load()
	for di, d := range p.domains {
		// A Close that waits for a stuck node is the case that most needs
		// saying: closing counts.
		stalled := (st == running || st == closing) && d.sleeping.Load() == 0 && d.searching.Load() == 0 && d.hasWork()
		if !stalled {
			// The wait starts over for each of its workers. Said once for
			// the node, not per worker: an idle pool of thousands of
			// workers looks without touching them.
			sw.calm[di] = now
			continue
		}
		var ws []stuckWorker
		running := 0
		for _, w := range d.workers {
			if w.owner.ended.Load() {
				continue // retired (resize.go): no thread to be stuck
			}
			running++
			if sw.since[w.id].Before(sw.calm[di]) {
				sw.since[w.id] = sw.calm[di]
			}
			if !stalled {
				sw.since[w.id] = now // the mark is read again before it counts
				continue
			}
			c := w.snapshot()
			m := c.Completed + c.Parks
			moved := m != sw.mark[w.id]
			sw.mark[w.id] = m
			if moved || w.relay.busy.Load() != 0 || sw.since[w.id].IsZero() {
				sw.since[w.id] = now
				stalled = false
				continue
			}
			// A thread seen running at any look since is computing, or
			// was: the wait starts over. Blocked means asleep at every
			// look of the stretch.
			tid := w.th.TID()
			if state, ok := threadState(tid); ok && state != 'S' && state != 'D' {
				sw.since[w.id] = now
				stalled = false
				continue
			}
			if now.Sub(sw.since[w.id]) < p.cfg.stuckFor() {
				stalled = false
				continue
			}
			ws = append(ws, stuckWorker{id: w.id, tid: tid, dur: now.Sub(sw.since[w.id])})
		}
		if !stalled || len(ws) != running {
			continue
		}
		for i := range ws {
			// The same stretch as the last look found: its function then.
			// Reading the profile stops the world, so once per stretch.
			if old, ok := p.stuckOf(ws[i].id); ok && old.dur < ws[i].dur {
				ws[i].in = old.in
				continue
			}
			if funcs == nil {
				funcs = workerFuncs()
			}
			ws[i].in = funcs[ws[i].id]
		}
		rep.nodes[di] = ws
		found = true
	}
	if !found {
		sw.report.Store(nil)
		return
	}
	sw.report.Store(rep)
	if !sw.warned && p.cfg.stuckWarning() {
		sw.warned = true
		fmt.Fprintf(p.cfg.stuckTo(), "numapool: %s\n", p.stuckText(rep))
	}
}

// hasWork reports whether work is queued for d: in its shards, or in a
// run queue, LIFO slot or join slot of one of its workers.
func (d *domain) hasWork() bool {
	if !d.inject.IsEmpty() || !d.pinned.IsEmpty() {
		return true
	}
	for _, w := range d.workers {
		if w.waitingOn() > 0 {
			return true
		}
	}
	return false
}

// stuckText is the report in a line, for the warning and Explain.
func (p *sched) stuckText(rep *stuckReport) string {
	var parts []string
	for di, ws := range rep.nodes {
		if ws == nil {
			continue
		}
		d := p.domains[di]
		var each []string
		for _, w := range ws {
			in := ""
			if w.in != "" {
				in = " in " + w.in
			}
			each = append(each, fmt.Sprintf("worker %d (thread %d) for %s%s", w.id, w.tid, w.dur.Round(time.Millisecond), in))
		}
		parts = append(parts, fmt.Sprintf("node %d is stuck: every worker has been blocked in a task with work queued for the node: %s", d.node.ID, strings.Join(each, ", ")))
	}
	way := "give the pool workers in reserve to stand in (WithMaxWorkers)"
	switch {
	case !threadCPUs: // no block watch here (standin.go)
		way = "run fewer such tasks at once than the node has workers"
	case p.hasReserve() && p.cfg.blockWatchEvery() == 0:
		way = "turn the block watch on (WithBlockWatch)"
	case p.hasReserve():
		way = "give the pool more workers in reserve (WithMaxWorkers)"
	}
	return strings.Join(parts, "; ") + " (mark waits with Worker.Block, wait through Group.Wait, Join or a Future, or " + way + ")"
}

// stuckOf returns what the last look found stuck for worker id, if it did.
func (p *sched) stuckOf(id int) (stuckWorker, bool) {
	rep := p.stuck.report.Load()
	if rep == nil {
		return stuckWorker{}, false
	}
	for _, ws := range rep.nodes {
		for _, w := range ws {
			if w.id == id {
				return w, true
			}
		}
	}
	return stuckWorker{}, false
}

// workerFuncs reads the goroutine profile and returns, per worker ID,
// the function its goroutine's task is in: the innermost frame that is
// neither the runtime's nor the standard library's nor the pool's, in
// the stack of a goroutine labelled with that worker.
func workerFuncs() map[int]string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return nil
	}
	out := map[int]string{}
	id := -1
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# labels: "):
			id = -1
			if _, v, ok := strings.Cut(line, `"numapool.worker":"`); ok {
				if n, err := strconv.Atoi(v[:strings.IndexByte(v, '"')]); err == nil {
					id = n
				}
			}
		case strings.HasPrefix(line, "#\t") && id >= 0:
			if _, seen := out[id]; seen {
				continue
			}
			f := strings.Fields(line)
			if len(f) < 4 {
				continue
			}
			fn, _, _ := strings.Cut(f[2], "+0x")
			file, _, _ := strings.Cut(f[3], ":")
			if isTaskFrame(fn, file) {
				out[id] = fn
			}
		case line == "":
			id = -1
		}
	}
	return out
}

// isTaskFrame reports whether the frame of function fn in file, in a
// worker's goroutine, may be its task's: not the runtime's, not the
// standard library's blocking calls, not the pool's own code (its
// package's files other than tests).
func isTaskFrame(fn, file string) bool {
	for _, p := range []string{"runtime.", "sync.", "internal/", "syscall.", "time.", "os.", "io.", "net.", "golang.org/x/sys/"} {
		if strings.HasPrefix(fn, p) {
			return false
		}
	}
	return !strings.HasPrefix(fn, "github.com/numapool/numapool/pool.") || strings.HasSuffix(file, "_test.go")
}
