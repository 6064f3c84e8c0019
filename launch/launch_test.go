package launch

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/numapool/numapool/topology"
)

func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func set(s string) topology.CPUSet {
	c, err := topology.ParseCPUList([]byte(s))
	if err != nil {
		panic(err)
	}
	return c
}

// cpus is a two-CPU machine whose process was given mask.
func cpus(mask string) topology.ProcessCPUs {
	return topology.ProcessCPUs{Online: set("0-1"), Cgroup: set("0-1"), CgroupFile: "/sys/fs/cgroup/cpuset/cpuset.cpus", Mask: set(mask)}
}

// The environments are the ones srun and mpirun gave tasks on the test
// machine (scripts/slurm-local.sh, Open MPI 4.1).
func TestDetect(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Inputs
		want Info
		line string
	}{
		{
			name: "srun -n 2 --cpu-bind=cores, rank 1",
			in: Inputs{Env: envOf("SLURM_JOB_ID=42", "SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_LOCALID=1", "SLURM_NTASKS=2",
				"SLURM_NODEID=0", "SLURM_STEP_TASKS_PER_NODE=2", "SLURM_CPU_BIND=quiet,mask_cpu:0x1,0x2",
				"SLURM_CPU_BIND_TYPE=mask_cpu:", "SLURM_CPU_BIND_LIST=0x1,0x2", "SLURM_CPU_BIND_VERBOSE=quiet"), CPUs: cpus("1")},
			want: Info{Launcher: Slurm, JobID: "42", StepID: "0", Rank: 1, LocalRank: 1, Size: 2, LocalSize: 2,
				CPUBind: "mask_cpu:0x1,0x2", TaskCPUs: set("1")},
			line: "slurm job 42 step 0, rank 1 (local 1) of 2, cpu-bind=mask_cpu:0x1,0x2: CPUs given 1 of 2 online (CPU 1, mask 0x2)",
		},
		{
			name: "srun -n 1 -c 2 --cpu-bind=none",
			in: Inputs{Env: envOf("SLURM_JOB_ID=7", "SLURM_STEP_ID=3", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NPROCS=1",
				"SLURM_CPUS_PER_TASK=2", "SLURM_CPU_BIND_TYPE=none", "SLURM_CPU_BIND_LIST=", "SLURM_TASKS_PER_NODE=1"), CPUs: cpus("0-1")},
			want: Info{Launcher: Slurm, JobID: "7", StepID: "3", Rank: 0, LocalRank: 0, Size: 1, LocalSize: 1, CPUBind: "none", CPUsPerTask: 2},
			line: "slurm job 7 step 3, rank 0 (local 0) of 1, cpu-bind=none, cpus-per-task 2: CPUs given 2 of 2 online (CPUs 0-1, mask 0x3)",
		},
		{
			name: "map_cpu, more tasks than entries",
			in: Inputs{Env: envOf("SLURM_JOB_ID=1", "SLURM_PROCID=5", "SLURM_LOCALID=3", "SLURM_NTASKS=8", "SLURM_NODEID=1",
				"SLURM_TASKS_PER_NODE=4(x2)", "SLURM_CPU_BIND_TYPE=map_cpu:", "SLURM_CPU_BIND_LIST=0,1"), CPUs: cpus("1")},
			want: Info{Launcher: Slurm, JobID: "1", Rank: 5, LocalRank: 3, Size: 8, LocalSize: 4, CPUBind: "map_cpu:0,1", TaskCPUs: set("1")},
		},
		{
			name: "mpirun --bind-to core -np 2, rank 0",
			in: Inputs{Env: envOf("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
				"OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_hwloc_base_binding_policy=core", "OMPI_MCA_ess_base_jobid=1351352321",
				"SLURM_JOB_ID=9"), CPUs: cpus("0")},
			want: Info{Launcher: OpenMPI, JobID: "1351352321", Rank: 0, LocalRank: 0, Size: 2, LocalSize: 2, CPUBind: "core"},
			line: "openmpi job 1351352321, rank 0 (local 0) of 2, bind-to core: CPUs given 1 of 2 online (CPU 0, mask 0x1)",
		},
		{
			name: "taskset -c 1",
			in:   Inputs{Env: envOf(), CPUs: cpus("1")},
			want: Info{Launcher: Affinity, Rank: -1, LocalRank: -1, Size: -1, LocalSize: -1},
			line: "affinity mask narrower than the online CPUs (taskset, numactl or the parent process): CPUs given 1 of 2 online (CPU 1, mask 0x2)",
		},
		{
			name: "a container's cpuset",
			in: Inputs{CPUs: topology.ProcessCPUs{Online: set("0-7"), Cgroup: set("2-3"), CgroupFile: "/sys/fs/cgroup/cpuset.cpus.effective",
				Mask: set("2-3")}},
			want: Info{Launcher: Cgroup, Rank: -1, LocalRank: -1, Size: -1, LocalSize: -1},
			line: "cgroup cpuset /sys/fs/cgroup/cpuset.cpus.effective CPUs 2-3: CPUs given 2 of 8 online (CPUs 2-3, mask 0xc)",
		},
		{
			name: "taskset inside a container",
			in:   Inputs{CPUs: topology.ProcessCPUs{Online: set("0-7"), Cgroup: set("2-3"), Mask: set("3")}},
			want: Info{Launcher: Affinity, Rank: -1, LocalRank: -1, Size: -1, LocalSize: -1},
		},
		{
			name: "nothing",
			in:   Inputs{Env: envOf("OMPI_COMM_WORLD_RANK= "), CPUs: cpus("0-1")},
			want: Info{Launcher: None, Rank: -1, LocalRank: -1, Size: -1, LocalSize: -1},
			line: "none: CPUs given 2 of 2 online (CPUs 0-1, mask 0x3)",
		},
		{
			name: "no mask known",
			in:   Inputs{Env: envOf("SLURM_JOB_ID=3")},
			want: Info{Launcher: Slurm, JobID: "3", Rank: -1, LocalRank: -1, Size: -1, LocalSize: -1},
			line: "slurm job 3: CPUs given unknown",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := DetectFrom(c.in)
			want := c.want
			want.Mask, want.Online, want.Cgroup, want.CgroupFile = c.in.CPUs.Mask, c.in.CPUs.Online, c.in.CPUs.Cgroup, c.in.CPUs.CgroupFile
			if !same(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if c.line != "" && got.String() != c.line {
				t.Errorf("String:\n got %s\nwant %s", got, c.line)
			}
		})
	}
}

func same(a, b Info) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestDetectNotes(t *testing.T) {
	got := DetectFrom(Inputs{Env: envOf("SLURM_JOB_ID=1", "SLURM_PROCID=x", "SLURM_LOCALID=0", "SLURM_CPU_BIND_TYPE=mask_cpu:",
		"SLURM_CPU_BIND_LIST=0xg", "SLURM_TASKS_PER_NODE=2(x"), CPUs: cpus("0")})
	if got.Rank != -1 || !got.TaskCPUs.IsEmpty() || got.LocalSize != -1 || len(got.Notes) != 3 {
		t.Errorf("%+v", got)
	}
	for _, n := range got.Notes {
		if !strings.Contains(n, "ignored") {
			t.Errorf("note %q", n)
		}
	}
}

func TestWarnings(t *testing.T) {
	slurm := func(mask string, kv ...string) Info {
		return DetectFrom(Inputs{Env: envOf(append([]string{"SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_LOCALID=0"}, kv...)...), CPUs: cpus(mask)})
	}
	for _, c := range []struct {
		name    string
		info    Info
		workers int
		bound   []topology.CPUSet
		want    []string // one substring per warning
	}{
		{"agrees", slurm("1", "SLURM_CPU_BIND_TYPE=mask_cpu:", "SLURM_CPU_BIND_LIST=0x2"), 1, []topology.CPUSet{set("1")}, nil},
		{"unbound workers agree", slurm("0-1"), 2, []topology.CPUSet{{}, {}}, nil},
		{"more workers than CPUs", slurm("1"), 3, nil, []string{"3 workers for the 1 CPU this process was given (1)"}},
		{"worker outside the mask", slurm("1"), 2, []topology.CPUSet{set("1"), set("0-1")}, []string{"worker 1 bound to CPUs 0 outside", "2 workers"}},
		{"cpus-per-task above the mask", slurm("1", "SLURM_CPUS_PER_TASK=2"), 1, nil, []string{"SLURM_CPUS_PER_TASK=2 but the process may run on 1 CPU (1): the binding is narrower"}},
		{"cpus-per-task below the mask", slurm("0-1", "SLURM_CPUS_PER_TASK=1"), 1, nil, []string{"CPUs allocated to other tasks"}},
		{"mask changed after launch", slurm("0", "SLURM_CPU_BIND_TYPE=mask_cpu:", "SLURM_CPU_BIND_LIST=0x2"), 1, nil, []string{"bound this task to CPUs 1 (mask 0x2) but the process may run on 0"}},
		{"two unbound tasks", slurm("0-1", "SLURM_CPU_BIND_TYPE=none", "SLURM_STEP_TASKS_PER_NODE=2"), 2, nil, []string{"2 tasks on this node and no CPU binding"}},
		{"two unbound ranks", DetectFrom(Inputs{Env: envOf("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_hwloc_base_binding_policy=none"), CPUs: cpus("0-1")}),
			2, nil, []string{"2 tasks on this node and no CPU binding"}},
		{"mask unknown", DetectFrom(Inputs{}), 64, []topology.CPUSet{set("0-63")}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.info.Warnings(c.workers, c.bound...)
			if len(got) != len(c.want) {
				t.Fatalf("%d warnings, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			for _, w := range c.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
					t.Errorf("no warning says %q:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

var hexCases = []struct {
	in   string
	want string // CPU list; "!" for an error
}{
	{"0x1", "0"}, {"0x2", "1"}, {"0x3", "0-1"}, {"3", "0-1"}, {"0xF0", "4-7"}, {"0x0", ""},
	{"0x10000000000000001", "0,64"}, {" 0x8 ", "3"}, {"0x", "!"}, {"", "!"}, {"0xg", "!"}, {"-1", "!"},
}

func TestParseHexMask(t *testing.T) {
	for _, c := range hexCases {
		got, err := ParseHexMask(c.in)
		if c.want == "!" {
			if err == nil {
				t.Errorf("%q: %s, want an error", c.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(set(c.want)) {
			t.Errorf("%q: %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func FuzzParseHexMask(f *testing.F) {
	for _, c := range hexCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseHexMask(s)
		if err != nil {
			return
		}
		back, err := ParseHexMask(HexMask(got))
		if err != nil || !back.Equal(got) {
			t.Errorf("%q -> %s -> %s -> %s, %v", s, got, HexMask(got), back, err)
		}
	})
}

func TestHexMask(t *testing.T) {
	for in, want := range map[string]string{"": "0x0", "0": "0x1", "1": "0x2", "0-1": "0x3", "64": "0x10000000000000000", "0,65": "0x20000000000000001"} {
		if got := HexMask(set(in)); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

// machine is a one-node machine of four CPUs whose process may use allowed.
func machine(allowed string) *topology.Topology {
	all := set("0-3")
	t := &topology.Topology{Source: "test", Online: all, Allowed: set(allowed), AllowedMems: set("0"),
		Nodes:    []topology.Node{{ID: 0, CPUs: all, MemoryBytes: 1 << 30, HasCPUs: true, HasMemory: true, Allowed: true, Locality: all}},
		Packages: []topology.Package{{ID: 0, CPUs: all}}}
	for c := range 4 {
		t.CPUs = append(t.CPUs, topology.CPU{ID: c, OS: c, Package: 0, Die: -1, Cluster: -1, Core: c, Siblings: topology.NewCPUSet(c),
			LastLevelCache: -1, Allowed: t.Allowed.Has(c)})
		t.Cores = append(t.Cores, topology.Core{ID: c, CPUs: topology.NewCPUSet(c)})
	}
	return t
}

func TestSynthetic(t *testing.T) {
	for _, c := range []struct {
		spec, allowed string
		nodes         []int  // the nodes with allowed CPUs
		osCPUs        string // the OS CPUs they run on
	}{
		{"2x2", "0-3", []int{0, 1}, "0-3"},
		{"2x2", "2-3", []int{1}, "2-3"},
		{"2x2", "1-2", []int{0, 1}, "1-2"},
		{"4x1", "3", []int{3}, "3"},
		{"0-1;2-3", "2", []int{1}, "2"},
	} {
		st, err := Synthetic(c.spec, machine(c.allowed))
		if err != nil {
			t.Fatalf("%s on %s: %v", c.spec, c.allowed, err)
		}
		var nodes []int
		var osCPUs topology.CPUSet
		for _, n := range st.ComputeNodes() {
			nodes = append(nodes, n.ID)
			osCPUs = osCPUs.Or(st.OSCPUs(n.CPUs))
		}
		if !slices.Equal(nodes, c.nodes) || !osCPUs.Equal(set(c.osCPUs)) {
			t.Errorf("%s on %s: nodes %v on OS CPUs %s, want %v on %s", c.spec, c.allowed, nodes, osCPUs, c.nodes, c.osCPUs)
		}
		// What topology.Synthetic does with the same spec: the whole
		// synthetic machine on the allowed CPUs.
		plain, err := topology.Synthetic(c.spec, machine(c.allowed))
		if err == nil && len(plain.ComputeNodes()) < len(c.nodes) {
			t.Errorf("%s on %s: topology.Synthetic has fewer nodes (%d)", c.spec, c.allowed, len(plain.ComputeNodes()))
		}
	}
	if _, err := Synthetic("0x1", machine("0")); err == nil {
		t.Error("bad spec accepted")
	}
	if _, err := Synthetic("1x2", machine("3")); err == nil {
		t.Error("a spec with no allowed CPU accepted")
	}
	if _, err := Synthetic("1x1", nil); err == nil {
		t.Error("nil topology accepted")
	}
}

func TestKindText(t *testing.T) {
	for k := None; k <= Affinity; k++ {
		b, _ := k.MarshalText()
		var back Kind
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("%v: %s -> %v, %v", k, b, back, err)
		}
	}
	if err := new(Kind).UnmarshalText([]byte("pbs")); err == nil {
		t.Error("unknown kind accepted")
	}
	if s := Kind(9).String(); s != "Kind(9)" {
		t.Error(s)
	}
}
