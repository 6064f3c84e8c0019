#!/usr/bin/env bash
# cluster-suite.sh: cluster_test under a real one-node Slurm and Open MPI.
#
#   scripts/cluster-suite.sh [go test flags...]
#
# Installs openmpi-bin if mpirun is missing and (through
# scripts/slurm-local.sh) munge and Slurm, brings Slurm up, runs
# `go test ./cluster_test` with NUMAPOOL_REQUIRE_SLURM=1 and
# NUMAPOOL_REQUIRE_MPI=1 (a missing launcher fails instead of skipping),
# stops Slurm and checks that no slurmctld, slurmd, slurmstepd, munged or
# orted is left running. Prints the time of each part. Runs as root, as
# CI does. Exit status: the tests'; 1 when a daemon was left running; 126
# when a package could not be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

t0=$SECONDS
if ! command -v mpirun >/dev/null 2>&1; then
  echo "cluster-suite: installing openmpi-bin"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin) >/dev/null ||
    { echo "cluster-suite: apt-get install openmpi-bin failed"; exit 126; }
  echo "cluster-suite: openmpi-bin installed in $((SECONDS - t0)) s"
fi

# Root runs mpirun here, as in CI.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NUMAPOOL_REQUIRE_SLURM=1 NUMAPOOL_REQUIRE_MPI=1

t1=$SECONDS
rc=0
scripts/slurm-local.sh -- go test -count=1 -v "$@" ./cluster_test || rc=$?
echo "cluster-suite: Slurm up, tests and Slurm down in $((SECONDS - t1)) s (total $((SECONDS - t0)) s)"

left=""
for name in slurmctld slurmd slurmstepd munged orted; do # pgrep matches at most 15 characters of a pattern
  left+=$(pgrep -a -x "$name" || true)
done
if [ -n "$left" ]; then
  echo "cluster-suite: left running:"; echo "$left"
  [ $rc = 0 ] && rc=1
fi
exit $rc
