// Package pool is numapool's scheduler: a worker pool that keeps work on
// the NUMA node it was given to.
//
// New discovers the machine (or takes a topology or a synthetic spec),
// makes one worker group per NUMA node that has CPUs the process may use,
// and starts workers: goroutines locked to OS threads bound to their
// node's CPUs (OpenMP's numa_domains by default; cores, threads,
// ll_caches or none by option). Each worker owns a bounded lock-free run
// queue (package queue); each node has an inject shard for work from
// outside, and a pinned shard for work that must stay on the node
// (SubmitToStrict, ParallelFor's node blocks), which only the node's
// workers read, one task at a time. A worker runs, in order: every
// interval tasks a task from its node's shards (fairness), its LIFO slot
// (the task spawned last, at most three in a row), its queue, a task from
// the pinned shard, a batch from the inject shard; then it searches: the
// workers and shards of its node, then (one searcher per node at a time)
// the other nodes' workers and inject shards, nearest first; then it
// parks, costing no CPU until work arrives.
//
// Outside any task you hold the *Pool: Submit, SubmitTo, SubmitToStrict,
// TrySubmit, Stats, Explain, Close, Shutdown. Inside a task you hold the
// *Worker that runs it: Spawn, ID, Node, CPU. A worker's methods must be
// called only from a task running on it; race-enabled builds panic when
// they are not.
//
// Panics: a task's panic is recovered and the worker lives on. The panic
// goes to the WithPanicHandler handler; without one, the process fails
// as it would for an unrecovered panic in a goroutine. Nothing is
// swallowed.
//
// Shutdown: Close stops intake, runs everything queued and everything
// those tasks spawn, and joins the workers, whose threads exit with them.
// Shutdown(ctx) gives up at ctx's deadline and reports how many queued
// tasks it dropped.
package pool
