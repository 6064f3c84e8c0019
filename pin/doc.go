// Package pin places the calling OS thread and its memory: it locks a
// goroutine to its thread and sets the thread's CPU affinity, maps
// OpenMP's binding vocabulary (threads, cores, ll_caches, numa_domains,
// none; and goroutines, a worker not locked to a thread) onto a
// topology, sets memory policies, allocates node-local memory and reports
// which NUMA node a page lives on.
//
// Pinning changes only the calling thread: every other thread of the
// process keeps its mask. A thread whose mask was changed is never handed
// back to the Go runtime unlocked: Restore unlocks it only after its
// original mask is back, and a goroutine that exits while locked takes its
// thread with it (runtime.LockOSThread).
//
// The placement calls are Linux system calls. On other systems they
// return ErrUnsupported and the package still builds.
package pin
