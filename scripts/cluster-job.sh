#!/bin/bash
# cluster-job.sh: a Slurm job of one numapool process per socket.
#
#   sbatch scripts/cluster-job.sh PROGRAM [ARGS...]
#
# Each task is bound to the cores of one socket (--cpu-bind=sockets) and
# the pool inside it takes exactly those: one worker group per NUMA node
# of the socket, one worker per CPU, no thread outside them. The first
# step prints each task's placement (numapool explain), the second runs
# PROGRAM, a program that uses numapool, in every task. numapool must be
# on the PATH. Set --ntasks-per-node to the sockets of a node and
# --cpus-per-task to the CPUs of a socket: the values below fit the
# one-socket, two-core machine scripts/cluster-suite.sh runs this job on.
#SBATCH --job-name=numapool
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --output=numapool-%j.out
set -eu
srun --label --cpu-bind=sockets numapool explain
srun --label --cpu-bind=sockets "$@"
