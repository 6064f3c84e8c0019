package main

import (
	"encoding/json"
	"fmt"
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
