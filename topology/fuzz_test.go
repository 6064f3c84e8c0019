package topology

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

// fuzzFixtures are the captures FuzzReadTree starts from: small ones, one
// without a node directory, one with a legacy cpuset, one with cgroup v2.
var fuzzFixtures = []string{"2arm-2c", "16amd64-8n2c-cpusets", "32amd64-4s2n4c-cgroup2"}

// fuzzTree is a fixture in memory, its files in sorted order.
type fuzzTree struct {
	fs    fstest.MapFS
	names []string
	dirs  map[string]bool
}

var fuzzTrees = sync.OnceValues(func() ([]fuzzTree, error) {
	var out []fuzzTree
	for _, name := range fuzzFixtures {
		fsys, err := loadFixtureMap("testdata/fixtures/"+name+".tar.gz", name)
		if err != nil {
			return nil, err
		}
		out = append(out, fuzzTree{fs: fsys, names: slices.Sorted(maps.Keys(fsys)), dirs: newIndexedFS(fsys).dirs})
	}
	return out, nil
})

// loadFixtureMap reads a packed fixture into memory, its paths relative to
// the capture's root.
func loadFixtureMap(archive, name string) (fstest.MapFS, error) {
	b, err := os.ReadFile(archive)
	if err != nil {
		return nil, err
	}
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	fsys := fstest.MapFS{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fsys, nil
		}
		if err != nil {
			return nil, err
		}
		rel, ok := strings.CutPrefix(h.Name, name+"/")
		if h.Typeflag != tar.TypeReg || !ok || rel == "expected.json" {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		fsys[rel] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
}

// FuzzReadTree reads captured machines with one file replaced, removed
// or appended to. Discovery must not panic or hang, every error must name
// a file, and no error or note may quote a value at length.
func FuzzReadTree(f *testing.F) {
	trees, err := fuzzTrees()
	if err != nil {
		f.Fatal(err)
	}
	seeds := []string{
		"sys/devices/system/cpu/online", "sys/devices/system/node/online", "sys/devices/system/node/node1/distance",
		"sys/devices/system/node/node0/cpumap", "sys/devices/system/cpu/cpu1/topology/core_id",
		"sys/devices/system/cpu/cpu0/topology/thread_siblings", "sys/devices/system/cpu/cpu0/cache/index2/size",
		"proc/mounts", "proc/self/cgroup", "proc/self/cpuset", "proc/meminfo", "dev/cpuset/dummy/cpus",
		"sys/fs/cgroup/cgroup.controllers",
	}
	odd := [][]byte{nil, []byte("\n"), []byte("-1\n"), []byte("5-2\n"), []byte("0-1\x002\n"), []byte("99999999999999999999\n"), []byte("zz")}
	for i, tree := range trees {
		for _, s := range seeds {
			k, ok := slices.BinarySearch(tree.names, s)
			if !ok {
				continue
			}
			f.Add(uint8(i), uint16(k), uint8(0), tree.fs[s].Data)
			for j, v := range odd {
				f.Add(uint8(i), uint16(k), uint8(j%3), v)
			}
		}
	}
	f.Fuzz(func(t *testing.T, fixture uint8, file uint16, op uint8, data []byte) {
		tree := trees[int(fixture)%len(trees)]
		fsys := maps.Clone(tree.fs)
		name := tree.names[int(file)%len(tree.names)]
		switch op % 3 {
		case 0:
			fsys[name] = &fstest.MapFile{Data: data, Mode: 0o444}
		case 1:
			delete(fsys, name)
		case 2:
			fsys[name] = &fstest.MapFile{Data: append(slices.Clip(fsys[name].Data), data...), Mode: 0o444}
		}
		topo, err := FromFS(indexedFS{fsys, tree.dirs})
		if err != nil {
			if !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), "sys/") && !strings.Contains(err.Error(), "proc/") {
				t.Fatalf("%s changed: error %q names no file", name, err)
			}
			if len(err.Error()) > 2048 {
				t.Fatalf("%s changed: error of %d bytes", name, len(err.Error()))
			}
			return
		}
		for _, d := range topo.Degraded {
			if len(d) > 2048 {
				t.Fatalf("%s changed: note of %d bytes: %.200s", name, len(d), d)
			}
		}
		if err := topo.Check(); err != nil {
			t.Fatalf("%s changed: %v", name, err)
		}
		if _, err := json.Marshal(topo.Summary("fuzz")); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzSyntheticSpec feeds Synthetic any spec: it must not panic, must
// refuse what it cannot build with ErrSpec, and never build more than
// MaxSyntheticCPUs CPUs (nor allocate for more).
func FuzzSyntheticSpec(f *testing.F) {
	for _, s := range []string{"2x4", "2x4x2", "0-1;2-3", "0;1", "", "x", "2x", "0x4", "2x-1", "99999x99999",
		"4611686018427387905x4", "2x4611686018427387905x4", "64x64", "+2x2", "0-3:1/2;", "2x2x2x2",
		"1x4p+4e", "1p+1e", "2x2p+4ex2", "p+e", "1x4097p+1e", "4p+4ex4611686018427387905", "1xp+ex", "4e+4p", "1x+4p+4e"} {
		f.Add(s)
	}
	real := Fallback("fuzz")
	real.Allowed = RangeCPUSet(0, 3)
	f.Fuzz(func(t *testing.T, spec string) {
		topo, err := Synthetic(spec, real)
		if err != nil {
			if !errors.Is(err, ErrSpec) && !errors.Is(err, ErrTopology) {
				t.Fatalf("Synthetic(%q): error %v wraps neither ErrSpec nor ErrTopology", spec, err)
			}
			if len(err.Error()) > 2048 {
				t.Fatalf("Synthetic(%q): error of %d bytes", spec, len(err.Error()))
			}
			return
		}
		if n := len(topo.CPUs); n == 0 || n > MaxSyntheticCPUs {
			t.Fatalf("Synthetic(%q) built %d CPUs", spec, n)
		}
		if got := topo.OSCPUs(topo.Allowed); !got.IsSubsetOf(real.Allowed) {
			t.Fatalf("Synthetic(%q) maps onto %s, outside %s", spec, got, real.Allowed)
		}
		// Every CPU is in the kind its Kind names, or there are no kinds.
		for _, c := range topo.CPUs {
			k, ok := topo.KindOf(c.ID)
			switch {
			case c.Capacity < 1 || c.Capacity > 1024:
				t.Fatalf("Synthetic(%q): CPU %d has capacity %d", spec, c.ID, c.Capacity)
			case topo.Kinds == nil && c.Kind != -1, topo.Kinds != nil && (!ok || !k.CPUs.Has(c.ID) || k.Capacity != c.Capacity):
				t.Fatalf("Synthetic(%q): CPU %d has kind %d of %+v", spec, c.ID, c.Kind, topo.Kinds)
			}
		}
	})
}
