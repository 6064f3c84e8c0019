#!/usr/bin/env bash
# gomaxprocs-study.sh: does a pool gain from keeping no more workers than
# GOMAXPROCS? It answers the question for this machine, and needs nothing
# but the repository and Go.
#
#   scripts/gomaxprocs-study.sh [-r ROUNDS] [-s SIZE] [-w W,...] [-h]
#
#   -r ROUNDS  alternating rounds of the two pools (default 5)
#   -s SIZE    the suite's input size: quick (default), full, or a factor
#   -w W,...   workloads (default fib-12,reduce,pipeline-10us,pingpong,
#              pingpong-spaced,spawn: throughput and hand-off latency)
#   -h         print this help
#
# The machine is put under load as a container with a CPU quota sees it:
# GOMAXPROCS is half the CPUs the process may use (what Go 1.25+ sets by
# itself under such a quota), and busy loops hold the other half. Two
# pools then run the suite, round after round:
#
#   today      one worker per CPU (more workers than GOMAXPROCS);
#   following  as many workers as GOMAXPROCS (NUMAPOOL_NUM_WORKERS), which
#              is what a pool that follows GOMAXPROCS would run.
#
# It prints each workload's median per pool and their ratio (following
# over today, as the suite's unit goes: above 1 is better for "higher is
# better" workloads), and leaves every repetition in the CSV it names.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

rounds=5 size=quick workloads=fib-12,reduce,pipeline-10us,pingpong,pingpong-spaced,spawn
while getopts "r:s:w:h" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    s) size=$OPTARG ;;
    w) workloads=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "gomaxprocs-study: unexpected argument $1" >&2; exit 2; }

export PATH="/usr/local/go/bin:$PATH"
tmp=$(mktemp -d)
hogs=()
cleanup() {
  for h in "${hogs[@]}"; do kill "$h" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
bin=$tmp/numapool
go build -o "$bin" ./cmd/numapool

# The CPUs this process may use, as a list.
cpus=($(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))'))
n=${#cpus[@]}
if [ "$n" -lt 2 ]; then
  echo "gomaxprocs-study: $n CPU: nothing to halve" >&2
  exit 2
fi
half=$((n / 2))
busy=("${cpus[@]:$half}") # the load: the upper half, one busy loop on each
for c in "${busy[@]}"; do
  taskset -c "$c" sh -c 'while :; do :; done' &
  hogs+=($!)
done
echo "gomaxprocs-study: $n CPUs, GOMAXPROCS $half, busy loops on CPUs ${busy[*]}; $rounds rounds of $workloads, size $size" >&2

csv=${TMPDIR:-/tmp}/gomaxprocs-study-$(date +%Y%m%d-%H%M%S).csv
for r in $(seq "$rounds"); do
  for pool in today following; do
    workers=$n
    [ "$pool" = following ] && workers=$half
    GOMAXPROCS=$half NUMAPOOL_NUM_WORKERS=$workers "$bin" bench --workload "$workloads" \
      --contender numapool --reps 3 --size "$size" --csv 2>/dev/null |
      awk -F, -v pool="$pool" -v r="$r" 'NR > 1 { print pool "," r "," $1 "," $4 "," $5 }' >> "$csv"
  done
  echo "gomaxprocs-study: round $r of $rounds done" >&2
done

echo "workload,unit,today (median),following (median),following/today"
python3 - "$csv" <<'EOF'
import csv, statistics, sys
runs = {}
for pool, _, wl, value, unit in csv.reader(open(sys.argv[1])):
    runs.setdefault((wl, unit), {}).setdefault(pool, []).append(float(value))
for (wl, unit), by in runs.items():
    t, f = statistics.median(by["today"]), statistics.median(by["following"])
    print(f"{wl},{unit},{t:.4g},{f:.4g},{f / t:.3f}")
EOF
echo "gomaxprocs-study: every repetition is in $csv" >&2
