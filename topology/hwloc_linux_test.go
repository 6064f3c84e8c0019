package topology

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The differential test: hwloc 2.9 (Debian's hwloc package) and numapool
// read the same trees, every fixture as captured and mutated the ways odd
// kernels and broken captures are (empty, garbage, NUL-cut, huge, negative
// and reversed values, missing files and directories, symbolic links out
// of the tree and in loops, a kernel without cpu/online, possible and
// present), and must agree on the online CPUs, the nodes and their CPUs,
// packages, cores, distances and the allowed CPUs and nodes, except for
// the differences listed in hwlocKnownDifferences with their reasons.
//
// CPU kinds are compared with lstopo-no-graphics --cpukinds on the same
// tree: each kind's efficiency rank, CPUs and attributes, in hwloc's
// order. The captures carry no cpufreq files (only the Kunpeng 920 has
// cpu_capacity, 1024 everywhere), so the kinds mutations write them in the
// shapes real machines have.
//
// It needs lstopo-no-graphics; without it the test is skipped, unless
// NUMAPOOL_REQUIRE_HWLOC=1 (CI), when it fails.

// hwlocKnownDifferences lists where numapool deliberately reads a tree
// differently from hwloc 2.9, keyed by "fixture/mutation/field" (fixture
// may be "*"), with the reason.
var hwlocKnownDifferences = map[string]string{
	// hwloc's cpulist parser (hwloc__read_path_as_cpulist) reads an empty
	// list as CPU 0, garbage as whatever strtoul makes of it, and "5-2" as
	// no CPU at all; numapool treats such a cpu/online as unusable and lets
	// each CPU's own online file decide, as for a kernel without one.
	"*/cpu-online-empty/*":    "hwloc reads an empty cpu/online as CPU 0 alone",
	"*/cpu-online-garbage/*":  "hwloc reads garbage in cpu/online as CPU 0 alone",
	"*/cpu-online-reversed/*": "hwloc reads the range 5-2 in cpu/online as no CPU and fails to load",
	"*/cpu-online-huge/*":     "hwloc reads 2 MB of junk in cpu/online as CPU 0 alone; numapool refuses the oversized file",
	// Without cpu/online, hwloc 2.9 looks for the topology files through
	// cpu0 and, when cpu0 is offline, through the first CPU of cpu/online:
	// with neither it gives up ("failed to find sysfs cpu topology
	// directory"); numapool reads each CPU's online file.
	"offline-cpu0-node0/old-kernel/hwloc":           "hwloc fails to load without cpu/online when cpu0 is offline",
	"offline-cpu0-node0/cpu-own-online-empty/hwloc": "hwloc fails to load without cpu/online when cpu0 is offline",
	"offline-cpu0-node0/symlink-abs-in/hwloc":       "hwloc looks for the link's target on the host, finds no cpu/online, and fails as without one",
	// Links: hwloc opens files with openat() from the fsroot's directory,
	// so an absolute link leads to the host's file; numapool resolves
	// every link inside the capture.
	"*/symlink-out/*": "hwloc follows an absolute link out of the capture to the host's file (here: CPU 0 alone)",
	// Numbers: hwloc's atoi and strtoul read what they can.
	"*/core_id-garbage/cores":        "hwloc's atoi reads a non-numeric core_id as 0; numapool leaves it unknown",
	"*/core_id-blank/cores":          "hwloc's atoi reads a core_id of white space as 0; numapool leaves it unknown",
	"*/core_id-negative/cores":       "hwloc keeps a negative core_id as a huge unsigned number; numapool leaves it unknown",
	"*/package_id-negative/packages": "hwloc keeps a negative physical_package_id other than -1 as a huge unsigned number; numapool leaves it unknown",
	"*/package_id-negative/cores":    "a core is numbered by its package; see packages",
	// A sibling mask that lists no CPU: hwloc puts the CPU in no core (and
	// when it is the first of its package, the package is lost too, and
	// the cores in it lose their package); numapool makes the CPU a core
	// of its own, since a CPU always shares its own core.
	"*/siblings-empty/cores":    "hwloc puts a CPU whose sibling mask is empty in no core; numapool makes it its own core",
	"*/siblings-empty/packages": "hwloc then skips the CPU's package when the CPU is its first",
	// Distances: numapool keeps no matrix it cannot take as written.
	"*/distance-negative/distances": "hwloc's strtoul takes -1 for 4294967295; numapool drops a matrix with a negative entry",
	"*/distance-huge/distances":     "hwloc's strtoul saturates an entry beyond 32 bits; numapool drops a matrix it cannot hold",
	"*/distance-long/distances":     "hwloc takes the first entries of a longer row; numapool drops a matrix whose rows have the wrong length",
	// Memory-only nodes' locality is guessed from the matrix (SCHEMA.md
	// 3.2): without one, numapool has no guess.
	"64intel64-fakeKNL-SNC4-hybrid/distance-negative/nodes": "memory-only nodes' locality comes from the matrix numapool dropped",
	"64intel64-fakeKNL-SNC4-hybrid/distance-huge/nodes":     "memory-only nodes' locality comes from the matrix numapool dropped",
	"64intel64-fakeKNL-SNC4-hybrid/distance-long/nodes":     "memory-only nodes' locality comes from the matrix numapool dropped",
	"64intel64-fakeKNL-SNC4-hybrid/node-cpumap-missing/nodes": "without node 1, memory-only node 4 has no unique nearest node: " +
		"hwloc attaches it to the whole machine, numapool makes no guess",
	// Node lists: hwloc's parsers read an empty node/online as node 0 and a
	// garbage cpumap as no CPU (a memory-only node); numapool lists the
	// nodeN directories, and reads cpulist instead of a garbage cpumap
	// (without one, it leaves the node out).
	"*/node-online-empty/*":   "hwloc reads an empty node/online as node 0 alone; numapool lists the nodeN directories",
	"*/node-cpumap-garbage/*": "hwloc reads a garbage cpumap as a node without CPUs; numapool reads cpulist or leaves the node out",
	// A cgroup mems file that names no node that remains: hwloc leaves no
	// node allowed, numapool ignores the file with a note.
	"16amd64-8n2c-cpusets/node-dir-missing/allowed_nodes":   "the cpuset's mems (1-4) name no remaining node: hwloc allows none, numapool ignores the file",
	"16amd64-8n2c-cpusets/node-dir-loop/allowed_nodes":      "the cpuset's mems (1-4) name no remaining node: hwloc allows none, numapool ignores the file",
	"16amd64-8n2c-cpusets/node-online-nulcut/allowed_nodes": "the cpuset's mems (1-4) name no remaining node: hwloc allows none, numapool ignores the file",
	"offline-cpu0-node0/node-dir-missing/allowed_nodes":     "the cgroup's mems (1) name no remaining node: hwloc allows none, numapool ignores the file",
	"offline-cpu0-node0/node-dir-loop/allowed_nodes":        "the cgroup's mems (1) name no remaining node: hwloc allows none, numapool ignores the file",
	// cgroup cpus files: hwloc reads an empty or garbage list as CPU 0.
	"*/cgroup-cpus-empty/allowed":   "hwloc reads an empty cgroup cpus file as CPU 0 alone; numapool ignores it with a note",
	"*/cgroup-cpus-garbage/allowed": "hwloc reads garbage in the cgroup cpus file as CPU 0 alone; numapool ignores it with a note",
	// CPU kinds: hwloc's strtoul reads a cpu_capacity without a number as
	// 0, numapool leaves the CPU's capacity unknown, with a note.
	"128arm-2pa2n8cluster4co/kinds-capacity-garbage/kinds": "hwloc reads a cpu_capacity of \"big\" as 0, a kind of its own; numapool ignores the file with a note",
	// On the machine itself numapool reads the cpu_core and
	// cpu_atom PMU lists, which hwloc 2.9's Linux backend does not read
	// (its x86 backend takes the same core types from CPUID on each CPU).
	"20em64t-hybrid-1p6c2t+2ca4co1t/kinds-hybrid-pmu-live/kinds": "on this machine numapool adds CoreType from the cpu_core/cpu_atom PMU lists, " +
		"which hwloc 2.9 reads from CPUID in its x86 backend, not from sysfs",
}

// hwlocMutation changes a fixture tree in place; undo restores it.
type hwlocMutation struct {
	name  string
	apply func(tr *hwlocTree) bool // false: does not apply to this fixture
}

// hwlocTree is an unpacked fixture being mutated.
type hwlocTree struct {
	t       *testing.T
	root    string
	scratch string // outside root
	base    *Topology
	undo    []func()
}

func (tr *hwlocTree) path(p string) string { return filepath.Join(tr.root, filepath.FromSlash(p)) }

func (tr *hwlocTree) exists(p string) bool {
	_, err := os.Lstat(tr.path(p))
	return err == nil
}

func (tr *hwlocTree) read(p string) string {
	b, _ := os.ReadFile(tr.path(p))
	return string(b)
}

// move puts p aside (outside the tree) until undo.
func (tr *hwlocTree) move(p string) {
	full := tr.path(p)
	if _, err := os.Lstat(full); err != nil {
		return
	}
	aside, err := os.MkdirTemp(tr.scratch, "aside")
	if err != nil {
		tr.t.Fatal(err)
	}
	aside = filepath.Join(aside, "x")
	if err := os.Rename(full, aside); err != nil {
		tr.t.Fatal(err)
	}
	tr.undo = append(tr.undo, func() {
		if err := os.RemoveAll(full); err != nil {
			tr.t.Fatal(err)
		}
		if err := os.Rename(aside, full); err != nil {
			tr.t.Fatal(err)
		}
	})
}

// remember arranges for undo to remove a path that did not exist.
func (tr *hwlocTree) remember(p string) {
	full := tr.path(p)
	if _, err := os.Lstat(full); err == nil {
		tr.move(p)
		return
	}
	tr.undo = append(tr.undo, func() { os.RemoveAll(full) })
}

func (tr *hwlocTree) write(p, data string) {
	tr.remember(p)
	if err := os.MkdirAll(filepath.Dir(tr.path(p)), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(tr.path(p), []byte(data), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *hwlocTree) symlink(p, target string) {
	tr.remember(p)
	if err := os.Symlink(target, tr.path(p)); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *hwlocTree) mkdir(p string) {
	tr.remember(p)
	if err := os.MkdirAll(tr.path(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *hwlocTree) restore() {
	for i := len(tr.undo) - 1; i >= 0; i-- {
		tr.undo[i]()
	}
	tr.undo = nil
}

// cpu returns an online CPU with a topology directory: the second if there
// are two, so that it is not the first of its core or package.
func (tr *hwlocTree) cpu() (int, bool) {
	var with []int
	for _, c := range tr.base.CPUs {
		if tr.exists(fmt.Sprintf("%s/cpu%d/topology/core_id", cpuDir, c.ID)) {
			with = append(with, c.ID)
		}
	}
	if len(with) == 0 {
		return 0, false
	}
	return with[min(1, len(with)-1)], true
}

// node returns the node whose files the node mutations change: the
// second, with CPUs if possible.
func (tr *hwlocTree) node() (int, bool) {
	if !tr.base.HasNodeDir || len(tr.base.Nodes) < 2 {
		return 0, false
	}
	return tr.base.Nodes[1].ID, true
}

func (tr *hwlocTree) cpuFile(name string, data string) bool {
	c, ok := tr.cpu()
	p := fmt.Sprintf("%s/cpu%d/topology/%s", cpuDir, c, name)
	if !ok || !tr.exists(p) {
		return false
	}
	tr.write(p, data)
	return true
}

func (tr *hwlocTree) nodeFile(name string, edit func(old string) string) bool {
	n, ok := tr.node()
	p := fmt.Sprintf("%s/node%d/%s", nodeDir, n, name)
	if !ok || !tr.exists(p) {
		return false
	}
	tr.write(p, edit(tr.read(p)))
	return true
}

// cgroupCPUs returns the cgroup cpus file numapool reads in the tree.
func (tr *hwlocTree) cgroupCPUs() (string, bool) {
	r := &reader{fsys: os.DirFS(tr.root), inRoot: true}
	cs := r.cgroupCpuset()
	if cs.cpusFile == "" || !tr.exists(cs.cpusFile) {
		return "", false
	}
	return cs.cpusFile, true
}

func (tr *hwlocTree) cgroupFile(data string) bool {
	p, ok := tr.cgroupCPUs()
	if ok {
		tr.write(p, data)
	}
	return ok
}

// nulCut inserts a NUL after the first byte of a value: "0-3" becomes
// "0\x00-3", which both readers must take as "0".
func nulCut(s string) string {
	if s == "" {
		return "\x00"
	}
	return s[:1] + "\x00" + s[1:]
}

var hwlocMutations = []hwlocMutation{
	{"captured", func(tr *hwlocTree) bool { return true }},
	{"cpu-online-empty", func(tr *hwlocTree) bool { tr.write(cpuDir+"/online", ""); return true }},
	{"cpu-online-garbage", func(tr *hwlocTree) bool { tr.write(cpuDir+"/online", "zz\n"); return true }},
	{"cpu-online-reversed", func(tr *hwlocTree) bool { tr.write(cpuDir+"/online", "5-2\n"); return true }},
	{"cpu-online-nulcut", func(tr *hwlocTree) bool {
		if !tr.exists(cpuDir + "/online") {
			return false
		}
		tr.write(cpuDir+"/online", nulCut(tr.read(cpuDir+"/online")))
		return true
	}},
	{"cpu-online-huge", func(tr *hwlocTree) bool {
		tr.write(cpuDir+"/online", strings.Repeat("junk ", 400<<10))
		return true
	}},
	{"old-kernel", func(tr *hwlocTree) bool {
		tr.move(cpuDir + "/online")
		tr.move(cpuDir + "/possible")
		tr.move(cpuDir + "/present")
		return true
	}},
	{"cpu-own-online-empty", func(tr *hwlocTree) bool {
		c, ok := tr.cpu()
		if !ok {
			return false
		}
		tr.move(cpuDir + "/online")
		tr.write(fmt.Sprintf("%s/cpu%d/online", cpuDir, c), "")
		return true
	}},
	{"core_id-empty", func(tr *hwlocTree) bool { return tr.cpuFile("core_id", "") }},
	{"core_id-blank", func(tr *hwlocTree) bool { return tr.cpuFile("core_id", " \n") }},
	{"core_id-garbage", func(tr *hwlocTree) bool { return tr.cpuFile("core_id", "seven\n") }},
	{"core_id-negative", func(tr *hwlocTree) bool { return tr.cpuFile("core_id", "-5\n") }},
	{"package_id-empty", func(tr *hwlocTree) bool { return tr.cpuFile("physical_package_id", "") }},
	{"package_id-negative", func(tr *hwlocTree) bool { return tr.cpuFile("physical_package_id", "-7\n") }},
	{"siblings-empty", func(tr *hwlocTree) bool {
		a := tr.cpuFile("thread_siblings", "00000000\n")
		b := tr.cpuFile("core_cpus", "00000000\n")
		return a || b
	}},
	{"distance-empty", func(tr *hwlocTree) bool { return tr.nodeFile("distance", func(string) string { return "" }) }},
	{"distance-garbage", func(tr *hwlocTree) bool {
		return tr.nodeFile("distance", func(old string) string { return "x " + old })
	}},
	{"distance-negative", func(tr *hwlocTree) bool {
		return tr.nodeFile("distance", func(old string) string {
			f := strings.Fields(clean([]byte(old)))
			f[len(f)-1] = "-1"
			return strings.Join(f, " ") + "\n"
		})
	}},
	{"distance-huge", func(tr *hwlocTree) bool {
		return tr.nodeFile("distance", func(old string) string {
			f := strings.Fields(clean([]byte(old)))
			f[len(f)-1] = "99999999999999999999"
			return strings.Join(f, " ") + "\n"
		})
	}},
	{"distance-short", func(tr *hwlocTree) bool {
		return tr.nodeFile("distance", func(old string) string { return strings.Fields(clean([]byte(old)))[0] + "\n" })
	}},
	{"distance-long", func(tr *hwlocTree) bool {
		return tr.nodeFile("distance", func(old string) string { return clean([]byte(old)) + " 10\n" })
	}},
	{"node-online-empty", func(tr *hwlocTree) bool {
		if !tr.exists(nodeDir + "/online") {
			return false
		}
		tr.write(nodeDir+"/online", "\n")
		return true
	}},
	{"node-online-nulcut", func(tr *hwlocTree) bool {
		if !tr.exists(nodeDir + "/online") {
			return false
		}
		tr.write(nodeDir+"/online", nulCut(tr.read(nodeDir+"/online")))
		return true
	}},
	{"node-dir-missing", func(tr *hwlocTree) bool { tr.move(nodeDir); return tr.base.HasNodeDir }},
	{"node-dir-loop", func(tr *hwlocTree) bool {
		tr.move(nodeDir)
		tr.symlink(nodeDir, "node")
		return true
	}},
	{"node-cpumap-garbage", func(tr *hwlocTree) bool {
		return tr.nodeFile("cpumap", func(string) string { return "zz\n" })
	}},
	{"node-cpumap-missing", func(tr *hwlocTree) bool {
		n, ok := tr.node()
		if !ok {
			return false
		}
		tr.move(fmt.Sprintf("%s/node%d/cpumap", nodeDir, n))
		tr.move(fmt.Sprintf("%s/node%d/cpulist", nodeDir, n))
		return true
	}},
	{"cgroup-cpus-empty", func(tr *hwlocTree) bool { return tr.cgroupFile("\n") }},
	{"cgroup-cpus-garbage", func(tr *hwlocTree) bool { return tr.cgroupFile("zz\n") }},
	{"cgroup-cpus-nulcut", func(tr *hwlocTree) bool {
		p, ok := tr.cgroupCPUs()
		if ok {
			tr.write(p, nulCut(tr.read(p)))
		}
		return ok
	}},
	{"cgroup-cpus-dir", func(tr *hwlocTree) bool {
		p, ok := tr.cgroupCPUs()
		if ok {
			tr.move(p)
			tr.mkdir(p)
		}
		return ok
	}},
	{"symlink-out", func(tr *hwlocTree) bool {
		outside := filepath.Join(tr.scratch, "host-online")
		if err := os.WriteFile(outside, []byte("0\n"), 0o644); err != nil {
			tr.t.Fatal(err)
		}
		tr.symlink(cpuDir+"/online", outside)
		return true
	}},
	{"symlink-abs-in", func(tr *hwlocTree) bool {
		if !tr.exists(cpuDir + "/online") {
			return false
		}
		tr.write(cpuDir+"/online.captured", tr.read(cpuDir+"/online"))
		tr.symlink(cpuDir+"/online", "/"+cpuDir+"/online.captured")
		return true
	}},
	{"symlink-relative", func(tr *hwlocTree) bool {
		if !tr.exists(cpuDir + "/online") {
			return false
		}
		tr.write("captured/online", tr.read(cpuDir+"/online"))
		tr.symlink(cpuDir+"/online", "../../../../captured/online")
		return true
	}},
	// The Core i7-1370P as hwloc's own capture of it has its frequencies:
	// P-cores (CPUs 0-11) at base 1.9 GHz and maximum 5 GHz, two favoured
	// cores (CPUs 4-5, 8-9) at 5.2 GHz, E-cores (12-19) at 1.4 and 3.9 GHz;
	// cpuN/cpufreq is a link to cpufreq/policyN, as intel_pstate makes it.
	{"kinds-hybrid-freq", func(tr *hwlocTree) bool {
		return tr.hybrid(func(c int, p bool) {
			maxKHz, baseKHz := "3900000", "1400000"
			if p {
				maxKHz, baseKHz = "5000000", "1900000"
				if c == 4 || c == 5 || c == 8 || c == 9 {
					maxKHz = "5200000"
				}
			}
			policy := fmt.Sprintf("%s/cpufreq/policy%d", cpuDir, c)
			tr.write(policy+"/cpuinfo_max_freq", maxKHz+"\n")
			tr.write(policy+"/base_frequency", baseKHz+"\n")
			tr.symlink(fmt.Sprintf("%s/cpu%d/cpufreq", cpuDir, c), fmt.Sprintf("../cpufreq/policy%d", c))
		})
	}},
	// The same machine as the kernel describes a hybrid part by capacity.
	{"kinds-hybrid-capacity", func(tr *hwlocTree) bool {
		return tr.hybrid(func(c int, p bool) {
			tr.write(fmt.Sprintf("%s/cpu%d/cpu_capacity", cpuDir, c), map[bool]string{true: "1024\n", false: "623\n"}[p])
		})
	}},
	// Both sources: cpu_capacity orders the kinds.
	{"kinds-hybrid-both", func(tr *hwlocTree) bool {
		return tr.hybrid(func(c int, p bool) {
			maxKHz, baseKHz, capacity := "3900000\n", "1400000\n", "623\n"
			if p {
				maxKHz, baseKHz, capacity = "5000000\n", "1900000\n", "1024\n"
			}
			tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/cpuinfo_max_freq", cpuDir, c), maxKHz)
			tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/base_frequency", cpuDir, c), baseKHz)
			tr.write(fmt.Sprintf("%s/cpu%d/cpu_capacity", cpuDir, c), capacity)
		})
	}},
	// P- and E-cores at the same base frequency: the kinds are two (their
	// maxima differ by 28 %), but nothing orders them.
	{"kinds-hybrid-unranked", func(tr *hwlocTree) bool {
		return tr.hybrid(func(c int, p bool) {
			tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/cpuinfo_max_freq", cpuDir, c), map[bool]string{true: "5000000\n", false: "3900000\n"}[p])
			tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/base_frequency", cpuDir, c), "1900000\n")
		})
	}},
	// Intel's hybrid PMU lists beside the frequencies: a capture's are
	// not read, as hwloc 2.9's Linux backend does not read them ...
	{"kinds-hybrid-pmu", func(tr *hwlocTree) bool { return tr.hybridPMU() }},
	// ... but numapool reads them on the machine itself (where hwloc 2.9
	// takes the same core types from CPUID in its x86 backend).
	{"kinds-hybrid-pmu-live", func(tr *hwlocTree) bool { return tr.hybridPMU() }},
	// Kunpeng 920 made big.LITTLE: in each cluster of 4 cores, two big
	// (1024) and two little (446).
	{"kinds-biglittle", func(tr *hwlocTree) bool {
		if !strings.HasPrefix(filepath.Base(tr.root), "128arm-2pa2n8cluster4co") {
			return false
		}
		for _, c := range tr.base.CPUs {
			tr.write(fmt.Sprintf("%s/cpu%d/cpu_capacity", cpuDir, c.ID), map[bool]string{true: "1024\n", false: "446\n"}[c.ID%4 < 2])
		}
		return true
	}},
	// Odd cpu_capacity files on the Kunpeng 920: an empty one is no value
	// for both readers; one that holds no number hwloc's strtoul reads as
	// 0, a kind of its own.
	{"kinds-capacity-empty", func(tr *hwlocTree) bool { return tr.kunpengCapacity("") }},
	{"kinds-capacity-garbage", func(tr *hwlocTree) bool { return tr.kunpengCapacity("big\n") }},
	// Every machine as a server of one kind of core whose favoured cores
	// (every eighth CPU) reach 3.9 GHz instead of 3.7: hwloc makes no kind
	// of them, and neither may numapool.
	{"kinds-favoured-cores", func(tr *hwlocTree) bool {
		for _, c := range tr.base.CPUs {
			maxKHz := map[bool]string{true: "3900000\n", false: "3700000\n"}[c.ID%8 == 3]
			tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/cpuinfo_max_freq", cpuDir, c.ID), maxKHz)
			tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/base_frequency", cpuDir, c.ID), "2100000\n")
		}
		return true
	}},
	// The same maxima without base_frequency (acpi-cpufreq, AMD): hwloc
	// then keeps every maximum as it is, and the favoured cores are a kind.
	{"kinds-max-only", func(tr *hwlocTree) bool {
		for _, c := range tr.base.CPUs {
			maxKHz := map[bool]string{true: "3900000\n", false: "3700000\n"}[c.ID%8 == 3]
			tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/cpuinfo_max_freq", cpuDir, c.ID), maxKHz)
		}
		return true
	}},
}

// kunpengCapacity writes the cpu_capacity of the Kunpeng 920 capture's
// CPU 1; false for other fixtures.
func (tr *hwlocTree) kunpengCapacity(data string) bool {
	p := cpuDir + "/cpu1/cpu_capacity"
	if !strings.HasPrefix(filepath.Base(tr.root), "128arm-2pa2n8cluster4co") || !tr.exists(p) {
		return false
	}
	tr.write(p, data)
	return true
}

// hybridPMU gives the Core i7-1370P its frequencies and the kernel's
// cpu_core and cpu_atom PMU CPU lists.
func (tr *hwlocTree) hybridPMU() bool {
	ok := tr.hybrid(func(c int, p bool) {
		maxKHz, baseKHz := map[bool]string{true: "5000000\n", false: "3900000\n"}[p], map[bool]string{true: "1900000\n", false: "1400000\n"}[p]
		tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/cpuinfo_max_freq", cpuDir, c), maxKHz)
		tr.write(fmt.Sprintf("%s/cpu%d/cpufreq/base_frequency", cpuDir, c), baseKHz)
	})
	if ok {
		tr.write("sys/devices/cpu_core/cpus", "0-11\n")
		tr.write("sys/devices/cpu_atom/cpus", "12-19\n")
	}
	return ok
}

// hybrid calls each for every online CPU of the Core i7-1370P capture,
// saying whether it is a P-core's (CPUs 0-11, two threads a core) or an
// E-core's; false for other fixtures.
func (tr *hwlocTree) hybrid(each func(cpu int, performance bool)) bool {
	if !strings.HasPrefix(filepath.Base(tr.root), "20em64t-hybrid-1p6c2t+2ca4co1t") {
		return false
	}
	for _, c := range tr.base.CPUs {
		each(c.ID, c.Siblings.Len() == 2)
	}
	return true
}

// hwlocView is what the differential test compares, as strings.
type hwlocView map[string]string

func TestHwlocDifferential(t *testing.T) {
	lstopo, err := exec.LookPath("lstopo-no-graphics")
	if err != nil {
		if os.Getenv("NUMAPOOL_REQUIRE_HWLOC") == "1" {
			t.Fatalf("NUMAPOOL_REQUIRE_HWLOC=1 but lstopo-no-graphics is not installed (apt-get install hwloc): %v", err)
		}
		t.Skip("lstopo-no-graphics not installed (Debian: apt-get install hwloc); set NUMAPOOL_REQUIRE_HWLOC=1 to fail instead")
	}
	tarCmd, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("tar not installed")
	}
	seen := make(map[string]bool) // known differences that occurred
	results := make(chan map[string]bool, 64)
	t.Run("fixtures", func(t *testing.T) {
		for _, archive := range fixtureArchives(t) {
			name := strings.TrimSuffix(filepath.Base(archive), ".tar.gz")
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				results <- hwlocFixture(t, lstopo, tarCmd, archive, name)
			})
		}
	})
	close(results)
	for r := range results {
		maps.Copy(seen, r)
	}
	if t.Failed() {
		return
	}
	for key := range hwlocKnownDifferences {
		if !seen[key] {
			t.Errorf("known difference %s no longer occurs: remove it from hwlocKnownDifferences", key)
		}
	}
}

// hwlocFixture runs every mutation on one fixture and returns the known
// differences that occurred.
func hwlocFixture(t *testing.T, lstopo, tarCmd, archive, name string) map[string]bool {
	seen := make(map[string]bool)
	dir := t.TempDir()
	abs, err := filepath.Abs(archive)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tarCmd, "-xzf", abs, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	root := filepath.Join(dir, name)
	var meta struct {
		Source struct {
			ExtraEnv map[string]string `json:"extra_env"`
		} `json:"source"`
	}
	b, err := os.ReadFile(filepath.Join(root, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	base, err := FromDir(root)
	if err != nil {
		t.Fatalf("captured tree: %v", err)
	}
	tr := &hwlocTree{t: t, root: root, scratch: t.TempDir(), base: base}
	for _, m := range hwlocMutations {
		applies := m.apply(tr)
		if !applies {
			tr.restore()
			continue
		}
		hw := runHwloc(lstopo, root, meta.Source.ExtraEnv)
		np := numapoolView(root, strings.HasSuffix(m.name, "-live"))
		tr.restore()
		fields := slices.Sorted(maps.Keys(hw))
		switch {
		case hw["hwloc"] != "":
			fields = []string{"hwloc"} // hwloc failed: that is the difference
		case np["error"] != "":
			fields = []string{"error"}
		}
		for _, field := range fields {
			if hw[field] == np[field] {
				continue
			}
			if key, ok := hwlocKnown(name, m.name, field); ok {
				seen[key] = true
				continue
			}
			t.Errorf("%s/%s/%s: %s", name, m.name, field, describeDiff(hw[field], np[field]))
		}
	}
	return seen
}

// describeDiff shows what only hwloc and only numapool have, shortened.
func describeDiff(hw, np string) string {
	if strings.HasPrefix(hw, "{") || strings.HasPrefix(np, "{") {
		return fmt.Sprintf("hwloc %.200s, numapool %.200s", hw, np)
	}
	a, b := strings.Fields(hw), strings.Fields(np)
	onlyA := slices.DeleteFunc(slices.Clone(a), func(s string) bool { return slices.Contains(b, s) })
	onlyB := slices.DeleteFunc(slices.Clone(b), func(s string) bool { return slices.Contains(a, s) })
	return fmt.Sprintf("hwloc only [%.300s], numapool only [%.300s]", strings.Join(onlyA, " "), strings.Join(onlyB, " "))
}

func hwlocKnown(fixture, mutation, field string) (string, bool) {
	for _, key := range []string{
		fixture + "/" + mutation + "/" + field, "*/" + mutation + "/" + field,
		fixture + "/" + mutation + "/*", "*/" + mutation + "/*",
	} {
		if _, ok := hwlocKnownDifferences[key]; ok {
			return key, true
		}
	}
	return "", false
}

// numapoolView reads root with FromDir, or if live as numapool reads
// this machine's root.
func numapoolView(root string, live bool) hwlocView {
	t, err := FromDir(root)
	if live {
		t, err = fromFS(os.DirFS(root), "", true, false)
	}
	if err != nil {
		return hwlocView{"error": err.Error()}
	}
	v := hwlocView{
		"online":        t.Online.String(),
		"allowed":       t.Allowed.String(),
		"allowed_nodes": t.AllowedMems.String(),
	}
	var nodes, pkgs, cores []string
	for _, n := range t.Nodes {
		// hwloc gives a memory-only node the CPUs near it, as Locality.
		nodes = append(nodes, fmt.Sprintf("%d:%s", n.ID, n.Locality))
	}
	for _, p := range t.Packages {
		pkgs = append(pkgs, fmt.Sprintf("%d:%s", p.ID, p.CPUs))
	}
	for _, c := range t.Cores {
		cores = append(cores, fmt.Sprintf("%d:%d:%s", c.Package, c.ID, c.CPUs))
	}
	v["nodes"] = joinSorted(nodes)
	v["packages"] = joinSorted(pkgs)
	v["cores"] = joinSorted(cores)
	v["distances"] = distancesString(t.Distances)
	var kinds []string
	for _, k := range t.Kinds {
		var infos []string
		for _, info := range []struct {
			name  string
			value int
		}{{"FrequencyMaxMHz", k.MaxMHz}, {"FrequencyBaseMHz", k.BaseMHz}, {"LinuxCapacity", k.LinuxCapacity}} {
			if info.value > 0 {
				infos = append(infos, fmt.Sprintf("%s=%d", info.name, info.value))
			}
		}
		if k.CoreType != "" {
			infos = append(infos, "CoreType="+k.CoreType)
		}
		kinds = append(kinds, hwlocKind(k.Rank, k.CPUs, infos))
	}
	v["kinds"] = kindsString(kinds)
	return v
}

// hwlocKind is one kind as both views show it: rank, CPUs and attributes.
func hwlocKind(rank int, cpus CPUSet, infos []string) string {
	slices.Sort(infos)
	return fmt.Sprintf("%d:%s:%s", rank, cpus, strings.Join(infos, ","))
}

func kindsString(kinds []string) string {
	if len(kinds) == 0 {
		return "none"
	}
	return strings.Join(kinds, " ") // in hwloc's order, which is part of what is compared
}

func joinSorted(s []string) string {
	slices.Sort(s)
	return strings.Join(s, " ")
}

func distancesString(d *Distances) string {
	if d == nil {
		return "none"
	}
	b, _ := json.Marshal(d)
	return string(b)
}

// hwlocObject is an object of hwloc's XML export.
type hwlocObject struct {
	Type       string        `xml:"type,attr"`
	OSIndex    string        `xml:"os_index,attr"`
	CPUSet     string        `xml:"cpuset,attr"`
	Allowed    string        `xml:"allowed_cpuset,attr"`
	AllowedMem string        `xml:"allowed_nodeset,attr"`
	Children   []hwlocObject `xml:"object"`
}

type hwlocXML struct {
	Root      hwlocObject `xml:"object"`
	Distances []struct {
		Name    string   `xml:"name,attr"`
		N       int      `xml:"nbobjs,attr"`
		Indexes []string `xml:"indexes"`
		Values  []string `xml:"u64values"`
	} `xml:"distances2"`
}

// runHwloc reads root with hwloc as the fixtures' expected.json was made:
// only the Linux backend, the tree as its root (so that hwloc takes the
// tree's cgroup, not this process's binding), disallowed CPUs kept.
func runHwloc(lstopo, root string, extra map[string]string) hwlocView {
	out, err := runLstopo(lstopo, root, extra, "--of", "xml", "--disallowed", "-")
	if err != nil {
		return hwlocView{"hwloc": err.Error()}
	}
	kinds, err := runLstopo(lstopo, root, extra, "--cpukinds", "--disallowed", "--input", root)
	if err != nil {
		return hwlocView{"hwloc": err.Error()}
	}
	var x hwlocXML
	if err := xml.Unmarshal(out, &x); err != nil {
		return hwlocView{"hwloc": "unreadable XML: " + err.Error()}
	}
	online := hwlocSet(x.Root.CPUSet)
	var nodeIDs CPUSet
	var nodes, pkgs, cores []string
	var walk func(o hwlocObject, pkg string)
	walk = func(o hwlocObject, pkg string) {
		id := o.OSIndex
		if id == "" {
			id = "-1"
		}
		switch o.Type {
		case "NUMANode":
			n, _ := strconv.Atoi(id)
			nodeIDs.Add(n)
			nodes = append(nodes, fmt.Sprintf("%s:%s", id, hwlocSet(o.CPUSet).And(online)))
		case "Package":
			pkg = id
			pkgs = append(pkgs, fmt.Sprintf("%s:%s", id, hwlocSet(o.CPUSet)))
		case "Core":
			cores = append(cores, fmt.Sprintf("%s:%s:%s", pkg, id, hwlocSet(o.CPUSet)))
		}
		for _, c := range o.Children {
			walk(c, pkg)
		}
	}
	walk(x.Root, "-1")
	v := hwlocView{
		"online":        online.String(),
		"allowed":       hwlocSet(x.Root.Allowed).And(online).String(),
		"allowed_nodes": hwlocSet(x.Root.AllowedMem).And(nodeIDs).String(),
		"nodes":         joinSorted(nodes),
		"packages":      joinSorted(pkgs),
		"cores":         joinSorted(cores),
		"distances":     "none",
		"kinds":         parseCPUKinds(kinds),
	}
	for _, d := range x.Distances {
		if d.Name != "NUMALatency" {
			continue
		}
		dist := &Distances{}
		for _, f := range strings.Fields(strings.Join(d.Indexes, " ")) {
			n, _ := strconv.Atoi(f)
			dist.Nodes = append(dist.Nodes, n)
		}
		var vals []int
		for _, line := range d.Values {
			for _, f := range strings.Fields(line) {
				n, _ := strconv.Atoi(f)
				vals = append(vals, n)
			}
		}
		for i := range d.N {
			dist.Matrix = append(dist.Matrix, vals[i*d.N:(i+1)*d.N])
		}
		v["distances"] = distancesString(dist)
	}
	return v
}

// runLstopo runs lstopo-no-graphics on root with args, with only the
// Linux backend and the environment of extra.
func runLstopo(lstopo, root string, extra map[string]string, args ...string) ([]byte, error) {
	cmd := exec.Command(lstopo, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HWLOC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HWLOC_COMPONENTS=linux,stop", "HWLOC_FSROOT="+root, "HWLOC_DUMPED_HWDATA_DIR=/nonexistent")
	for k, v := range extra {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("failed: %v: %s", err, shorten(strings.TrimSpace(stderr.String())))
	}
	return out, nil
}

// parseCPUKinds reads lstopo --cpukinds:
//
//	CPU kind #0 efficiency 0 cpuset 0x000ff000
//	  FrequencyMaxMHz = 3900
//	  FrequencyBaseMHz = 1400
func parseCPUKinds(out []byte) string {
	var kinds []string
	rank, cpus, infos := 0, CPUSet{}, []string(nil)
	flush := func() {
		if cpus.IsEmpty() {
			return
		}
		kinds = append(kinds, hwlocKind(rank, cpus, infos))
		cpus, infos = CPUSet{}, nil
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 7 && f[0] == "CPU" && f[1] == "kind":
			flush()
			rank, _ = strconv.Atoi(f[4])
			cpus = hwlocSet(f[6])
		case len(f) == 3 && f[1] == "=":
			infos = append(infos, f[0]+"="+f[2])
		}
	}
	flush()
	return kindsString(kinds)
}

// hwlocSet parses hwloc's bitmap format: comma-separated 32-bit words,
// most significant first, each "0x" and 8 hex digits, "0xf...f" standing
// for an infinite run of ones (taken here as one word of ones).
func hwlocSet(s string) CPUSet {
	if s == "" {
		return CPUSet{}
	}
	words := strings.Split(s, ",")
	for i, w := range words {
		w = strings.TrimPrefix(w, "0x")
		switch w {
		case "f...f":
			w = "ffffffff"
		case "":
			w = "0" // hwloc writes a zero word as nothing: "0x00000008,,,0x0"
		}
		words[i] = w
	}
	set, err := ParseCPUMask([]byte(strings.Join(words, ",")))
	if err != nil {
		return CPUSet{}
	}
	return set
}
