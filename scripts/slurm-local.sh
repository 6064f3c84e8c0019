#!/usr/bin/env bash
# slurm-local.sh: a real one-node Slurm on this machine, up for as long as
# a command runs.
#
#   scripts/slurm-local.sh [--no-install] [-- CMD [ARGS...]]
#
# Installs munge, slurmctld, slurmd and slurm-client with apt-get when they
# are missing (unless --no-install), writes a minimal slurm.conf for this
# machine into a temporary directory (the node line from `slurmd -C`, so
# its real CPUs, sockets, cores and threads; TaskPlugin=task/affinity so
# that --cpu-bind is enforced with sched_setaffinity;
# ProctrackType=proctrack/linuxproc and no cgroup plugin, which rarely work
# in a container), starts munged, slurmctld and slurmd as root, waits until
# sinfo shows the node idle, runs CMD with SLURM_CONF pointing at that
# configuration, then stops every daemon it started and removes the
# directory, whatever happens (trap).
#
# Without CMD it runs `sinfo` and `srun -n1 hostname` as a smoke check.
#
# Exit status: CMD's; 126 when the packages could not be installed; 125
# when Slurm did not come up (the daemons' logs are printed); 2 on bad
# usage. The daemons use their default ports (6817, 6818): a Slurm already
# running here is refused rather than disturbed.
set -euo pipefail

install=1
while [ $# -gt 0 ]; do
  case $1 in
    --no-install) install=0; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "slurm-local: unknown argument $1 (want [--no-install] [-- CMD ARGS...])" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || set -- sh -c 'sinfo && srun -n1 hostname'

say() { echo "slurm-local: $*" >&2; }

[ "$(id -u)" = 0 ] || { say "must run as root (the daemons do, as in CI)"; exit 2; }

missing=()
for c in munged slurmctld slurmd sinfo srun sbatch; do
  command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ $install = 0 ] || ! command -v apt-get >/dev/null; then
    say "missing ${missing[*]} (install munge slurmctld slurmd slurm-client)"; exit 126
  fi
  say "installing munge slurmctld slurmd slurm-client"
  start=$SECONDS
  # Keep the packages' init scripts from starting daemons: this script
  # starts its own and leaves nothing running.
  policy=/usr/sbin/policy-rc.d own_policy=0
  if [ ! -e $policy ]; then
    printf '#!/bin/sh\nexit 101\n' >$policy && chmod +x $policy && own_policy=1
  fi
  ok=1
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    munge slurmctld slurmd slurm-client) >/dev/null || ok=0
  [ $own_policy = 1 ] && rm -f $policy
  [ $ok = 1 ] || { say "apt-get install failed"; exit 126; }
  say "installed in $((SECONDS - start)) s"
fi

for port in 6817 6818; do
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
    say "port $port is in use: is a Slurm already running here? (stop it first)"; exit 125
  fi
done

dir=$(mktemp -d /tmp/slurm-local.XXXXXX)
chmod 755 "$dir"
pids=()
cleanup() {
  local rc=$?
  set +e
  # Let jobs end (the node leaves "completing" once their steps are
  # gone), ask the daemons to stop, then make sure: every daemon by the
  # pid we started.
  if [ -n "${SLURM_CONF:-}" ] && [ ${#pids[@]} -gt 1 ]; then
    timeout 10 scancel --full --quiet --user=root 2>/dev/null
    for _ in $(seq 100); do
      [ -z "$(timeout 5 squeue -h 2>/dev/null)" ] &&
        ! timeout 5 sinfo -h -o %T 2>/dev/null | grep -q complet && break
      sleep 0.1
    done
    timeout 10 scontrol shutdown >/dev/null 2>&1
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  # Job steps that outlived slurmd (a stuck job): their stepd and tasks
  # have our spool directory in their environment or command line.
  for p in $(pgrep -x slurmstepd); do
    grep -qs "$dir" "/proc/$p/environ" "/proc/$p/cmdline" && kill -9 "$p" 2>/dev/null
  done
  # A step daemon that just ended is reaped by init, not by us: give it
  # a moment, so that nothing of ours is listed when this script returns.
  for _ in $(seq 50); do pgrep -x slurmstepd >/dev/null || break; sleep 0.1; done
  rm -rf "$dir"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

host=$(hostname -s)
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 700 "$dir/munge"

# munge: a fresh key, its own socket, run as root (--force).
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --foreground --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" \
  >/dev/null 2>&1 &
pids+=($!)

# The node as slurmd sees it: "NodeName=h CPUs=2 Boards=1 SocketsPerBoard=1
# CoresPerSocket=2 ThreadsPerCore=1 RealMemory=23975".
node=$(slurmd -C | head -1)
case $node in NodeName=*) ;; *) say "slurmd -C said: $node"; exit 125 ;; esac
node=$(echo "$node" | sed -E 's/ RealMemory=[0-9]+//')

export SLURM_CONF=$dir/slurm.conf
cat >"$SLURM_CONF" <<EOF
# A one-node Slurm written by scripts/slurm-local.sh.
ClusterName=numapool
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

for _ in $(seq 50); do [ -S "$dir/munge/socket" ] && break; sleep 0.1; done
slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$dir/slurmd.out" 2>&1 &
pids+=($!)

up=0 start=$SECONDS
while [ $((SECONDS - start)) -lt 60 ]; do
  state=$(timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null || true)
  case $state in idle*) up=1; break ;; esac
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || break 2; done
  sleep 0.5
done
if [ $up = 0 ]; then
  say "Slurm did not come up (node state: ${state:-none}); logs:"
  for f in "$dir"/munge/munged.log "$dir"/slurmctld.out "$dir"/slurmctld.log "$dir"/slurmd.out "$dir"/slurmd.log; do
    [ -s "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }
  done
  exit 125
fi
say "up in $((SECONDS - start)) s: node $host idle ($(echo "$node" | grep -o 'CPUs=[0-9]*'))"

set +e
"$@"
rc=$?
set -e
exit $rc
