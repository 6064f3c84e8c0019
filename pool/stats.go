package pool

import (
	"context"
	"runtime/trace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/numapool/numapool/pool/internal/place"
)

// Counters are a worker's (or a node's, or the pool's) event counts. A
// take of work from another node (a steal from its workers, a pull from
// its inject shard) is counted by what happened to the first task it
// took, the one the taker runs next: run there, it is a cross-node steal
// or pull; sent back to its node (a strict task, a loop piece, a soft
// task whose node keeps up), it is counted in CrossNodeSentHome instead,
// and moved no work off its node.
type Counters struct {
	TasksRun  uint64 `json:"tasks_run"` // tasks started (a loop piece sent home included; a Group's function skipped for a sibling's drop counts in Abandoned instead)
	Completed uint64 `json:"completed"` // tasks finished, panicked or not
	Panicked  uint64 `json:"panicked"`  // tasks (and loop parts, Join halves) whose function panicked
	// Spawned counts tasks made inside tasks: Spawn, Join offers,
	// Group.Go, Async, Run and Node submissions from a task, and loop
	// pieces (also those remade to send home).
	Spawned              uint64 `json:"spawned"`
	LIFOHits             uint64 `json:"lifo_hits"`               // tasks taken from the LIFO slot
	InjectPulls          uint64 `json:"inject_pulls"`            // takes from the worker's own node's shards (a batch, or one pinned task)
	StealsInNode         uint64 `json:"steals_in_node"`          // steals from workers of the same node (queue, LIFO or join slot)
	StealsCrossNode      uint64 `json:"steals_cross_node"`       // steals from other nodes' workers whose first task ran here
	TasksStolenInNode    uint64 `json:"tasks_stolen_in_node"`    // tasks moved by the steals StealsInNode counts
	TasksStolenCrossNode uint64 `json:"tasks_stolen_cross_node"` // tasks moved by the steals StealsCrossNode counts
	InjectPullsCrossNode uint64 `json:"inject_pulls_cross_node"` // batches taken from other nodes' inject shards whose first task ran here
	TasksPulledCrossNode uint64 `json:"tasks_pulled_cross_node"` // tasks moved by the pulls InjectPullsCrossNode counts
	ChunksCrossNode      uint64 `json:"chunks_cross_node"`       // MapReduce chunks of another node's block claimed here
	CrossNodeSentHome    uint64 `json:"cross_node_sent_home"`    // steals and pulls from other nodes whose first task was sent back to its node
	Parks                uint64 `json:"parks"`                   // times the worker slept
	Overflows            uint64 `json:"overflows"`               // full run queues that moved half to the shard
	SentHome             uint64 `json:"sent_home"`               // tasks sent back to their node: strict ones, loop pieces, soft ones whose node keeps up
	Spreads              uint64 `json:"spreads"`                 // moves off a CPU another worker of the node ran on
	Goexits              uint64 `json:"goexits"`                 // goroutines of the worker a task ended with runtime.Goexit, each replaced (worker.go)
	Relocks              uint64 `json:"relocks"`                 // threads a task unlocked the worker from, each replaced by the one it ran on (worker.go)
	Replans              uint64 `json:"replans"`                 // changes of the machine (process CPUs, GOMAXPROCS) the worker took up at a stop point (internal/place/monitor.go)
	CallerRuns           uint64 `json:"caller_runs"`             // tasks a caller from outside ran on the worker's seat while its thread slept (join.go); counted in TasksRun too
	Blocks               uint64 `json:"blocks"`                  // Worker.Block calls that handed the worker's seat to a spare thread (spare.go)
	SparesStarted        uint64 `json:"spares_started"`          // spare threads started for those, the rest found one parked
	SparesRefused        uint64 `json:"spares_refused"`          // Worker.Block calls that ran with no spare: the node's cap (WithSpares) was reached
}

const nCounters = 25

func (c *Counters) fields() [nCounters]*uint64 {
	return [nCounters]*uint64{&c.TasksRun, &c.Completed, &c.Panicked, &c.Spawned, &c.LIFOHits, &c.InjectPulls,
		&c.StealsInNode, &c.StealsCrossNode, &c.TasksStolenInNode, &c.TasksStolenCrossNode,
		&c.InjectPullsCrossNode, &c.TasksPulledCrossNode, &c.ChunksCrossNode, &c.CrossNodeSentHome,
		&c.Parks, &c.Overflows, &c.SentHome, &c.Spreads, &c.Goexits, &c.Relocks, &c.Replans, &c.CallerRuns,
		&c.Blocks, &c.SparesStarted, &c.SparesRefused}
}

// Sub returns c minus o, field by field: the counts between two Stats.
func (c Counters) Sub(o Counters) Counters {
	a, b := c.fields(), o.fields()
	for i := range a {
		*a[i] -= *b[i]
	}
	return c
}

func (c *Counters) add(o Counters) {
	a, b := c.fields(), o.fields()
	for i := range a {
		*a[i] += *b[i]
	}
}

// crossSteal is a worker's last steal from another node while the fate
// of its first task is open. The thief runs that task right after the
// steal (run), and it is decided before any other task starts on the
// worker: run sends a strict or soft task home before it counts the
// task run, a loop piece (piece.run) sends itself home right after.
// So sentHome knows the first task by the run count, and everything
// else that reaches the worker's counters (the next steal, publish)
// comes after the decision: a steal still open then ran its task here.
type crossSteal struct {
	moved uint64 // tasks the steal moved, the first included; 0: none open
	ran   uint64 // TasksRun at the steal
	pull  bool   // taken from the node's inject shard, not from a worker
}

// stoleCross notes a take of moved tasks from another node, from its
// inject shard (pull) or a worker, counted once its first task's fate is
// known.
func (w *Worker) stoleCross(moved uint64, pull bool) {
	w.countCross()
	w.seek.cross = crossSteal{moved: moved, ran: w.c.TasksRun, pull: pull}
}

// countCross counts the open cross-node steal, if any, as one whose first
// task ran here.
func (w *Worker) countCross() {
	switch {
	case w.seek.cross.moved == 0:
	case w.seek.cross.pull:
		w.c.InjectPullsCrossNode++
		w.c.TasksPulledCrossNode += w.seek.cross.moved
	default:
		w.c.StealsCrossNode++
		w.c.TasksStolenCrossNode += w.seek.cross.moved
	}
	w.seek.cross.moved = 0
}

// sentHome counts the open cross-node take, if the task being sent home
// is its first, in CrossNodeSentHome: a task sent home before it
// was counted run (remade false), or a loop piece, which was (remade).
func (w *Worker) sentHome(remade bool) {
	ran := w.seek.cross.ran
	if remade {
		ran++
	}
	if w.seek.cross.moved != 0 && w.c.TasksRun == ran {
		w.c.CrossNodeSentHome++
		w.seek.cross.moved = 0
	}
}

// published is the copy of a worker's counters that Stats reads. The
// owner counts in plain fields and copies them here every publishEvery
// tasks and whenever it parks or ends, so counting costs the hot path no
// atomic operation; Stats may lag a running worker by up to publishEvery
// tasks.
type published struct {
	_ [64]byte
	v [nCounters]atomic.Uint64
	_ [64]byte
}

// publish copies the counters that changed since the last publish: a
// store is a locked instruction, and between two publishes a worker
// running tasks changes only a few of them. The owner is the only writer,
// so a load gives what it stored last.
func (w *Worker) publish() {
	w.countCross()
	w.obs.lat.Publish(&w.obs.pubLat)
	for i, v := range w.c.fields() {
		if w.pub.v[i].Load() != *v {
			w.pub.v[i].Store(*v)
		}
	}
}

func (w *Worker) snapshot() Counters {
	var c Counters
	for i, f := range c.fields() {
		*f = w.pub.v[i].Load()
	}
	return c
}

// WorkerStats are one worker's counters and placement.
type WorkerStats struct {
	Worker int    `json:"worker"`
	Node   int    `json:"node"`
	CPU    int    `json:"cpu"`
	Bound  string `json:"bound_cpus"`     // OS CPUs the thread is bound to, read from the kernel by thread ID; "" when unbound
	Kind   string `json:"kind,omitempty"` // the CPU's kind (Worker.Kind); "" where CPUs are all alike
	// BlockedFor and BlockedIn: on a node the stuck watch found stuck
	// (NodeStats.Stuck), how long the worker has been blocked in its task
	// and the task's function; zero elsewhere.
	BlockedFor time.Duration `json:"blocked_for_ns,omitempty"`
	BlockedIn  string        `json:"blocked_in,omitempty"`
	// Retired: the worker has retired (Resize, or WithMaxWorkers at New):
	// it runs no thread until a Resize brings it back, and its counters
	// stay. A worker a Resize retires counts as running until it reaches
	// its next task boundary.
	Retired bool `json:"retired,omitempty"`
	Counters
}

// NodeStats are the sums over one node's workers, and its queue.
type NodeStats struct {
	Node int `json:"node"`
	// Workers: the node's workers that run, all but those a Resize
	// retired.
	Workers int `json:"workers"`
	// Stuck: every worker of the node has been blocked in a task for
	// seconds with work queued for it (stuck.go; read at the monitor's
	// last look).
	Stuck bool `json:"stuck,omitempty"`
	Tasks
	Counters
	// QueueWait is how long tasks that started on the node's workers
	// waited from submission to start, and RunTime how long they ran (a
	// task that waits inside for other work, as Group.Wait, includes the
	// tasks it ran meanwhile): for about one task in 256, sampled so that
	// the other tasks read no clock (histogram.go).
	QueueWait Histogram `json:"queue_wait"`
	RunTime   Histogram `json:"run_time"`
}

// Tasks are the counts a service watches, per node and in total.
type Tasks struct {
	// Submitted: tasks accepted from outside the pool (Submit and its
	// forms, Group.Go, Async, a loop's node blocks) plus those queued from
	// inside tasks (Counters.Spawned).
	Submitted uint64 `json:"submitted"`
	// Queued: tasks waiting to start on the node now, in its shards and
	// in its workers' run queues, LIFO and join slots.
	Queued int `json:"queued"`
	// BusyWorkers: workers in a task now (not parked, not searching);
	// after a Shutdown gave up, the workers that have not ended, each
	// still in a task.
	BusyWorkers int `json:"busy_workers"`
	// Blocked: tasks in Worker.Block now, or back from it and waiting for
	// their worker's seat. Spares: spare threads alive (in a task, holding
	// a seat or parked), SparesParked: those parked (spare.go).
	Blocked      int `json:"blocked"`
	Spares       int `json:"spares"`
	SparesParked int `json:"spares_parked"`
	// StandIns: workers running now beyond Resize's share, standing in for
	// workers whose tasks block without Worker.Block (standin.go);
	// StandInsStarted counts those started, StandInsRefused those the
	// block watch wanted beyond the node's reserve (each once while the
	// node goes on needing stand-ins).
	StandIns        int    `json:"stand_ins"`
	StandInsStarted uint64 `json:"stand_ins_started"`
	StandInsRefused uint64 `json:"stand_ins_refused"`
}

// Stats are the pool's counters per worker, per node and in total. They
// are JSON-encodable, with snake_case names.
type Stats struct {
	Workers []WorkerStats `json:"workers"`
	Nodes   []NodeStats   `json:"nodes"`
	// Kinds are the counters summed by CPU kind ("performance",
	// "efficiency": WorkerStats.Kind), on a machine with named kinds; nil
	// elsewhere. A worker whose CPU is of no named kind is in none.
	Kinds map[string]Counters `json:"kinds,omitempty"`
	Tasks
	Total Counters `json:"total"`
	// Abandoned counts tasks dropped by Shutdown at its deadline, a
	// Group's functions skipped because one of the group's tasks was
	// dropped among them.
	Abandoned uint64 `json:"abandoned"`
}

// Stats returns the counters. Running workers publish theirs every 64
// tasks and when they park, so a busy worker's figures may lag slightly;
// after Close they are exact. Queued, BusyWorkers, Blocked, Spares,
// SparesParked and StandIns are read at the call.
func (p *Pool) Stats() Stats {
	st := Stats{Abandoned: uint64(p.abandoned.Load())}
	retired := p.idle.retiredNow()
	for _, d := range p.domains {
		size := int(d.size.Load())
		ns := NodeStats{Node: d.node.ID, Workers: size, Tasks: Tasks{Queued: d.waitingNow()}}
		for _, w := range d.workers {
			c := w.snapshot()
			ws := WorkerStats{Worker: w.id, Node: d.node.ID, CPU: w.cpu, Kind: place.KindName(p.topo, w.cpu), Counters: c,
				Retired: retired[w.id]}
			if !ws.Retired {
				ws.Bound = w.th.Mask().String() // a retired worker has no thread
			}
			if sw, ok := p.stuckOf(w.id); ok {
				ws.BlockedFor, ws.BlockedIn = sw.dur, sw.in
				ns.Stuck = true
			}
			st.Workers = append(st.Workers, ws)
			ns.add(c)
			addTo(&ns.QueueWait, &w.obs.pubLat.Wait)
			addTo(&ns.RunTime, &w.obs.pubLat.Run)
		}
		ns.Submitted = d.inject.Pushed() + d.pinned.Pushed() + ns.Spawned
		ns.Spares = int(d.spares.Load())
		ns.StandIns = int(p.standInsOf(d).now.Load())
		ns.StandInsStarted = p.standInsOf(d).started.Load()
		ns.StandInsRefused = p.standInsOf(d).refused.Load()
		for _, w := range d.workers {
			b, _, parked := w.relay.counts()
			ns.Blocked += b
			ns.SparesParked += parked
		}
		switch p.state.Load() {
		case drained: // no task runs: the workers are ending
		case aborting:
			// A Shutdown gave up: the busy workers are those in a task.
			// (Ended ones have left the parked set, so the counts below
			// would count them as busy.)
			for _, w := range d.workers {
				if p.inTask(w) {
					ns.BusyWorkers++
				}
			}
		default:
			ns.BusyWorkers = max(0, size-int(d.sleeping.Load())-int(d.searching.Load()))
		}
		st.Nodes = append(st.Nodes, ns)
		st.Total.add(ns.Counters)
		st.Submitted += ns.Submitted
		st.Queued += ns.Queued
		st.BusyWorkers += ns.BusyWorkers
		st.Blocked += ns.Blocked
		st.Spares += ns.Spares
		st.SparesParked += ns.SparesParked
		st.StandIns += ns.StandIns
		st.StandInsStarted += ns.StandInsStarted
		st.StandInsRefused += ns.StandInsRefused
	}
	st.Kinds = kindStats(st.Workers)
	return st
}

// waitingNow is the number of tasks waiting to start on d: in its
// shards, and in its workers' run queues, LIFO and join slots. Each is
// read at some moment during the call, from any goroutine. A blocked
// worker's queue is work a stand-in or a thief may still run, so a stuck
// node shows what it holds (Stats.Queued).
func (d *domain) waitingNow() int {
	n := d.inShards()
	for _, w := range d.workers {
		n += w.waitingOn()
	}
	return n
}

// waitingOn is the number of tasks waiting in w's run queue, LIFO slot
// and join slot, read at some moment during the call, from any goroutine.
func (w *Worker) waitingOn() int {
	n := w.stealer.Len()
	if w.lifo.Load() != nil {
		n++
	}
	if w.joinSlot.Load() != nil {
		n++
	}
	return n
}

// traceCross logs a take of moved tasks from domain from by w.
func (w *Worker) traceCross(from *domain, moved uint64, pull bool) {
	how := "stole"
	if pull {
		how = "pulled"
	}
	trace.Log(context.Background(), "numapool.cross-node",
		"node "+strconv.Itoa(w.domain.node.ID)+" "+how+" "+strconv.FormatUint(moved, 10)+
			" tasks from node "+strconv.Itoa(from.node.ID))
}
