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
//
// # CPU kinds
//
// Hybrid processors put CPUs of different power in one node: Intel's P-
// and E-cores, Arm's big and little cores. Topology.Kinds lists them as
// hwloc 2.9's Linux backend finds its cpukinds, from each online CPU's
// cpufreq/cpuinfo_max_freq, cpufreq/base_frequency and cpu_capacity:
// CPUs with the same values form one kind, except that maximum
// frequencies which differ by less than hwloc's adjustment margin
// (HWLOC_CPUKINDS_MAXFREQ's default) among CPUs of one base frequency
// count as the lowest of them (Turbo Boost Max 3.0 lets a few
// favoured cores of a server run faster; they are no kind of their own).
// The kinds are ordered least powerful first, by cpu_capacity if every
// kind has a distinct one, else by base frequency, else by maximum
// frequency; Kind.Rank is the position, or -1 for every kind when none of
// these orders them (hwloc's efficiency is then unknown too). A machine
// whose kernel describes no kind has none; fewer than two kinds means
// every CPU is alike.
//
// Kind.Name, the word a binding asks for, is numapool's: of two or more
// kinds, those whose CPUs have a Capacity within the same margin of the
// most capable CPU's are "performance" kinds and the others "efficiency"
// kinds (an IntelCore or IntelAtom core type decides where it is known).
// Kinds that all lie within the margin have no name: hwloc makes a kind of each maximum
// frequency when the kernel gives no base frequency (acpi-cpufreq), but
// favoured cores that boost a little higher are no other kind of core.
//
// CPU.Kind indexes Kinds, and CPU.Capacity is the share of work a CPU
// does in a given time, 1024 for the most capable CPU: cpu_capacity
// scaled to that when every online CPU has one, else the maximum
// frequency of the CPU's kind scaled the same way when every online CPU
// has one, else 1024 for every CPU. A loop split in proportion to
// Capacity keeps every CPU busy for the same time.
//
// On this machine (Discover, not a captured tree) the kernel's Intel
// hybrid PMU lists, devices/cpu_core/cpus and devices/cpu_atom/cpus, give
// kinds their Kind.CoreType ("IntelCore", "IntelAtom"): the core types
// hwloc 2.9 takes from CPUID in its x86 backend, and which then order
// kinds that the frequencies alone do not. hwloc 2.9's Linux backend does
// not read these lists, so a captured tree's are ignored. CPUID itself
// (Intel leaf 0x1A, AMD 0x80000026, which would need a thread pinned to
// each CPU) is not read.
//
// Synthetic hybrid specs (1x4p+4e, 1p+1e) have an "efficiency" kind of
// capacity 512 and a "performance" kind of capacity 1024.
package topology
