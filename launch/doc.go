// Package launch tells a process how it was started and placed: by Slurm
// (srun, sbatch), by Open MPI's mpirun, or by whatever narrowed its CPUs
// (taskset, numactl, a cgroup cpuset), and which CPUs it was given.
//
// On a cluster a batch system starts one process per node or per socket
// and binds each to its CPUs (srun --cpu-bind, mpirun --bind-to). A pool
// in such a process takes its CPUs from the process's affinity mask, so it
// composes with the launcher by construction; this package lets the pool
// (Pool.Explain, numapool explain) and programs say where that mask came
// from, and warn where the pool's settings contradict it:
//
//	info := launch.Detect()
//	// slurm job 42 step 0, rank 1 (local 1) of 2, cpu-bind=mask_cpu:0x1,0x2:
//	// CPUs given 1 of 2 online (CPU 1, mask 0x2)
//	fmt.Println(info)
//	for _, w := range info.Warnings(p.Workers(), bound...) {
//		log.Print(w)
//	}
//
// Detection reads only the environment, the affinity mask the process
// started with, the online CPUs and the cgroup cpuset; DetectFrom takes
// those as Inputs, so that it can be tested without a launcher. Nothing
// here changes the process or its threads.
//
// Synthetic lays a synthetic topology spec over the whole node, as every
// rank on the node sees it, and keeps the CPUs this rank was given: a rank
// bound to the CPUs of one synthetic node then gets one worker group.
package launch
