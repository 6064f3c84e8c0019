package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// machineFS is a machine of n CPUs (one thread per core) in two nodes and
// two packages of n/2 CPUs, each package with one L3 and each CPU with an
// L1d, a cgroup v2 cpuset allowing every CPU, and proc files.
func machineFS(n int) fstest.MapFS {
	half := n / 2
	nodeList := [2]string{fmt.Sprintf("0-%d", half-1), fmt.Sprintf("%d-%d", half, n-1)}
	f := fstest.MapFS{
		"sys/devices/system/cpu/online":           {Data: []byte(fmt.Sprintf("0-%d\n", n-1))},
		"sys/devices/system/node/online":          {Data: []byte("0-1\n")},
		"sys/devices/system/node/node0/cpulist":   {Data: []byte(nodeList[0] + "\n")},
		"sys/devices/system/node/node1/cpulist":   {Data: []byte(nodeList[1] + "\n")},
		"sys/devices/system/node/node0/meminfo":   {Data: []byte("Node 0 MemTotal:  1048576 kB\n")},
		"sys/devices/system/node/node1/meminfo":   {Data: []byte("Node 1 MemTotal:  1048576 kB\n")},
		"sys/devices/system/node/node0/distance":  {Data: []byte("10 21\n")},
		"sys/devices/system/node/node1/distance":  {Data: []byte("21 10\n")},
		"proc/meminfo":                            {Data: []byte("MemTotal:  2097152 kB\n")},
		"proc/mounts":                             {Data: []byte("proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n")},
		"proc/self/cgroup":                        {Data: []byte("0::/job\n")},
		"sys/fs/cgroup/cgroup.controllers":        {Data: []byte("cpuset cpu memory\n")},
		"sys/fs/cgroup/job/cpuset.cpus.effective": {Data: []byte(fmt.Sprintf("0-%d\n", n-1))},
		"sys/fs/cgroup/job/cpuset.mems.effective": {Data: []byte("0-1\n")},
	}
	for c := range n {
		dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/", c)
		pkg := c / half
		file := func(name, data string) { f[dir+name] = &fstest.MapFile{Data: []byte(data + "\n")} }
		file("online", "1")
		file("topology/core_id", fmt.Sprint(c%half))
		file("topology/physical_package_id", fmt.Sprint(pkg))
		file("topology/thread_siblings_list", fmt.Sprint(c))
		file("topology/core_siblings_list", nodeList[pkg])
		file("cache/index0/level", "1")
		file("cache/index0/type", "Data")
		file("cache/index0/size", "32K")
		file("cache/index0/coherency_line_size", "64")
		file("cache/index0/shared_cpu_list", fmt.Sprint(c))
		file("cache/index3/level", "3")
		file("cache/index3/type", "Unified")
		file("cache/index3/size", "16384K")
		file("cache/index3/coherency_line_size", "64")
		file("cache/index3/shared_cpu_list", nodeList[pkg])
	}
	return f
}

// noted reports whether a note of topo contains every one of parts.
func noted(topo *Topology, parts ...string) bool {
	return slices.ContainsFunc(topo.Degraded, func(s string) bool {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				return false
			}
		}
		return true
	})
}

// overlappingCaches returns a description of two caches of the same
// level and type that share CPUs without being the same cache.
func overlappingCaches(topo *Topology) string {
	for i, a := range topo.Caches {
		for _, b := range topo.Caches[i+1:] {
			if a.Level == b.Level && a.Type == b.Type && a.CPUs.Intersects(b.CPUs) {
				return fmt.Sprintf("L%d %s %s and %s", a.Level, a.Type, a.CPUs, b.CPUs)
			}
		}
	}
	return ""
}

// TestOddMachines reads trees that real kernels, old kernels or broken
// captures produce. Each case checks what hwloc 2.9 does with the same
// tree (or, where numapool deliberately differs, numapool's documented
// choice) and that the note or error names the file.
func TestOddMachines(t *testing.T) {
	const cpu = "sys/devices/system/cpu/"
	const node = "sys/devices/system/node/"
	type tc struct {
		name   string
		n      int                  // CPUs of machineFS
		change func(f fstest.MapFS) // applied to machineFS(n)
		check  func(t *testing.T, topo *Topology, err error)
	}
	set := func(f fstest.MapFS, name, data string) { f[name] = &fstest.MapFile{Data: []byte(data)} }
	ok := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("FromFS: %v", err)
		}
	}
	cases := []tc{
		{"empty per-CPU online, old kernel without cpu/online", 8, func(f fstest.MapFS) {
			delete(f, cpu+"online")
			set(f, cpu+"cpu2/online", "")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if !topo.Online.Has(2) || topo.Online.Len() != 8 {
				t.Errorf("online = %s, want 0-7 (hwloc: an empty cpuN/online is online)", topo.Online)
			}
			if !noted(topo, cpu+"cpu2/online", `""`) {
				t.Errorf("no note names cpu2/online: %q", topo.Degraded)
			}
		}},
		{"empty core_id and physical_package_id", 8, func(f fstest.MapFS) {
			set(f, cpu+"cpu5/topology/core_id", "")
			set(f, cpu+"cpu4/topology/physical_package_id", "")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			c, _ := topo.CPU(5)
			if c.Core != -1 || c.Package != -1 {
				// CPU 4 is the first of the package: its number is the
				// package's.
				t.Errorf("cpu 5 core %d package %d, want -1 -1 (unknown, as hwloc)", c.Core, c.Package)
			}
			if !noted(topo, cpu+"cpu5/topology/core_id", `""`) || !noted(topo, cpu+"cpu4/topology/physical_package_id", `""`) {
				t.Errorf("notes do not name the files: %q", topo.Degraded)
			}
		}},
		{"negative core_id", 8, func(f fstest.MapFS) {
			set(f, cpu+"cpu3/topology/core_id", "-5\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if c, _ := topo.CPU(3); c.Core != -1 {
				t.Errorf("cpu 3 core %d, want -1 (unknown)", c.Core)
			}
			if !noted(topo, cpu+"cpu3/topology/core_id", `"-5"`) {
				t.Errorf("no note on the negative core_id: %q", topo.Degraded)
			}
		}},
		{"negative coherency_line_size", 8, func(f fstest.MapFS) {
			set(f, cpu+"cpu0/cache/index0/coherency_line_size", "-64\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			for _, c := range topo.Caches {
				if c.LineSize < 0 {
					t.Errorf("cache %+v has a negative line size", c)
				}
			}
			if !noted(topo, cpu+"cpu0/cache/index0/coherency_line_size", `"-64"`) {
				t.Errorf("no note on the negative line size: %q", topo.Degraded)
			}
		}},
	}
	for _, bad := range []string{"", "10 x", "10 -1", "10\x0021"} {
		cases = append(cases, tc{"distance " + fmt.Sprintf("%q", bad), 8, func(f fstest.MapFS) {
			set(f, node+"node1/distance", bad)
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if topo.Distances != nil {
				t.Errorf("distances %+v, want none (hwloc drops the matrix)", topo.Distances)
			}
			if !noted(topo, node+"node1/distance", "no distance matrix") {
				t.Errorf("no note names node1/distance: %q", topo.Degraded)
			}
		}})
	}
	cases = append(cases, []tc{
		{"empty cache size", 8, func(f fstest.MapFS) {
			set(f, cpu+"cpu0/cache/index3/size", "")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			c, _ := topo.CPU(0)
			if c.LastLevelCache < 0 || topo.Caches[c.LastLevelCache].Level != 3 || topo.Caches[c.LastLevelCache].SizeBytes != 0 {
				t.Errorf("cpu 0's L3 is missing or has a size: %+v (hwloc keeps it, size 0)", topo.Caches)
			}
			if !noted(topo, cpu+"cpu0/cache/index3/size", `""`) {
				t.Errorf("no note names the size file: %q", topo.Degraded)
			}
		}},
		{"empty cache level", 8, func(f fstest.MapFS) {
			set(f, cpu+"cpu1/cache/index0/level", "\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			// hwloc skips a cache whose level it cannot read.
			if slices.ContainsFunc(topo.Caches, func(c Cache) bool { return c.Level == 1 && c.CPUs.Has(1) }) {
				t.Errorf("cpu 1 kept an L1 of unknown level: %+v", topo.Caches)
			}
			if !noted(topo, cpu+"cpu1/cache/index0/level", `""`) {
				t.Errorf("no note names the level file: %q", topo.Degraded)
			}
		}},
		{"NUL inside the cgroup cpus file", 8, func(f fstest.MapFS) {
			set(f, "sys/fs/cgroup/job/cpuset.cpus.effective", "0-1\x002\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if topo.Allowed.String() != "0-1" {
				t.Errorf("allowed = %s, want 0-1: the value ends at the NUL", topo.Allowed)
			}
		}},
		{"cache size that overflows", 8, func(f fstest.MapFS) {
			set(f, cpu+"cpu0/cache/index3/size", "1099511627775G\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			for _, c := range topo.Caches {
				if c.SizeBytes < 0 {
					t.Errorf("cache size %d", c.SizeBytes)
				}
			}
			if !noted(topo, cpu+"cpu0/cache/index3/size", "1099511627775G") {
				t.Errorf("no note on the size: %q", topo.Degraded)
			}
		}},
		{"MemTotal of 2^53 kB", 8, func(f fstest.MapFS) {
			set(f, node+"node0/meminfo", "Node 0 MemTotal: 9007199254740992 kB\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if n, _ := topo.Node(0); n.MemoryBytes != -1 {
				t.Errorf("node 0 memory %d, want -1 (unknown: it overflows 64 bits)", n.MemoryBytes)
			}
			if !noted(topo, node+"node0/meminfo", "9007199254740992") {
				t.Errorf("no note on the memory: %q", topo.Degraded)
			}
		}},
		{"empty L3 shared_cpu_map", 8, func(f fstest.MapFS) {
			delete(f, cpu+"cpu2/cache/index3/shared_cpu_list")
			set(f, cpu+"cpu2/cache/index3/shared_cpu_map", "00000000\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if o := overlappingCaches(topo); o != "" {
				t.Errorf("an extra cache was made up: %s", o)
			}
			if l3 := slices.DeleteFunc(slices.Clone(topo.Caches), func(c Cache) bool { return c.Level != 3 }); len(l3) != 2 {
				t.Errorf("%d L3 caches, want 2: %+v", len(l3), l3)
			}
		}},
		{"symlink loop on the node directory", 8, func(f fstest.MapFS) {
			for name := range f {
				if strings.HasPrefix(name, node) {
					delete(f, name)
				}
			}
			f["sys/devices/system/node"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("node.loop")}
			f["sys/devices/system/node.loop"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("node")}
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if noted(topo, "without NUMA") || !noted(topo, "sys/devices/system/node", "symbolic links") {
				t.Errorf("the loop is not reported as such: %q", topo.Degraded)
			}
			if len(topo.Nodes) != 1 || topo.Nodes[0].CPUs.Len() != 8 {
				t.Errorf("nodes %+v, want one node of every CPU (as hwloc)", topo.Nodes)
			}
		}},
		{"empty cpu/online", 8, func(f fstest.MapFS) {
			set(f, cpu+"online", "\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if topo.Online.Len() != 8 {
				t.Errorf("online %s, want each CPU's own online file to decide", topo.Online)
			}
			if !noted(topo, cpu+"online", `""`) {
				t.Errorf("no note names cpu/online: %q", topo.Degraded)
			}
		}},
		{"cpu/online names no CPU that exists", 8, func(f fstest.MapFS) {
			set(f, cpu+"online", "40-47\n")
		}, func(t *testing.T, topo *Topology, err error) {
			if err == nil || !strings.Contains(err.Error(), cpu+"online") || !strings.Contains(err.Error(), `"40-47"`) {
				t.Errorf("error %v does not name cpu/online and its value", err)
			}
		}},
		{"empty node/online", 8, func(f fstest.MapFS) {
			set(f, node+"online", "\n")
			f[node+"node0/cpumap"] = &fstest.MapFile{Data: []byte("0f\n")}
			f[node+"node1/cpumap"] = &fstest.MapFile{Data: []byte("f0\n")}
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if len(topo.Nodes) != 2 {
				t.Errorf("%d nodes, want the 2 node directories", len(topo.Nodes))
			}
			if !noted(topo, node+"online", `""`) {
				t.Errorf("no note names node/online: %q", topo.Degraded)
			}
		}},
		{"node/online lists nodes that cannot be read", 8, func(f fstest.MapFS) {
			set(f, node+"online", "4-5\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if len(topo.Nodes) != 1 || !noted(topo, node+"online", `"4-5"`, "no nodeN directory") {
				t.Errorf("nodes %+v, notes %q: want one node and a note naming the listed nodes", topo.Nodes, topo.Degraded)
			}
		}},
		{"8 MB of junk in cpu/online", 8, func(f fstest.MapFS) {
			set(f, cpu+"online", strings.Repeat("junk", 2<<20))
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if !noted(topo, cpu+"online", "too large") {
				t.Errorf("no note says cpu/online is too large: %q", topo.Degraded)
			}
		}},
		{"20 MB of junk lines in proc/mounts", 8, func(f fstest.MapFS) {
			set(f, "proc/mounts", strings.Repeat("junk\n", 4<<20))
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if !noted(topo, "proc/mounts", "too large") {
				t.Errorf("no note says proc/mounts is too large: %q", topo.Degraded)
			}
		}},
		{"a 1 MB line in proc/mounts", 8, func(f fstest.MapFS) {
			set(f, "proc/mounts", strings.Repeat("x", 1<<20)+"\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if !noted(topo, "proc/mounts", "line longer") {
				t.Errorf("no note says the line is too long: %q", topo.Degraded)
			}
		}},
		{"directory at the cgroup cpus file", 8, func(f fstest.MapFS) {
			delete(f, "sys/fs/cgroup/job/cpuset.cpus.effective")
			set(f, "sys/fs/cgroup/job/cpuset.cpus.effective/x", "0\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if topo.Allowed.Len() != 8 || !noted(topo, "sys/fs/cgroup/job/cpuset.cpus.effective") {
				t.Errorf("allowed %s, notes %q: want 0-7 and a note naming the file", topo.Allowed, topo.Degraded)
			}
		}},
		{"directory at proc/self/status", 8, func(f fstest.MapFS) {
			set(f, "proc/self/status/x", "Cpus_allowed_list:\t0\n")
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if topo.Allowed.Len() != 8 || !noted(topo, "proc/self/status") {
				t.Errorf("allowed %s, notes %q: want 0-7 and a note naming the file", topo.Allowed, topo.Degraded)
			}
		}},
		{"symlink loop at the cgroup cpus file", 8, func(f fstest.MapFS) {
			f["sys/fs/cgroup/job/cpuset.cpus.effective"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("cpuset.cpus.effective")}
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if topo.Allowed.Len() != 8 || !noted(topo, "sys/fs/cgroup/job/cpuset.cpus.effective", "symbolic links") {
				t.Errorf("allowed %s, notes %q: want 0-7 and a note naming the loop", topo.Allowed, topo.Degraded)
			}
		}},
		{"symlink loop at proc/self/status", 8, func(f fstest.MapFS) {
			f["proc/self/status"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("status")}
		}, func(t *testing.T, topo *Topology, err error) {
			ok(t, err)
			if !noted(topo, "proc/self/status", "symbolic links") {
				t.Errorf("notes %q: want a note naming the loop", topo.Degraded)
			}
		}},
	}...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := machineFS(c.n)
			c.change(f)
			topo, err := FromFS(f)
			c.check(t, topo, err)
			checkShortMessages(t, topo, err)
		})
	}
}

// checkShortMessages fails if an error or note quotes a long value whole.
func checkShortMessages(t *testing.T, topo *Topology, err error) {
	t.Helper()
	if err != nil && len(err.Error()) > 1024 {
		t.Errorf("error of %d bytes: %.200s…", len(err.Error()), err)
	}
	if topo != nil {
		for _, d := range topo.Degraded {
			if len(d) > 1024 {
				t.Errorf("note of %d bytes: %.200s…", len(d), d)
			}
		}
	}
}

// A capture's symbolic links stay inside it: an absolute target is taken
// from the capture's root, and ".." stops there, whatever the host has.
func TestCaptureSymlinksStayInside(t *testing.T) {
	const n = 32
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "online"), []byte("0-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{
		filepath.Join(outside, "online"), // absolute, to the host's file
		strings.Repeat("../", 20) + strings.TrimPrefix(filepath.Join(outside, "online"), "/"), // climbing out
	} {
		t.Run(target, func(t *testing.T) {
			root := writeTree(t, machineFS(n))
			link := filepath.Join(root, "sys/devices/system/cpu/online")
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			topo, err := FromDir(root)
			if err != nil {
				t.Fatal(err)
			}
			if topo.Online.Len() != n {
				t.Errorf("online %s: the host's file was read, want the capture's %d CPUs", topo.Online, n)
			}
		})
	}
	// A link inside the capture, absolute as the kernel's own links are
	// not, is followed from the capture's root.
	root := writeTree(t, machineFS(n))
	real := filepath.Join(root, "sys/devices/system/cpu/online.real")
	if err := os.WriteFile(real, []byte("0-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "sys/devices/system/cpu/online")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/sys/devices/system/cpu/online.real", link); err != nil {
		t.Fatal(err)
	}
	topo, err := FromDir(root)
	if err != nil || topo.Online.String() != "0-3" {
		t.Errorf("online %v, %v: want 0-3 from the capture's own online.real", topo, err)
	}
	// A loop is reported, naming the path.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("online", link); err != nil {
		t.Fatal(err)
	}
	topo, err = FromDir(root)
	if err != nil || !noted(topo, "sys/devices/system/cpu/online", "symbolic links") {
		t.Errorf("loop at cpu/online: %v, notes %q", err, topo.Degraded)
	}
}

// writeTree writes a MapFS's regular files under a temporary directory.
func writeTree(t testing.TB, f fstest.MapFS) string {
	t.Helper()
	root := t.TempDir()
	for name, file := range f {
		if file.Mode&fs.ModeType != 0 {
			continue
		}
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, file.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Synthetic specs whose counts overflow when multiplied are refused
// before anything is allocated.
func TestSyntheticSpecOverflow(t *testing.T) {
	real := Fallback("test")
	for _, spec := range []string{
		"4611686018427387905x4",   // 2^62+1 nodes of 4: the product wraps to 4
		"2x4611686018427387905x4", // the product wraps to 8
		"4x4611686018427387905",
		"2x2x4611686018427387905",
		"99999999999999999999x1", // beyond int64
		"4097x1",
		"64x64x2",
	} {
		topo, err := Synthetic(spec, real)
		if !errors.Is(err, ErrSpec) {
			t.Errorf("Synthetic(%q) = %d CPUs, %v; want ErrSpec", spec, len(topo.CPUs), err)
			continue
		}
		if len(err.Error()) > 256 {
			t.Errorf("Synthetic(%q): error of %d bytes", spec, len(err.Error()))
		}
	}
	if topo, err := Synthetic("64x64", real); err != nil || len(topo.CPUs) != MaxSyntheticCPUs {
		t.Errorf("Synthetic(64x64) = %v; want %d CPUs", err, MaxSyntheticCPUs)
	}
}
