package launch

import (
	"fmt"
	"strings"

	"github.com/numapool/numapool/topology"
)

// Warnings lists where a pool of the given number of workers, whose
// threads are bound to the given OS CPU sets (one per worker, in worker
// order; an empty set is an unbound worker), contradicts what the
// launcher gave the process:
//
//   - more workers than CPUs given (NUMAPOOL_NUM_WORKERS, WithWorkers or
//     a synthetic spec above the mask): workers take turns on the CPUs;
//   - a worker bound to CPUs outside the mask (a topology read elsewhere or
//     before the mask was narrowed): it runs where the launcher did not
//     put this process, on another rank's CPUs;
//   - SLURM_CPUS_PER_TASK different from the CPUs in the mask;
//   - the mask different from the CPUs the launcher says it bound the task
//     to (changed after launch);
//   - several tasks on the node and no binding: every task's pool takes
//     every CPU, so the tasks' workers share them.
//
// It returns nil when nothing contradicts.
func (info Info) Warnings(workers int, bound ...topology.CPUSet) []string {
	var out []string
	given := info.Mask.Len()
	if given > 0 && workers > given {
		out = append(out, fmt.Sprintf("%d workers for the %d %s this process was given (%s): workers take turns on them; ask for at most %d (NUMAPOOL_NUM_WORKERS, WithWorkers, a synthetic spec)",
			workers, given, plural(info.Mask), info.Mask, given))
	}
	if given > 0 {
		var outside []string
		var where topology.CPUSet
		for i, b := range bound {
			if !b.IsEmpty() && !b.IsSubsetOf(info.Mask) {
				outside = append(outside, fmt.Sprint(i))
				where = where.Or(b.AndNot(info.Mask))
			}
		}
		if len(outside) > 0 {
			if len(outside) > 8 {
				outside = append(outside[:8], "…")
			}
			out = append(out, fmt.Sprintf("worker %s bound to CPUs %s outside the %s this process was given (%s): the pool's topology does not match this process's mask",
				strings.Join(outside, ","), where, plural(info.Mask), info.Mask))
		}
	}
	if info.CPUsPerTask > 0 && given > 0 && info.CPUsPerTask != given {
		why := "the task may run on CPUs allocated to other tasks (no --cpu-bind, or --cpu-bind=none)"
		if given < info.CPUsPerTask {
			why = "the binding is narrower than the allocation"
		}
		out = append(out, fmt.Sprintf("SLURM_CPUS_PER_TASK=%d but the process may run on %d %s (%s): %s",
			info.CPUsPerTask, given, plural(info.Mask), info.Mask, why))
	}
	if !info.TaskCPUs.IsEmpty() && given > 0 && !info.TaskCPUs.Equal(info.Mask) {
		out = append(out, fmt.Sprintf("the launcher bound this task to CPUs %s (mask %s) but the process may run on %s: the mask was changed after launch",
			info.TaskCPUs, HexMask(info.TaskCPUs), info.Mask))
	}
	if info.LocalSize > 1 && given > 0 && info.unbound() {
		out = append(out, fmt.Sprintf("%d tasks on this node and no CPU binding: each task's pool takes all %d CPUs (%s), so the tasks' workers share them; bind (srun --cpu-bind=cores or sockets, mpirun --bind-to core or socket) or give each fewer workers",
			info.LocalSize, given, info.Mask))
	}
	return out
}

// unbound reports whether the launcher says it did not bind the task.
func (info Info) unbound() bool {
	switch info.Launcher {
	case Slurm:
		return info.CPUBind == "none" || (info.CPUBind == "" && info.StepID != "")
	case OpenMPI:
		return info.CPUBind == "none"
	}
	return false
}
