// Package place is where a pool's worker threads run: the plan (which
// worker on which CPUs, the claims that spread the pools of one process,
// the CPU kinds, the thread limits New checks), each worker's Thread
// (binding, re-binding, spreading over its node's CPUs, ending and
// deserting a thread), the machine monitor that re-plans when the
// process's CPUs change, and where a node's memory is (memory.go:
// AllocOnNode's node and its checks). The scheduler calls it at a few doors: NewPlan
// and NewPlacer in New, Thread.Bind when a worker's goroutine starts,
// Thread.End and Desert when it ends, Thread.Aim when it wakes a parked
// worker, the Thread's stop-point checks (KeepThread, Follow, Spread),
// and the reports Explain and Stats ask for (Placer.Report, Degraded,
// Thread.Report, Mask). It knows nothing of queues and tasks.
//
// The name is the verb: this package places threads. Every mask the pool
// sets on a thread is set here, under the thread's masking flag, so that
// the monitor can tell the pool's masks from masks set from outside.
package place
