// Package topology describes the machine as this process may use it:
// NUMA nodes with their CPUs and memory, packages, cores and SMT siblings,
// caches (the last-level cache domains that ll_caches binding uses), the
// node distance matrix, and the CPUs and memory nodes this process is
// allowed.
//
// Discover reads this machine's /sys and /proc and the affinity mask, so
// taskset, numactl, cgroup cpusets and batch systems' binding are
// honoured; where that is impossible it falls back to one node of
// runtime.NumCPU CPUs and says why in Topology.Degraded. FromDir and
// FromFS read a captured tree instead; Synthetic builds a several-node
// topology mapped onto the real CPUs, so that multi-node behaviour can run
// on a one-node machine.
//
// The reading follows hwloc's rules (testdata/fixtures/SCHEMA.md) and is
// checked against hwloc's reading of real machines' captures. Summary
// encodes a topology in the same JSON schema.
//
// Parsers of the kernel's formats (ParseCPUList, ParseCPUMask and the
// internal ones) are pure functions. Discovery reads odd machines as hwloc
// does: a file that is missing, empty, malformed or unreadable leaves what
// it describes unknown (or another file is used) and is noted in Degraded,
// naming the file and quoting the start of its value; only when nothing
// usable is left is it an error, which names the file and wraps
// ErrTopology. Files are read up to a size cap and up to their first NUL,
// and a captured tree's symbolic links are resolved inside it.
package topology
