// Package pool is numapool's scheduler: a worker pool that keeps work on
// the NUMA node it was given to.
//
// New discovers the machine (or takes a topology or a synthetic spec),
// makes one group of workers per NUMA node that has CPUs the process may use,
// and starts workers: goroutines locked to OS threads bound to their
// node's CPUs (OpenMP's numa_domains by default; cores, threads,
// ll_caches or none by option; or, with pin.Goroutines, plain goroutines
// locked to no thread, which hand work to and from other goroutines
// without switching threads). Each worker owns a bounded lock-free run
// queue (package queue); each node has an inject shard for work from
// outside, and a pinned shard for work that must stay on the node
// (a Strict Node's, ParallelFor's node blocks), which only the node's
// workers read, one task at a time. A worker runs, in order: every
// interval tasks a task from its node's shards (fairness), its LIFO slot
// (the task spawned last, at most three in a row), its queue, a task from
// the pinned shard, a batch from the inject shard; then it searches: the
// workers and shards of its node, then (one searcher per node at a time)
// the other nodes' workers and inject shards, nearest first; then it
// parks, costing no CPU until work arrives.
//
// # Idle workers
//
// In OpenMP's words: a worker that runs out of work keeps
// searching for the block time (DefaultBlockTime, 50µs) and then sleeps
// until work arrives, costing no CPU (the passive policy). WithBlockTime
// is the one setting: 0 sleeps at once, a negative time never sleeps (the
// active policy: a hand-off is picked up sooner, and an idle pool keeps
// up to half the workers' CPUs busy).
//
// # The API
//
// Outside any task you hold the *Pool; inside a task you hold
// the *Worker that runs it, and w.Pool() is its pool. Every call behaves
// the same wherever it is made, except that from inside a task a call
// that waits runs other tasks meanwhile instead of blocking its worker,
// and a bound on queued work (WithShardBound) does not apply, since only
// the workers make room:
//
//   - Submit(ctx, fn) and TrySubmit(fn) queue a task on the pool; Node(id)
//     is the only route to one node, softly or Strict (its Submit and
//     TrySubmit). From outside, work for the pool goes to a node's shard;
//     from inside a task, to the calling worker (as Spawn), where idle
//     workers steal it.
//   - Run(on, fn) runs a function returning (T, error) on a Target (the
//     pool, a Node, or the calling worker) and waits for it; Async(on, fn)
//     returns a Future to wait on later (Wait, Done).
//   - Group(ctx) is an errgroup whose tasks run on the pool: Go, TryGo,
//     SetLimit, Wait, Context.
//   - ParallelFor(ctx, n, grain, body) splits a range over the nodes
//     (Split says how) and inside each node by lazy binary splitting; the
//     first error stops it. MapReduce combines per-chunk results in a
//     fixed order; PerWorker keeps one padded value per worker.
//   - Inside a task: Spawn and Join, and SpawnWith and Fork, the same for
//     functions that take their input as an argument, which allocate
//     nothing per task (the form for fine-grained recursion); ID, Node,
//     CPU and Pool describe the worker.
//   - AllocOnNode places a slice on a node's memory; AllocFirstTouch
//     leaves each page to the worker that first writes it.
//   - Close, Shutdown(ctx), Stats, Explain, Workers and Nodes.
//
// # CPU kinds
//
// On a hybrid machine (Intel's P- and E-cores, Arm's big and little
// cores: topology.Kind) WithCPUKind("performance") keeps a pool to the
// full-speed cores and WithCPUKind("efficiency") to the slower ones, as
// oneTBB's core-type constraint keeps an arena; two pools of one process
// may split the machine by kind, and work sent to one runs on its kind.
// Loops split their range over the nodes by capacity, so a node of slower
// CPUs gets a smaller block; inside a node, the lazy split gives faster
// workers more. Worker.Kind, WorkerStats.Kind and Stats.Kinds say where
// work ran; Explain names each worker's kind and warns when a node's
// workers are all efficiency CPUs. Where the CPUs are all
// alike, nothing changes and a kind setting keeps every CPU.
//
// # The environment
//
// The environment, in OpenMP's vocabulary, gives defaults that options
// override (WithoutEnv ignores it): NUMAPOOL_NUM_WORKERS (a count),
// NUMAPOOL_MAX_WORKERS (a count: the workers placed, for Resize),
// NUMAPOOL_PLACES (threads, cores, ll_caches, numa_domains or none,
// optionally with a CPU kind: cores:performance), NUMAPOOL_STEAL (hierarchical or flat), NUMAPOOL_TOPOLOGY (a synthetic
// spec: 2x4, 2x4x2, 0-1;2-3), NUMAPOOL_NODES (node IDs: 0,2 or 0-1),
// NUMAPOOL_WAIT_POLICY (passive or active), NUMAPOOL_BLOCKTIME (200us,
// 1ms, a number of ms, or infinite), NUMAPOOL_SPARES (spare threads per
// node for Worker.Block: 0 or a cap), NUMAPOOL_BLOCK_WATCH (the block
// watch's interval: a duration, a number of ms, or 0 for off) and NUMAPOOL_DISPLAY_AFFINITY (true:
// each new pool prints one line per worker to stderr, with its node,
// thread ID and the CPUs its thread is bound to). Values are
// case-insensitive. A NUMAPOOL_* variable the pool does not know is
// named, with the nearest setting, on stderr once and in Explain, and
// fails New under WithRequiredPlacement.
//
// # When the machine changes
//
// The process's CPUs are an input that changes while a pool runs:
// Kubernetes and Slurm rewrite cpusets, taskset -p narrows a process,
// CPUs go offline and come back, Go changes GOMAXPROCS when a CPU limit
// does. The pool follows, without fighting any of them:
//
//   - New reads the process's CPUs when it is called, not when the
//     program started: the mask of a thread that no pool pins (the
//     machine monitor's, or with no pool alive the main thread's), within
//     the cgroup cpuset (cpuset.cpus.effective in v2, cpuset.cpus in v1)
//     and the online CPUs. A pool made after taskset -a -p places its
//     workers inside what is left.
//   - While a pool lives, one monitor goroutine of the process looks
//     every second (WithMachineWatch, NUMAPOOL_MACHINE_WATCH; 0 turns
//     it off), locked to that unpinned thread; a look costs its thread a
//     few microseconds beside the wake-up of a sleeping goroutine
//     (BenchmarkMachineLook), and no worker pays anything on its hot
//     paths. Within one interval of a change, every worker's thread
//     is re-bound by its thread ID, busy or parked: on its own CPUs that
//     are left, else on the rest of its node, else on the nearest node
//     of the pool that has CPUs (Explain says which); and back on its own
//     when they return. No mask the pool sets (binding, spreading, the
//     mask a thread gets back when its worker ends) holds a CPU outside
//     the process's CPUs as last read.
//   - A mask someone else set on one worker's thread (taskset -p TID) is
//     honoured: the pool sets no other on that thread and reports it,
//     until the process's CPUs leave it none. A look reads the masks of
//     up to 64 threads, in turn (each read is a system call, and they
//     would be most of an idle pool's cost), so a pool of more workers
//     sees such a mask within workers/64 looks. A thread's mask widened to
//     every CPU of the process is not: that is what the kernel does to a
//     thread whose CPUs all went offline, also when they came back before
//     the pool looked, and the worker is bound again.
//   - The plan stays: the workers, their nodes and their queues. Strict
//     work for a node with no CPU left is run by that node's workers,
//     wherever they run now; loops keep their node blocks, so a block
//     first touched on a node stays with that node's workers, though
//     they may run elsewhere meanwhile. CPUs the process gains past what
//     New saw, and GOMAXPROCS below the number of workers (the locked
//     workers then take turns on fewer processors), are reported, not
//     acted on: Resize acts on them (see Resizing). Memory placed on a node stays there; cpuset.mems is
//     not followed. The CPU claims that spread the pools of one process
//     (internal/place/claims.go) are the ones New made.
//
// Explain shows the process's CPUs as last read, each re-plan (when,
// what changed, which workers moved where), the masks the threads have
// (read from the kernel by thread ID, as Stats' WorkerStats.Bound is) and
// what is degraded now; Counters.Replans counts the re-plans each worker
// took up.
//
// # Resizing
//
// Resize(n) changes how many of the pool's workers run, while it runs;
// Size says how many do. The workers are the ones New placed (Workers):
// all of them start, or with WithMaxWorkers(m) New places m and starts
// WithWorkers' count, so that the pool can grow to m. A worker Resize
// retires keeps its ID, CPU, queue and PerWorker cell, and one it brings
// back is bound where New placed it and takes work at once. Resize spreads n over the nodes in proportion to their
// workers, at least one per node, since a node's strict work runs only
// there; inside a node the lowest IDs run. A retiring worker ends at its
// next task boundary (at once if it sleeps; a task that waits inside,
// when the task returns): its queued work goes to its node's shard,
// where the node's workers take it, none of it lost or run twice; its
// thread's mask is put back and the thread ends. Resize may be called
// from any goroutine, a task included; it returns ErrClosed once Close
// or Shutdown began. Size and Stats (NodeStats.Workers,
// WorkerStats.Retired) count a retiring worker as running until it
// reaches its task boundary. A loop splits its range by the capacity of
// the workers running at its start (Split). The protocol is argued in
// the source, resize.go.
//
// # Costs
//
// Orders of magnitude on a current x86 server (docs/performance.md has
// the measured figures and how they were made): a Spawn or a Submit from
// outside, tens of nanoseconds; a Join or Fork whose half nobody steals,
// tens of nanoseconds, and one that is stolen, a microsecond or so; a Run
// from outside, a few hundred nanoseconds when its caller joins (The
// caller joins), a microsecond while a worker searches, tens of
// microseconds when a parked worker's thread must be woken; a parked
// pool, no CPU. Offload batches (a Group, ParallelFor, MapReduce) rather
// than one small job at a time.
//
// # The caller joins
//
// A call from ordinary code that waits for its own work runs that work
// itself when it can, as oneTBB's external threads do in an arena and
// OpenMP's primary thread does in a parallel region, instead of waking a
// sleeping worker's thread (tens of microseconds) and waiting for it:
// Run on the pool or on a soft Node of the caller's node, and
// ParallelFor and MapReduce on a pool of one node. The caller takes the seat of
// a worker of the node of the CPU it runs on that is parked with nothing
// on its stack, and for the call it is that worker: the *Worker its
// function gets is one of the pool's Workers() (ID, Node, CPU, Kind,
// PerWorker and the counters are that worker's), its spawns go to that
// worker's queue, where the node's idle workers steal them, and while it
// waits it runs the pool's work as a waiting task does. The worker's
// thread sleeps meanwhile, so no more work runs at once than there are
// workers. When the call ends, the seat goes back: parked, or with its
// thread woken for what the call left queued. Counters.CallerRuns counts
// the tasks callers ran.
//
// Otherwise the work is handed off as before: the caller is itself one of
// the pool's tasks (it uses its own worker), the node has no such worker
// parked (every worker is busy, or waits inside a task), the caller runs
// on a CPU outside the pool's nodes, the target is a Strict Node or
// another node, the call is a loop (ParallelFor, MapReduce) on a pool of
// several nodes, or it is Async, a Future's Wait or a Group's Wait. A
// caller joins only where what it runs first is the call's own work (the
// function, the loop's block): a Future's or a Group's work is already
// queued among others', and a waiter that joined would take whatever its
// node has queued, and return only once that is done too. The caller's
// thread is not bound to the node's CPUs, as binding costs more than the
// join saves; that is why a loop, whose blocks must first touch their
// pages on their nodes, joins only where there is one node. A loop's
// caller is locked to its thread for the loop.
//
// What a caller sees that a worker does not: a Run's caller runs its
// function, and what it helps with while it waits, under its own pprof
// labels; before it runs work it took from its node's queues or another
// worker (strict work among it), its thread is bound to the seat's CPUs
// until the call ends; and runtime.Goexit (t.Fatal) in work the caller
// runs ends the caller's goroutine, as calling that function directly
// would, where work a worker runs gives its waiter ErrGoexit. join.go
// states the seat's handshake and argues why no task and no wake-up is
// lost. Tests: TestCallerJoinsRun, TestCallersCountedUnderLoad,
// TestCallersAtTheCap, TestCallerRunsStrictWorkOnItsNode,
// TestCallerKeepsThePoolOpen, TestCallerKeepsItsLabels.
//
// # Observing a pool
//
// Profiles: every task runs under the pprof labels numapool.node (the
// node's OS ID) and numapool.worker (Worker.ID), and work submitted with a
// context (Submit, Node.Submit, Group, ParallelFor, MapReduce) under that
// context's labels too, so go tool pprof -tagfocus job=x or -tagroot
// numapool.node splits the pool's CPU time by job or node. Work made
// inside a task without a context of its own (Spawn, Group.Go, Async,
// Run, Join's and Fork's b side, a loop's pieces) runs under the labels of
// the task that made it; no task keeps the labels of the task before it
// on its worker, nor runs under those of the goroutine that called New.
// With no labels the cost is a nil check per task; a submission with
// labels reads them once and queues its task as its record, and merged
// label sets are cached per set and worker (labels.go).
//
// Traces: while runtime/trace records, each ParallelFor, MapReduce,
// Group (until its first Wait), Async and Run (on a *Pool or a Node) is a
// trace task named numapool.ParallelFor and so on, and each part of it
// that a worker runs is a region of type "numapool.node N"; a take of
// tasks from another node is a log event of category numapool.cross-node,
// and each re-plan (When the machine changes) one of numapool.replan.
// With tracing off each costs one branch.
//
// Metrics: Stats has counters per worker, per node and in total, and per
// node the histograms QueueWait (submission to start) and RunTime of about
// one task in 256, sampled so that other tasks read no clock; poolvar
// publishes Stats through expvar. docs/observing.md explains each figure
// and how to split a profile; examples/metrics exports Stats to Prometheus
// and OpenTelemetry.
//
// # Errors and misuse
//
// Conditions a caller cannot rule out return errors to branch on with
// errors.Is: ErrClosed, ErrFull, ErrUnknownNode, ErrInsideTask,
// ErrAbandoned, ErrGoexit, ErrTooManyWorkers, ErrNodeMemory. Programmer
// mistakes panic with a message that starts with "pool:", the same in
// every call: a nil function; a nil *Pool or a Pool not made by New, a
// Node not made by Pool.Node, a nil Target or a nil *Worker; a Worker
// used from a goroutine that is not running a task on it (checked in
// every build on amd64 and arm64, with -race elsewhere), SetLimit on a
// Group with active tasks. A panic never leaves a queue half-changed.
//
// # Panics and runtime.Goexit in tasks
//
// A task's panic is recovered and the worker lives on.
// Join, Fork, Group.Wait, ParallelFor, MapReduce, Run and a Future
// return it as a *PanicError. A plain task's panic goes to the
// WithPanicHandler handler; without one, or when the handler panics
// itself, the process fails as it would for an unrecovered panic in a
// goroutine (exit status 2, GOTRACEBACK and debug.SetCrashOutput apply,
// the task's stack is in the report). Nothing is swallowed: panic(nil)
// under GODEBUG=panicnil=1 is a panic too. Tests: TestPanicsEndTheProcess,
// TestPanicWithoutHandlerCrashes.
//
// runtime.Goexit in a task (t.Fatal, t.FailNow and t.SkipNow call it)
// that a worker runs (a caller that joined runs work as its own: The
// caller joins): the task fails, and its waiter (Run, a Future, Join, Fork, Group.Wait,
// ParallelFor, MapReduce) returns ErrGoexit. Goexit ends every frame of
// the worker's goroutine, so every task that was waiting on that stack
// (helping inside a wait, or Run on its own worker) ends too, and its
// waiter gets ErrGoexit as well. The worker goes on as a new goroutine on
// a newly locked and bound thread with the same ID, queue, LIFO slot and
// counters; the Join offer it held is queued, not dropped; the old thread
// ends; no other goroutine is ever taken for the worker
// (Stats: Counters.Goexits). A test that calls t.Fatal inside a task thus
// fails at once with its message. Tests: TestGoexitCompletesWaiters,
// TestGoexitInPlainTask, TestGoexitHandsOnTheJoinSlot,
// TestGoexitLeavesNoImpostor, TestGoexitReplacesTheThread,
// TestFatalInsideTaskFailsTheTest.
//
// A task's own runtime.LockOSThread and UnlockOSThread calls, paired or
// not, cannot take a worker's thread away: the worker holds its lock with
// room to spare, and if a task unlocks past that, the worker notices at
// its next stop point (a wake-up, or every 1024 tasks), locks and binds
// the thread it is on, gives the deserted thread the process's mask back
// (within the process's CPUs now)
// and counts it (Counters.Relocks). Test: TestStrayUnlockKeepsTheThread.
//
// # Tasks that block, and pools that wait on each other
//
// A worker runs one task at a time, so a task that blocks (on a channel,
// a lock, sync.WaitGroup.Wait, a sleep, a read, a call that waits for
// another pool) holds its worker until it returns: unmarked, the worker
// runs nothing else meanwhile, and is not replaced. A task that submits
// work and waits for it with a sync.WaitGroup thus waits with its worker
// idle, and when every worker that could run that work does the same
// (always, on a pool of one worker) nothing runs it: a deadlock. Three
// ways out:
//
//   - Wait for work you made with what the pool knows about: Group.Wait,
//     Join or Fork, a Future's Wait, Run, ParallelFor, MapReduce; from
//     inside a task these run other tasks while they wait. Test:
//     TestBlockedTaskHoldsItsWorker.
//   - Mark the wait: w.Block(fn) runs fn, which may block, on the task's
//     thread while a spare thread, bound to the worker's CPUs, takes the
//     worker's place: its queue, its LIFO and join slots, its ID and
//     PerWorker value, the node's shards and steals (Tokio's
//     block_in_place, Java's ManagedBlocker). When fn returns the task
//     goes on, with w valid again, once the spare finishes the task it is
//     running. Threads blocked this way may return in any order. The
//     spare needs the task's processor: where fn waits in the Go runtime
//     (a channel, a lock, a sleep, a pipe or network read) it gets it at
//     once; where fn waits in a system call the runtime cannot see into (a
//     regular file's read, a cgo call, syscall.Syscall) only when the
//     runtime's monitor (sysmon) takes the processor back from the call,
//     at one of its looks, which it spaces out while it finds nothing to
//     take back: as for a goroutine in such a call.
//     Inside fn the task must not use w (its owner check panics): submit
//     to the Pool or a Node instead. A panic or runtime.Goexit in fn
//     passes through Block. Spares park when they hand the worker back,
//     end after 10 s parked or with the pool, and are capped per node
//     (WithSpares, NUMAPOOL_SPARES; default 256) and by the threads the
//     process may start beyond the workers' (New's count, as for
//     ErrTooManyWorkers): past either Block runs fn with no spare and
//     counts it (Counters.SparesRefused). Close
//     waits for blocked tasks as for any running task; a Shutdown that
//     gives up counts them still running. Stats shows the tasks blocked
//     now and the spares alive and parked. Tests:
//     TestBlockedTasksLetLaterTasksRun, TestBlockWaitingForSubmittedWork,
//     TestBlockedTasksReturnInAnyOrder, TestBlockCountedUnderLoad,
//     TestSpareRunsStrictWorkOnTheWorkersCPUs, TestCloseWithBlockedTasks,
//     TestShutdownWithBlockedTasks.
//   - Give the pool workers in reserve: with WithMaxWorkers above the
//     workers that run (or after a Resize retired some), workers stand in
//     for blocked ones, as Java's ForkJoinPool adds workers up to its
//     maximum pool size. The block watch (standin.go) looks every
//     millisecond while a worker is awake (WithBlockWatch,
//     NUMAPOOL_BLOCK_WATCH; 0 turns it off; Linux only). A worker counts
//     as blocked when, inside a task on its own seat, its thread has had
//     the CPU for less than a quarter of each of the last two intervals
//     and sleeps now; workers that wait for a processor (more awake
//     workers than GOMAXPROCS) are not counted. A task that computes is
//     never blocked. When a node has blocked workers, work queued and
//     none of its workers parked, enough of its workers in reserve to
//     keep its share busy (by its workers' CPU time; at least one per
//     blocked worker) come back (its lowest IDs, as Resize brings them),
//     each with its own ID, queue and PerWorker cell, so unmarked tasks
//     keep theirs. They retire one at a time, at a task boundary, after 20
//     looks in a row find fewer blocked workers than stand-ins, and all at
//     once when every worker is parked. The watch looks on while Close drains the
//     pool. Stand-ins count in Size beyond Resize's n; Stats shows them
//     (StandIns, StandInsStarted, and StandInsRefused for stand-ins
//     wanted beyond the node's reserve: while it grows, a larger
//     WithMaxWorkers would help). The watch costs a system
//     call per awake worker per look, nothing per task, and nothing once
//     every worker is parked or while no node has a worker in reserve. A caller from
//     outside that joined (Run) holds its seat on its own thread, and a
//     spare holds a seat for a task in Block: the watch reads neither, so
//     an unmarked wait there is not made up for. Tests:
//     TestStandInsRunWorkQueuedBehindBlockedTasks,
//     TestCloseRunsWorkQueuedBehindBlockedTasks, TestComputeGetsNoStandIn,
//     TestBlockWatchRestsInAnIdlePool, TestStandInsCountedStream.
//
// What Block costs and gives: two thread hand-offs (the spare's wake-up,
// and the task's thread taking its place back), so it pays for a wait
// that is long against a thread's wake-up (docs/performance.md has the
// figures, workloads blocking and blocking-sleep). It gives the node's CPUs back to the
// node's work when the wait is one the Go runtime sees (a channel, a
// lock, time.Sleep, network and pipe reads): the blocked goroutine gives
// up its processor (its P) at once. A thread blocked in the kernel outside
// the runtime's sight (a read of a regular file, a cgo call, a raw system
// call) keeps its processor until the runtime's monitor takes it back,
// one or more of the monitor's ticks later; meanwhile the spare waits for
// a processor, as a goroutine would. A blocked task nobody marked is made
// up for only where the pool has workers in reserve (above).
//
// A pool that is stuck says so: when every worker of a node has been
// blocked in a task (its thread asleep, not computing) for 5 s with work
// queued for the node and none of them in Block, Stats marks the node
// (NodeStats.Stuck) and says for each worker how long and in which
// function (WorkerStats.BlockedFor, BlockedIn), Explain has a line, and
// the pool writes one warning to stderr (off with WithStuckWarning(false)).
// The machine monitor looks (WithMachineWatch; none with it off). Tests:
// TestStuckPoolSaysSo, TestStuckWatchLeavesComputeAndBlockAlone.
//
// That help is for the caller's own pool only: to a task of pool A, pool
// B is the outside, and Run, Future.Wait, Group.Wait, ParallelFor or
// MapReduce on B block A's worker as any goroutine would block. If B's
// tasks in turn wait for A's work, the two pools can deadlock, each one's
// workers all waiting for work queued on the other. Use one pool (Node
// and Strict send work to one node of it; one pool per CPU kind is fine
// while neither waits for the other), or let waiting run one way only
// (B's tasks never wait for A), or hand results over without waiting in
// a task (Submit or Async, and a channel or Future.Done read by a
// goroutine outside both pools). Test: TestPoolsWaitingOnEachOtherDeadlock.
//
// A pool queues without bound by default: Submit from outside never
// waits, so a producer that outruns the workers grows the queues, and
// Close, which runs everything queued before it returns, then runs as
// long as that backlog takes. Bound it with WithShardBound (Submit waits
// for room, TrySubmit returns ErrFull), or stop with Shutdown and a
// deadline, which drops what has not started by then.
//
// # Close and Shutdown
//
// Close stops intake, runs everything queued and everything
// those tasks spawn, and joins the workers, whose locked threads exit with
// them.
// Shutdown(ctx) gives up when ctx is done: tasks not started are dropped
// and counted (Stats.Abandoned), whoever waits for them gets an error
// wrapping ErrAbandoned, and Shutdown returns within 25 ms of ctx being
// done even while a task is stuck: its error then says how many tasks are
// still running (Stats.BusyWorkers counts their workers) and how many were dropped.
// Their workers end when those tasks return; a later Close waits for
// that, and the pool's CPU claims are released then. Test:
// TestShutdownGivesUpOnAStuckTask. Every exit may be called any number of
// times, in any order; from inside a task they close intake and return
// ErrInsideTask. A task accepted (Submit returned nil) either runs or is
// counted as abandoned. A Pool dropped without Close is closed when the
// garbage collector finds it unreachable. lifecycle.go states the
// protocol and argues why it holds.
package pool
