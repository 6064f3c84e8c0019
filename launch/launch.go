package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/numapool/numapool/topology"
)

// Kind is what gave the process its CPUs.
type Kind int

const (
	// None: nothing narrowed the process; it may run on every online CPU.
	None Kind = iota
	// Slurm: started by srun, or a batch script of sbatch (SLURM_JOB_ID).
	Slurm
	// OpenMPI: started by Open MPI's mpirun (OMPI_COMM_WORLD_RANK).
	OpenMPI
	// Cgroup: no launcher says so, but the cgroup cpuset the process lives
	// in is narrower than the online CPUs (a container, systemd's
	// AllowedCPUs, a batch system's cgroup).
	Cgroup
	// Affinity: no launcher says so, but the affinity mask is narrower
	// than the cgroup cpuset or the online CPUs (taskset, numactl, or a
	// parent process that narrowed its own).
	Affinity
)

var kindNames = [...]string{"none", "slurm", "openmpi", "cgroup", "affinity"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// MarshalText encodes k by its name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a name that String returns.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if string(b) == n {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("launch: unknown launcher kind %q", b)
}

// Info is how the process was launched and which CPUs it was given. Its
// zero value describes nothing known: numbers the launcher does not give
// are -1 (Rank, LocalRank, Size, LocalSize) or 0 (CPUsPerTask), strings
// are empty, sets are empty.
type Info struct {
	Launcher  Kind   `json:"launcher"`
	JobID     string `json:"job_id,omitempty"`  // SLURM_JOB_ID, or Open MPI's job (OMPI_MCA_ess_base_jobid)
	StepID    string `json:"step_id,omitempty"` // SLURM_STEP_ID; "" in a batch script
	Rank      int    `json:"rank"`              // SLURM_PROCID, OMPI_COMM_WORLD_RANK
	LocalRank int    `json:"local_rank"`        // SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK
	Size      int    `json:"size"`              // SLURM_NTASKS, OMPI_COMM_WORLD_SIZE
	LocalSize int    `json:"local_size"`        // tasks on this node: SLURM_STEP_TASKS_PER_NODE, OMPI_COMM_WORLD_LOCAL_SIZE

	// CPUBind is the binding as the launcher states it: Slurm's
	// SLURM_CPU_BIND_TYPE and SLURM_CPU_BIND_LIST ("mask_cpu:0x1,0x2",
	// "none"; srun turns --cpu-bind=cores into the masks it computed),
	// Open MPI's binding policy ("core", "socket", "none"). "" when the
	// launcher does not say.
	CPUBind string `json:"cpu_bind,omitempty"`
	// TaskCPUs are the CPUs the launcher says it bound this task to:
	// Slurm's entry of SLURM_CPU_BIND_LIST for this local rank. Empty when
	// it does not say (no binding, Open MPI, ldom binding).
	TaskCPUs topology.CPUSet `json:"task_cpus"`
	// CPUsPerTask is SLURM_CPUS_PER_TASK (srun -c, sbatch -c), 0 if unset.
	CPUsPerTask int `json:"cpus_per_task,omitempty"`

	Mask       topology.CPUSet `json:"mask"`   // the CPUs the process may run on: its affinity mask at start
	Online     topology.CPUSet `json:"online"` // the machine's online CPUs
	Cgroup     topology.CPUSet `json:"cgroup"` // the cgroup cpuset's CPUs; empty when unknown
	CgroupFile string          `json:"cgroup_file,omitempty"`

	// Notes lists launcher variables that could not be read, quoted.
	Notes []string `json:"notes,omitempty"`
}

// Inputs are what Detect reads, for DetectFrom.
type Inputs struct {
	// Env looks up an environment variable (os.LookupEnv).
	Env func(name string) (string, bool)
	// CPUs are the process's online CPUs, cgroup cpuset and affinity mask
	// (topology.ReadProcessCPUs).
	CPUs topology.ProcessCPUs
}

// Detect describes how this process was launched, from its environment
// and the CPU sets topology.ReadProcessCPUs reads. It never fails: what it
// cannot tell is left unknown.
func Detect() Info {
	return DetectFrom(Inputs{Env: os.LookupEnv, CPUs: topology.ReadProcessCPUs()})
}

// DetectFrom is Detect on the given inputs. Open MPI's variables win over
// Slurm's (mpirun inside a Slurm allocation placed the process itself);
// without a launcher, a cgroup cpuset or an affinity mask narrower than
// the online CPUs is reported as such.
func DetectFrom(in Inputs) Info {
	env := in.Env
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	get := func(name string) (string, bool) {
		v, ok := env(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	info := Info{Rank: -1, LocalRank: -1, Size: -1, LocalSize: -1,
		Mask: in.CPUs.Mask, Online: in.CPUs.Online, Cgroup: in.CPUs.Cgroup, CgroupFile: in.CPUs.CgroupFile}
	num := func(dst *int, name string) {
		v, ok := get(name)
		if !ok {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			info.Notes = append(info.Notes, fmt.Sprintf("%s=%s: not a count: ignored", name, strconv.Quote(shorten(v))))
			return
		}
		*dst = n
	}

	if _, ok := get("OMPI_COMM_WORLD_RANK"); ok {
		info.Launcher = OpenMPI
		num(&info.Rank, "OMPI_COMM_WORLD_RANK")
		num(&info.LocalRank, "OMPI_COMM_WORLD_LOCAL_RANK")
		num(&info.Size, "OMPI_COMM_WORLD_SIZE")
		num(&info.LocalSize, "OMPI_COMM_WORLD_LOCAL_SIZE")
		info.JobID, _ = get("OMPI_MCA_ess_base_jobid")
		info.CPUBind, _ = get("OMPI_MCA_hwloc_base_binding_policy")
		return info
	}
	if id, ok := get("SLURM_JOB_ID"); ok {
		info.Launcher = Slurm
		info.JobID = id
		info.StepID, _ = get("SLURM_STEP_ID")
		num(&info.Rank, "SLURM_PROCID")
		num(&info.LocalRank, "SLURM_LOCALID")
		num(&info.Size, "SLURM_NTASKS")
		if info.Size < 0 {
			num(&info.Size, "SLURM_NPROCS")
		}
		num(&info.CPUsPerTask, "SLURM_CPUS_PER_TASK")
		info.slurmLocalSize(get)
		info.slurmBind(get)
		return info
	}
	switch {
	case !info.Cgroup.IsEmpty() && !info.Online.IsEmpty() && !info.Online.IsSubsetOf(info.Cgroup) &&
		(info.Mask.IsEmpty() || info.Online.And(info.Cgroup).IsSubsetOf(info.Mask)):
		info.Launcher = Cgroup
	case !info.Mask.IsEmpty() && !info.Online.IsEmpty() && !info.Online.IsSubsetOf(info.Mask):
		info.Launcher = Affinity
	}
	return info
}

// slurmBind reads the binding srun applied. srun exports it as
// SLURM_CPU_BIND_TYPE ("mask_cpu:", "map_cpu:", "none", "mask_ldom:", ...)
// and SLURM_CPU_BIND_LIST, one entry per local task, reused cyclically
// when there are fewer entries than tasks ("0x1,0x2" for mask_cpu, "0,1"
// for map_cpu). A batch script's own step has neither.
func (info *Info) slurmBind(get func(string) (string, bool)) {
	typ, ok := get("SLURM_CPU_BIND_TYPE")
	if !ok {
		return
	}
	list, _ := get("SLURM_CPU_BIND_LIST")
	typ = strings.TrimSuffix(strings.TrimPrefix(typ, "verbose,"), ",")
	info.CPUBind = typ
	if strings.HasSuffix(typ, ":") {
		info.CPUBind += list
	}
	entries := strings.Split(list, ",")
	if list == "" || info.LocalRank < 0 {
		return
	}
	entry := entries[info.LocalRank%len(entries)]
	var set topology.CPUSet
	var err error
	switch strings.TrimSuffix(typ, ":") {
	case "mask_cpu":
		set, err = ParseHexMask(entry)
	case "map_cpu":
		var n int
		if n, err = strconv.Atoi(entry); err == nil && n >= 0 && n < topology.MaxCPU {
			set = topology.NewCPUSet(n)
		} else if err == nil {
			err = fmt.Errorf("CPU %d out of range", n)
		}
	default:
		return // none, ldom and socket masks name no CPUs
	}
	if err != nil {
		info.Notes = append(info.Notes, fmt.Sprintf("SLURM_CPU_BIND_LIST=%s: entry %d: %v: ignored", strconv.Quote(shorten(list)), info.LocalRank, err))
		return
	}
	info.TaskCPUs = set
}

// slurmLocalSize reads this node's task count from
// SLURM_STEP_TASKS_PER_NODE (srun) or SLURM_TASKS_PER_NODE (the job):
// "2", "2(x3),1" — counts per node, in node order, "(xN)" repeating one N
// times — indexed by SLURM_NODEID.
func (info *Info) slurmLocalSize(get func(string) (string, bool)) {
	v, ok := get("SLURM_STEP_TASKS_PER_NODE")
	if !ok {
		if v, ok = get("SLURM_TASKS_PER_NODE"); !ok {
			return
		}
	}
	node := 0
	if s, ok := get("SLURM_NODEID"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return
		}
		node = n
	}
	for _, part := range strings.Split(v, ",") {
		count, times := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			count, times = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(times)
		if err1 != nil || err2 != nil || c < 0 || r < 1 {
			info.Notes = append(info.Notes, fmt.Sprintf("tasks per node %s: ignored", strconv.Quote(shorten(v))))
			return
		}
		if node < r {
			info.LocalSize = c
			return
		}
		node -= r
	}
}

// ParseHexMask parses a CPU mask as Slurm and Open MPI print them: hex
// digits with an optional 0x, CPU 0 in the lowest bit ("0x3" is CPUs
// 0-1), of any length.
func ParseHexMask(s string) (topology.CPUSet, error) {
	h := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	if h == "" {
		return topology.CPUSet{}, fmt.Errorf("mask %s: no hex digits", strconv.Quote(shorten(s)))
	}
	if len(h) > topology.MaxCPU/4 {
		return topology.CPUSet{}, fmt.Errorf("mask %s: more than %d CPUs", strconv.Quote(shorten(s)), topology.MaxCPU)
	}
	var set topology.CPUSet
	for i := range len(h) {
		d, err := strconv.ParseUint(h[len(h)-1-i:len(h)-i], 16, 8)
		if err != nil {
			return topology.CPUSet{}, fmt.Errorf("mask %s: %q is not a hex digit", strconv.Quote(shorten(s)), h[len(h)-1-i])
		}
		for bit := range 4 {
			if d&(1<<bit) != 0 {
				set.Add(4*i + bit)
			}
		}
	}
	return set, nil
}

// HexMask prints set as a hex mask, CPU 0 in the lowest bit ("0x3");
// "0x0" for the empty set.
func HexMask(set topology.CPUSet) string {
	words := set.Mask()
	if len(words) == 0 {
		return "0x0"
	}
	var b strings.Builder
	b.WriteString("0x")
	fmt.Fprintf(&b, "%x", words[len(words)-1])
	for i := len(words) - 2; i >= 0; i-- {
		fmt.Fprintf(&b, "%016x", words[i])
	}
	return b.String()
}

// String describes the launch on one line, for instance
//
//	slurm job 42 step 0, rank 1 (local 1) of 2, cpu-bind=mask_cpu:0x1,0x2: CPUs given 1 of 2 online (CPU 1, mask 0x2)
func (info Info) String() string {
	var b strings.Builder
	b.WriteString(info.Launcher.String())
	switch info.Launcher {
	case Slurm, OpenMPI:
		if info.JobID != "" {
			fmt.Fprintf(&b, " job %s", info.JobID)
			if info.StepID != "" {
				fmt.Fprintf(&b, " step %s", info.StepID)
			}
			b.WriteString(",")
		}
		if info.Rank >= 0 {
			fmt.Fprintf(&b, " rank %d", info.Rank)
			if info.LocalRank >= 0 {
				fmt.Fprintf(&b, " (local %d)", info.LocalRank)
			}
			if info.Size >= 0 {
				fmt.Fprintf(&b, " of %d", info.Size)
			}
			b.WriteString(",")
		}
		switch {
		case info.Launcher == Slurm && info.CPUBind != "":
			fmt.Fprintf(&b, " cpu-bind=%s,", info.CPUBind)
		case info.Launcher == OpenMPI && info.CPUBind != "":
			fmt.Fprintf(&b, " bind-to %s,", info.CPUBind)
		}
		if info.CPUsPerTask > 0 {
			fmt.Fprintf(&b, " cpus-per-task %d,", info.CPUsPerTask)
		}
	case Cgroup:
		fmt.Fprintf(&b, " cpuset %s CPUs %s,", info.CgroupFile, info.Cgroup)
	case Affinity:
		b.WriteString(" mask narrower than the online CPUs (taskset, numactl or the parent process),")
	}
	s := strings.TrimSuffix(b.String(), ",")
	if info.Mask.IsEmpty() {
		return s + ": CPUs given unknown"
	}
	online := ""
	if !info.Online.IsEmpty() {
		online = fmt.Sprintf(" of %d online", info.Online.Len())
	}
	return fmt.Sprintf("%s: CPUs given %d%s (%s %s, mask %s)", s, info.Mask.Len(), online, plural(info.Mask), info.Mask, HexMask(info.Mask))
}

func plural(set topology.CPUSet) string {
	if set.Len() == 1 {
		return "CPU"
	}
	return "CPUs"
}

// shorten cuts a quoted value to a readable length.
func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
