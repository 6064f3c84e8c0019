package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// twoNodeFS is a small machine: 2 nodes of 2 CPUs, CPU 4 offline, node 2
// memory-only and nearest to node 1.
func twoNodeFS() fstest.MapFS {
	f := fstest.MapFS{
		"sys/devices/system/cpu/online":          {Data: []byte("0-3\n")},
		"sys/devices/system/cpu/cpu4/online":     {Data: []byte("0\n")},
		"sys/devices/system/node/online":         {Data: []byte("0-2\n")},
		"sys/devices/system/node/has_memory":     {Data: []byte("0-2\n")},
		"sys/devices/system/node/node0/cpumap":   {Data: []byte("03\n")},
		"sys/devices/system/node/node1/cpumap":   {Data: []byte("0c\n")},
		"sys/devices/system/node/node2/cpumap":   {Data: []byte("00\n")},
		"sys/devices/system/node/node0/meminfo":  {Data: []byte("Node 0 MemTotal: 1024 kB\n")},
		"sys/devices/system/node/node1/meminfo":  {Data: []byte("Node 1 MemTotal: 2048 kB\n")},
		"sys/devices/system/node/node2/meminfo":  {Data: []byte("Node 2 MemTotal: 4096 kB\n")},
		"sys/devices/system/node/node0/distance": {Data: []byte("10 20 30\n")},
		"sys/devices/system/node/node1/distance": {Data: []byte("20 10 25\n")},
		"sys/devices/system/node/node2/distance": {Data: []byte("30 25 10\n")},
	}
	for c := range 4 {
		dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/", c)
		f[dir+"topology/core_id"] = &fstest.MapFile{Data: []byte(fmt.Sprint(c / 2))}
		f[dir+"topology/physical_package_id"] = &fstest.MapFile{Data: []byte(fmt.Sprint(c / 2))}
		f[dir+"topology/thread_siblings_list"] = &fstest.MapFile{Data: []byte(fmt.Sprintf("%d-%d", c/2*2, c/2*2+1))}
		f[dir+"topology/core_siblings_list"] = &fstest.MapFile{Data: []byte(fmt.Sprintf("%d-%d", c/2*2, c/2*2+1))}
		f[dir+"cache/index3/level"] = &fstest.MapFile{Data: []byte("3\n")}
		f[dir+"cache/index3/type"] = &fstest.MapFile{Data: []byte("Unified\n")}
		f[dir+"cache/index3/size"] = &fstest.MapFile{Data: []byte("1024K\n")}
		f[dir+"cache/index3/shared_cpu_list"] = &fstest.MapFile{Data: []byte(fmt.Sprintf("%d-%d", c/2*2, c/2*2+1))}
	}
	return f
}

func TestFromFSSmallMachine(t *testing.T) {
	topo, err := FromFS(twoNodeFS())
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.Offline.String(); got != "4" {
		t.Errorf("offline = %q, want 4", got)
	}
	if len(topo.Nodes) != 3 || !topo.Nodes[2].MemoryOnly() || topo.Nodes[2].MemoryBytes != 4096<<10 {
		t.Fatalf("nodes = %+v", topo.Nodes)
	}
	// Node 2 has no CPU; node 1 is its unique nearest, so it is local to 2-3.
	if got := topo.Nodes[2].Locality.String(); got != "2-3" {
		t.Errorf("memory-only node locality = %q, want 2-3", got)
	}
	if d, _ := topo.Distances.Between(2, 1); d != 25 {
		t.Errorf("distance 2->1 = %d", d)
	}
	c3, _ := topo.CPU(3)
	if c3.Node != 1 || c3.Package != 1 || c3.Siblings.String() != "2-3" || c3.LastLevelCache < 0 {
		t.Errorf("cpu 3 = %+v", c3)
	}
	if got := topo.Caches[c3.LastLevelCache].CPUs.String(); got != "2-3" {
		t.Errorf("cpu 3's last-level cache spans %q", got)
	}
	if n := len(topo.ComputeNodes()); n != 2 {
		t.Errorf("ComputeNodes = %d nodes, want 2 (node 2 has no CPU)", n)
	}
}

// A malformed file that discovery can do without is read as hwloc reads
// it and noted, the note naming the file and quoting the text.
func TestFromFSMalformedFilesAreNoted(t *testing.T) {
	for _, tc := range []struct {
		file, data string
	}{
		{"sys/devices/system/cpu/online", "0-x\n"},
		{"sys/devices/system/node/node1/cpumap", "zz\n"},
		{"sys/devices/system/cpu/cpu2/topology/core_id", "seven\n"},
		{"sys/devices/system/node/node0/distance", "10 twenty\n"},
		{"sys/devices/system/node/node0/meminfo", "Node 0 MemTotal: many kB\n"},
		{"sys/devices/system/cpu/cpu1/cache/index3/size", "big\n"},
	} {
		f := twoNodeFS()
		f[tc.file] = &fstest.MapFile{Data: []byte(tc.data)}
		topo, err := FromFS(f)
		if err != nil {
			t.Errorf("%s = %q: %v", tc.file, tc.data, err)
			continue
		}
		text := strings.Fields(tc.data)[len(strings.Fields(tc.data))-1]
		if tc.file == "sys/devices/system/node/node0/meminfo" {
			text = "many"
		}
		if !slices.ContainsFunc(topo.Degraded, func(s string) bool {
			return strings.Contains(s, tc.file) && strings.Contains(s, text)
		}) {
			t.Errorf("%s = %q: no note names the file and the text: %q", tc.file, tc.data, topo.Degraded)
		}
	}
}

func TestFromFSMissingDistanceFile(t *testing.T) {
	f := twoNodeFS()
	delete(f, "sys/devices/system/node/node1/distance")
	topo, err := FromFS(f)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Distances != nil {
		t.Error("a missing distance file must drop the matrix")
	}
	if !slices.ContainsFunc(topo.Degraded, func(s string) bool { return strings.Contains(s, "distance") }) {
		t.Errorf("Degraded %q does not say why", topo.Degraded)
	}
}

// indexedFS is a MapFS that knows its directories, so that opening or
// stating a file that does not exist, or a directory, costs a lookup
// rather than a look through every file (MapFS's way of finding out
// whether a name is a directory).
type indexedFS struct {
	files fstest.MapFS
	dirs  map[string]bool
}

func newIndexedFS(files fstest.MapFS) indexedFS {
	dirs := map[string]bool{".": true}
	for name := range files {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return indexedFS{files, dirs}
}

func (f indexedFS) Open(name string) (fs.File, error) {
	if _, ok := f.files[name]; !ok && !f.dirs[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return f.files.Open(name)
}

func (f indexedFS) Stat(name string) (fs.FileInfo, error) {
	if f.dirs[name] {
		return dirInfo(path.Base(name)), nil
	}
	if _, ok := f.files[name]; !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return f.files.Stat(name)
}

type dirInfo string

func (d dirInfo) Name() string       { return string(d) }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return nil }

// A 4096-CPU machine: cpulist and cpumap files far longer than a page.
func TestFromFSHugeMachine(t *testing.T) {
	const n = 4096
	f := fstest.MapFS{
		"sys/devices/system/cpu/online":  {Data: []byte(fmt.Sprintf("0-%d\n", n-1))},
		"sys/devices/system/node/online": {Data: []byte("0-1\n")},
	}
	var even, odd []string
	for c := range n {
		f[fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/core_id", c)] = &fstest.MapFile{Data: []byte(fmt.Sprint(c))}
		if c%2 == 0 {
			even = append(even, fmt.Sprint(c))
		} else {
			odd = append(odd, fmt.Sprint(c))
		}
	}
	f["sys/devices/system/node/node0/cpulist"] = &fstest.MapFile{Data: []byte(strings.Join(even, ",") + "\n")}
	f["sys/devices/system/node/node1/cpulist"] = &fstest.MapFile{Data: []byte(strings.Join(odd, ",") + "\n")}
	if len(f["sys/devices/system/node/node0/cpulist"].Data) <= 4096 {
		t.Fatal("test file is not longer than a page")
	}
	topo, err := FromFS(newIndexedFS(f))
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.CPUs) != n || topo.Nodes[0].CPUs.Len() != n/2 || topo.Nodes[1].CPUs.First() != 1 {
		t.Errorf("got %d CPUs, node 0 has %d", len(topo.CPUs), topo.Nodes[0].CPUs.Len())
	}
}

func TestNarrowToAffinity(t *testing.T) {
	topo, err := FromFS(twoNodeFS())
	if err != nil {
		t.Fatal(err)
	}
	topo, err = narrowToAffinity(topo, NewCPUSet(1, 3, 9))
	if err != nil {
		t.Fatal(err)
	}
	if topo.Allowed.String() != "1,3" {
		t.Errorf("allowed = %s, want 1,3", topo.Allowed)
	}
	if c, _ := topo.CPU(0); c.Allowed {
		t.Error("CPU 0 still marked allowed")
	}
	if _, err := narrowToAffinity(topo, NewCPUSet(9)); err == nil {
		t.Error("an affinity mask with no online CPU must fail")
	}
}

func TestStatusNarrowsAllowed(t *testing.T) {
	f := twoNodeFS()
	f["proc/self/status"] = &fstest.MapFile{Data: []byte("Cpus_allowed_list:\t2-3\nMems_allowed_list:\t1\n")}
	topo, err := FromFS(f)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Allowed.String() != "2-3" || topo.AllowedMems.String() != "1" || topo.Nodes[0].Allowed {
		t.Errorf("allowed %s mems %s", topo.Allowed, topo.AllowedMems)
	}
	if got := topo.ComputeNodes(); len(got) != 1 || got[0].ID != 1 {
		t.Errorf("compute nodes = %+v", got)
	}
}

func TestDiscoverThisMachine(t *testing.T) {
	topo := Discover()
	if len(topo.CPUs) == 0 || topo.Allowed.IsEmpty() {
		t.Fatalf("Discover: %+v", topo)
	}
	if runtime.GOOS == "linux" {
		if topo.Source != "sysfs:/" {
			t.Fatalf("source %q, degraded %q", topo.Source, topo.Degraded)
		}
		aff, err := getAffinity()
		if err != nil {
			t.Fatal(err)
		}
		if !topo.Allowed.Equal(topo.Allowed.And(aff)) {
			t.Errorf("allowed %s is not inside the affinity mask %s", topo.Allowed, aff)
		}
	}
	if topo.Allowed.Len() > runtime.NumCPU() {
		t.Errorf("allowed %s exceeds NumCPU %d", topo.Allowed, runtime.NumCPU())
	}
	if _, err := json.Marshal(topo.Summary("live")); err != nil {
		t.Fatal(err)
	}
}

func TestFallback(t *testing.T) {
	topo := Fallback("testing")
	if len(topo.Nodes) != 1 || len(topo.CPUs) != runtime.NumCPU() || len(topo.Degraded) != 1 || !strings.Contains(topo.Degraded[0], "testing") {
		t.Errorf("fallback = %+v", topo)
	}
	if err := topo.Check(); err != nil {
		t.Error(err)
	}
}

func TestSynthetic(t *testing.T) {
	real, err := FromFS(twoNodeFS())
	if err != nil {
		t.Fatal(err)
	}
	real.Allowed = NewCPUSet(0, 1) // a 2-CPU machine
	for _, tc := range []struct {
		spec          string
		nodes, cpus   int
		cores         int
		osOfLast      int
		distance01    int
		degradedWraps bool
	}{
		{"2x1", 2, 2, 2, 1, 20, false},
		{"2x4", 2, 8, 8, 1, 20, true},
		{"2x2x2", 2, 8, 4, 1, 20, true},
		{"4x1", 4, 4, 4, 1, 20, true},
		{"1x2", 1, 2, 2, 1, 0, false},
		{"0;1", 2, 2, 2, 1, 20, false},
	} {
		topo, err := Synthetic(tc.spec, real)
		if err != nil {
			t.Errorf("%s: %v", tc.spec, err)
			continue
		}
		d, _ := topo.Distances.Between(0, 1)
		last := topo.CPUs[len(topo.CPUs)-1]
		if len(topo.Nodes) != tc.nodes || len(topo.CPUs) != tc.cpus || len(topo.Cores) != tc.cores ||
			last.OS != tc.osOfLast || d != tc.distance01 || (len(topo.Degraded) > 0) != tc.degradedWraps {
			t.Errorf("%s: %d nodes, %d cpus, %d cores, last on OS CPU %d, d(0,1)=%d, degraded %q",
				tc.spec, len(topo.Nodes), len(topo.CPUs), len(topo.Cores), last.OS, d, topo.Degraded)
		}
		if got := topo.OSCPUs(topo.Allowed); !got.IsSubsetOf(real.Allowed) {
			t.Errorf("%s: maps onto %s, outside the allowed %s", tc.spec, got, real.Allowed)
		}
	}
	for _, bad := range []string{"", "x", "2x", "0x4", "2x-1", "2x2x2x2", "axb", "99999x99999", "0;0", "0;7", "0;;1", "0-1;"} {
		if _, err := Synthetic(bad, real); !errors.Is(err, ErrSpec) {
			t.Errorf("Synthetic(%q) error = %v, want ErrSpec", bad, err)
		}
	}
}

func TestCPUSetMaskRoundTrip(t *testing.T) {
	for _, s := range []CPUSet{{}, NewCPUSet(0), NewCPUSet(63, 64), NewCPUSet(1, 1023, 1024, 5000)} {
		m := s.Mask()
		if got := CPUSetFromMask(m); !got.Equal(s) || got.String() != s.String() {
			t.Errorf("CPUSetFromMask(%v.Mask()) = %s", s, got)
		}
		if len(m) > 0 && m[len(m)-1] == 0 {
			t.Errorf("%s.Mask() = %x ends in a zero word", s, m)
		}
	}
	if m := NewCPUSet(64).Mask(); len(m) != 2 || m[0] != 0 || m[1] != 1 {
		t.Errorf("{64}.Mask() = %x, want [0 1]", m)
	}
	if s := CPUSetFromMask([]uint64{0b101, 0, 0}); s.String() != "0,2" || len(s.Mask()) != 1 {
		t.Errorf("CPUSetFromMask(5,0,0) = %s (mask %x)", s, s.Mask())
	}
}
