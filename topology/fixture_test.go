package topology

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// expected is the part of a fixture's expected.json (SCHEMA.md) that the
// test compares: every field compare.py checks by default, and the
// informational ones numapool provides (locality, dies, clusters, caches).
type expected struct {
	Name             string `json:"name"`
	PUCount          int    `json:"pu_count"`
	OnlineCPUs       []int  `json:"online_cpus"`
	OfflineCPUs      []int  `json:"offline_cpus"`
	AllowedCPUs      []int  `json:"allowed_cpus"`
	NUMANodeCount    int    `json:"numa_node_count"`
	AllowedNUMANodes []int  `json:"allowed_numa_nodes"`
	NUMANodes        []struct {
		OSIndex      int    `json:"os_index"`
		CPUs         []int  `json:"cpus"`
		MemoryOnly   bool   `json:"memory_only"`
		LocalityCPUs []int  `json:"locality_cpus"`
		MemoryBytes  *int64 `json:"memory_bytes"`
		Allowed      bool   `json:"allowed"`
	} `json:"numa_nodes"`
	PackageCount int `json:"package_count"`
	Packages     []struct {
		OSIndex *int  `json:"os_index"`
		CPUs    []int `json:"cpus"`
	} `json:"packages"`
	CoreCount int `json:"core_count"`
	Cores     []struct {
		Package *int  `json:"package"`
		CoreID  int   `json:"core_id"`
		PUs     []int `json:"pus"`
	} `json:"cores"`
	Distances *struct {
		Nodes  []int   `json:"node_os_indexes"`
		Matrix [][]int `json:"matrix"`
	} `json:"distances"`
	Optional struct {
		Dies []struct {
			Package *int  `json:"package"`
			OSIndex int   `json:"os_index"`
			CPUs    []int `json:"cpus"`
		} `json:"dies"`
		Clusters []struct {
			OSIndex int   `json:"os_index"`
			CPUs    []int `json:"cpus"`
		} `json:"clusters"`
		Caches []struct {
			Level     int    `json:"level"`
			Type      string `json:"type"`
			SizeBytes int64  `json:"size_bytes"`
			LineSize  int    `json:"line_size"`
			CPUs      []int  `json:"cpus"`
		} `json:"caches"`
	} `json:"optional"`
}

// unpackFixture extracts testdata/fixtures/NAME.tar.gz into a temporary
// directory and returns the fixture's root (the directory holding sys/).
func unpackFixture(t testing.TB, archive string) string {
	t.Helper()
	// tar(1), where there is one, is many times faster than the
	// race-instrumented archive/tar and compress/gzip below.
	if tarCmd, err := exec.LookPath("tar"); err == nil {
		dst := t.TempDir()
		abs, err := filepath.Abs(archive)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(tarCmd, "-xzf", abs, "-C", dst).CombinedOutput(); err == nil {
			root := filepath.Join(dst, strings.TrimSuffix(filepath.Base(archive), ".tar.gz"))
			if _, err := os.Stat(filepath.Join(root, "expected.json")); err == nil {
				return root
			}
		} else {
			t.Logf("tar: %v: %s", err, out)
		}
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", archive, err)
	}
	dst := t.TempDir()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		name := filepath.Clean(h.Name)
		if strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			t.Fatalf("%s: entry %q escapes the archive", archive, h.Name)
		}
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	root := filepath.Join(dst, strings.TrimSuffix(filepath.Base(archive), ".tar.gz"))
	if _, err := os.Stat(filepath.Join(root, "expected.json")); err != nil {
		t.Fatalf("%s: no expected.json under %s", archive, root)
	}
	return root
}

func fixtureArchives(t testing.TB) []string {
	archives, err := filepath.Glob("testdata/fixtures/*.tar.gz")
	if err != nil || len(archives) == 0 {
		t.Fatalf("no fixtures under testdata/fixtures: %v", err)
	}
	return archives
}

// TestFixtures reads every captured machine and compares the result with
// hwloc's reading of the same tree, field by field.
func TestFixtures(t *testing.T) {
	for _, archive := range fixtureArchives(t) {
		name := strings.TrimSuffix(filepath.Base(archive), ".tar.gz")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := unpackFixture(t, archive)
			var want expected
			b, err := os.ReadFile(filepath.Join(root, "expected.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			topo, err := FromDir(root)
			if err != nil {
				t.Fatalf("FromDir: %v", err)
			}
			// Compare through the JSON encoding: it is what compare.py and
			// any other tool sees.
			enc, err := json.Marshal(topo.Summary(name))
			if err != nil {
				t.Fatal(err)
			}
			var got expected
			if err := json.Unmarshal(enc, &got); err != nil {
				t.Fatal(err)
			}
			for _, d := range diffFixture(want, got) {
				t.Error(d)
			}
			// Worker groups cover exactly the allowed CPUs, each CPU once.
			var covered CPUSet
			for _, n := range topo.ComputeNodes() {
				if n.CPUs.Intersects(covered) || !n.CPUs.IsSubsetOf(topo.Allowed) {
					t.Errorf("compute node %d CPUs %s overlap or are not allowed", n.ID, n.CPUs)
				}
				covered = covered.Or(n.CPUs)
			}
			if !covered.Equal(topo.Allowed) {
				t.Errorf("compute nodes cover %s, allowed is %s", covered, topo.Allowed)
			}
		})
	}
}

// diffFixture lists every difference between hwloc's reading and ours.
func diffFixture(want, got expected) []string {
	var diffs []string
	check := func(field string, w, g any) {
		wj, _ := json.Marshal(w)
		gj, _ := json.Marshal(g)
		if string(wj) != string(gj) {
			diffs = append(diffs, fmt.Sprintf("%s: hwloc %s, numapool %s", field, wj, gj))
		}
	}
	check("pu_count", want.PUCount, got.PUCount)
	check("online_cpus", want.OnlineCPUs, got.OnlineCPUs)
	check("offline_cpus", want.OfflineCPUs, got.OfflineCPUs)
	check("allowed_cpus", want.AllowedCPUs, got.AllowedCPUs)
	check("numa_node_count", want.NUMANodeCount, got.NUMANodeCount)
	check("allowed_numa_nodes", want.AllowedNUMANodes, got.AllowedNUMANodes)
	check("numa_nodes", want.NUMANodes, got.NUMANodes)
	check("package_count", want.PackageCount, got.PackageCount)
	check("core_count", want.CoreCount, got.CoreCount)
	// Objects are matched by CPU set, as compare.py does: order is free.
	sortBy := func(s []string) []string { slices.Sort(s); return s }
	keyed := func(v any) []string {
		var items []json.RawMessage
		b, _ := json.Marshal(v)
		_ = json.Unmarshal(b, &items)
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = string(it)
		}
		return sortBy(out)
	}
	check("packages", keyed(want.Packages), keyed(got.Packages))
	check("cores", keyed(want.Cores), keyed(got.Cores))
	check("distances", want.Distances, got.Distances)
	check("optional.dies", keyed(want.Optional.Dies), keyed(got.Optional.Dies))
	check("optional.clusters", keyed(want.Optional.Clusters), keyed(got.Optional.Clusters))
	check("optional.caches", keyed(want.Optional.Caches), keyed(got.Optional.Caches))
	return diffs
}
