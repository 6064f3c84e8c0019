package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numapool/numapool/topology"
)

// topo --spec claims no memory node the kernel does not have: the memory
// nodes it lists are this machine's, and each synthetic node's memory is
// said to be that of the real node of the CPU it runs on (a spec's i-th
// CPU runs on the i-th allowed CPU).
func TestTopoSpecSaysWhereMemoryIs(t *testing.T) {
	real := topology.Discover()
	var mems topology.CPUSet
	for _, n := range real.Nodes {
		if n.HasMemory && n.Allowed {
			mems.Add(n.ID)
		}
	}
	allowed := real.Allowed.List()
	nodeOf := func(i int) int {
		c, _ := real.CPU(allowed[i%len(allowed)])
		return c.Node
	}
	const spec = "3x1"

	t.Run("text", func(t *testing.T) {
		code, out, errs := runCmd("topo", "--spec", spec)
		if code != 0 {
			t.Fatalf("code %d: %s", code, errs)
		}
		want := []string{fmt.Sprintf("; memory nodes %s\n", mems), "synthetic nodes are not the kernel's and have no memory of their own"}
		for i := range 3 {
			want = append(want, fmt.Sprintf("synthetic node %d: memory of node %d", i, nodeOf(i)))
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("topo --spec %s does not say %q:\n%s", spec, w, out)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		code, out, errs := runCmd("topo", "--spec", spec, "--json")
		if code != 0 {
			t.Fatalf("code %d: %s", code, errs)
		}
		var s struct {
			topology.Summary
			SyntheticMemory []struct {
				Node        int   `json:"node"`
				MemoryNodes []int `json:"memory_of_nodes"`
			} `json:"synthetic_memory"`
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if !s.AllowedNUMANodes.Equal(mems) {
			t.Errorf("allowed_numa_nodes %s, want this machine's memory nodes %s", s.AllowedNUMANodes, mems)
		}
		if len(s.SyntheticMemory) != 3 {
			t.Fatalf("synthetic_memory %+v, want 3 nodes", s.SyntheticMemory)
		}
		for i, m := range s.SyntheticMemory {
			if m.Node != i || len(m.MemoryNodes) != 1 || m.MemoryNodes[0] != nodeOf(i) {
				t.Errorf("synthetic_memory[%d] = %+v, want node %d on node %d", i, m, i, nodeOf(i))
			}
		}
	})
}

// topo shows what numactl --hardware shows: each node's free memory, and
// the distances whenever sysfs has them, also a lone node's 10; on
// captured trees, whose figures are known.
func TestTopoShowsFreeMemoryAndDistances(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		want    []string
	}{
		{"16em64t-4s2c2t-offlines", []string{"node 0 free: ", "node distances:\n node  0\n   0: 10\n"}},
		{"32intel64-2p8co2t+8ve", []string{"node 0 free: ", "node 1 free: ", "   0: 10 21\n"}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			dir := t.TempDir()
			a := "../../topology/testdata/fixtures/" + tc.fixture + ".tar.gz"
			if out, err := exec.Command("tar", "-xzf", a, "-C", dir).CombinedOutput(); err != nil {
				t.Skipf("tar: %v %s", err, out)
			}
			code, out, errs := runCmd("topo", "--sysfs", filepath.Join(dir, tc.fixture))
			if code != 0 {
				t.Fatalf("code %d: %s", code, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("topo does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "none reported") {
				t.Errorf("topo says no distances where sysfs has them:\n%s", out)
			}
		})
	}
}

// topo shows the CPU kinds, least powerful first, and each node's CPUs of
// each kind, in text and in JSON; the JSON keeps every field of the
// fixture schema it extends.
func TestTopoShowsKinds(t *testing.T) {
	t.Run("synthetic text", func(t *testing.T) {
		code, out, errs := runCmd("topo", "--spec", "2x1p+2e")
		if code != 0 {
			t.Fatalf("code %d: %s", code, errs)
		}
		for _, w := range []string{
			"cpu kinds: 2, least powerful first\n",
			"  rank 0 efficiency: CPUs 1-2,4-5; capacity 512\n",
			"  rank 1 performance: CPUs 0,3; capacity 1024\n",
			"node 0 kinds: efficiency 1-2; performance 0\n",
			"node 1 kinds: efficiency 4-5; performance 3\n",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("topo does not say %q:\n%s", w, out)
			}
		}
	})
	t.Run("synthetic json", func(t *testing.T) {
		code, out, errs := runCmd("topo", "--spec", "2x1p+2e", "--json")
		if code != 0 {
			t.Fatalf("code %d: %s", code, errs)
		}
		var s topology.Summary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if s.Schema != "numa-topology-fixture/v2" {
			t.Errorf("schema %q, want numa-topology-fixture/v2", s.Schema)
		}
		got, _ := json.Marshal(s.CPUKinds)
		want := `[{"rank":0,"name":"efficiency","cpus":[1,2,4,5],"frequency_max_mhz":0,"frequency_base_mhz":0,"linux_capacity":0,"core_type":"","capacity":512},` +
			`{"rank":1,"name":"performance","cpus":[0,3],"frequency_max_mhz":0,"frequency_base_mhz":0,"linux_capacity":0,"core_type":"","capacity":1024}]`
		if string(got) != want {
			t.Errorf("cpu_kinds %s\nwant      %s", got, want)
		}
		if len(s.NUMANodes) != 2 {
			t.Fatalf("%d nodes, want 2", len(s.NUMANodes))
		}
		node1, _ := json.Marshal(s.NUMANodes[1].Kinds)
		if string(node1) != `[{"kind":0,"name":"efficiency","cpus":[4,5]},{"kind":1,"name":"performance","cpus":[3]}]` {
			t.Errorf("node 1 cpu_kinds %s", node1)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &fields); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"schema", "name", "source", "sysfs_has_node_dir", "pu_count", "online_cpus", "offline_cpus",
			"allowed_cpus", "numa_node_count", "numa_nodes", "allowed_numa_nodes", "package_count", "packages", "core_count",
			"cores", "distances", "optional", "machine", "processor", "degraded", "cpu_kinds"} {
			if _, ok := fields[f]; !ok {
				t.Errorf("topo --json has no %q", f)
			}
		}
	})
	t.Run("captured hybrid", func(t *testing.T) {
		const fixture = "20em64t-hybrid-1p6c2t+2ca4co1t"
		dir := t.TempDir()
		a := "../../topology/testdata/fixtures/" + fixture + ".tar.gz"
		if out, err := exec.Command("tar", "-xzf", a, "-C", dir).CombinedOutput(); err != nil {
			t.Skipf("tar: %v %s", err, out)
		}
		root := filepath.Join(dir, fixture)
		for c := range 20 {
			maxKHz, baseKHz := "3900000\n", "1400000\n"
			if c < 12 {
				maxKHz, baseKHz = "5000000\n", "1900000\n"
			}
			freq := filepath.Join(root, fmt.Sprintf("sys/devices/system/cpu/cpu%d/cpufreq", c))
			if err := os.MkdirAll(freq, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, v := range map[string]string{"cpuinfo_max_freq": maxKHz, "base_frequency": baseKHz} {
				if err := os.WriteFile(filepath.Join(freq, name), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		code, out, errs := runCmd("topo", "--sysfs", root)
		if code != 0 {
			t.Fatalf("code %d: %s", code, errs)
		}
		for _, w := range []string{
			"  rank 0 efficiency: CPUs 12-19; max 3900 MHz, base 1400 MHz, capacity 798\n",
			"  rank 1 performance: CPUs 0-11; max 5000 MHz, base 1900 MHz, capacity 1024\n",
			"node 0 kinds: efficiency 12-19; performance 0-11\n",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("topo does not say %q:\n%s", w, out)
			}
		}
	})
	t.Run("one kind", func(t *testing.T) {
		code, out, errs := runCmd("topo", "--spec", "2x2")
		if code != 0 {
			t.Fatalf("code %d: %s", code, errs)
		}
		if !strings.Contains(out, "cpu kinds: none (every CPU alike, capacity 1024)\n") {
			t.Errorf("topo --spec 2x2 does not say it has no kinds:\n%s", out)
		}
	})
}
