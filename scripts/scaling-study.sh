#!/usr/bin/env bash
# scaling-study.sh: run `numapool bench --scale` on this machine and write a
# dated report: report.md (the machine, the plan, a table per workload of
# time or throughput, speedup and parallel efficiency at 1, 2, 4, ... CPUs,
# the locality bound where there are several nodes), scaling.svg (speedup
# against workers) and scaling.json (the whole study).
#
#   scripts/scaling-study.sh [-o DIR] [-p compact|scatter] [-w W,...] [-c C,...] [-r REPS] [-s SIZE] [-m MAXCPUS] [-h]
#
#   -o DIR      where the report goes (default bench-results/scaling-HOST-DATE)
#   -p PLACE    compact (default: fill a node before the next) or scatter
#               (round robin over nodes)
#   -w W,...    workloads (default: the study's, see numapool help bench)
#   -c C,...    contenders (default: the study's; sequential is always added)
#   -r REPS     repetitions per contender at each point (default 3)
#   -s SIZE     quick (default), full, or a factor such as 0.2
#   -m MAXCPUS  stop at this many CPUs (default: all this process may use)
#   -h          print this help
#
# Each point runs in a fresh process bound to the point's CPUs with
# GOMAXPROCS set to their count, so every contender at a point has the same
# CPUs. The defaults are chosen to finish within about 10 minutes on
# machines from 2 to a few hundred CPUs; the report says how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

out= place=compact workloads= contenders= reps=3 size=quick maxcpus=0
while getopts "o:p:w:c:r:s:m:h" opt; do
  case $opt in
    o) out=$OPTARG ;;
    p) place=$OPTARG ;;
    w) workloads=$OPTARG ;;
    c) contenders=$OPTARG ;;
    r) reps=$OPTARG ;;
    s) size=$OPTARG ;;
    m) maxcpus=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "scaling-study: unexpected argument $1" >&2; exit 2; }

export PATH="/usr/local/go/bin:$PATH"
host=$(hostname -s 2>/dev/null || echo host)
stamp=$(date +%Y-%m-%d-%H%M)
out=${out:-bench-results/scaling-$host-$stamp}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/numapool
go build -o "$bin" ./cmd/numapool

args=(bench --scale --placement "$place" --reps "$reps" --size "$size" --max-cpus "$maxcpus")
[ -z "$workloads" ] || args+=(--workload "$workloads")
[ -z "$contenders" ] || args+=(--contender "$contenders")

# The plan first: a bad flag fails here, in a second.
"$bin" "${args[@]}" --dry-run >"$out/plan.txt"
"$bin" topo >"$out/topo.txt"

readable() { if [ -r "$1" ]; then cat "$1"; else echo "not readable ($1)"; fi; }
governor() {
  local f=/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
  if [ -r "$f" ]; then
    sort /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | uniq -c | awk '{printf "%s%s on %d CPUs", (NR>1 ? ", " : ""), $2, $1} END {print ""}'
  else
    echo "not readable (no cpufreq in sysfs: a virtual machine, or frequency not under the kernel's control)"
  fi
}
{
  echo "kernel: $(uname -srm)"
  echo "transparent huge pages: enabled $(readable /sys/kernel/mm/transparent_hugepage/enabled), defrag $(readable /sys/kernel/mm/transparent_hugepage/defrag)"
  echo "CPU frequency governor: $(governor)"
  echo "Go: $(go version | cut -d' ' -f3-)"
  echo "numapool: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
} >"$out/machine.txt"

echo "scaling-study: $(grep -c '^point' "$out/plan.txt") points, writing $out" >&2
start=$(date +%s)
"$bin" "${args[@]}" --json --plot "$out/scaling.svg" >"$out/scaling.json"
elapsed=$(($(date +%s) - start))

python3 - "$out" "$elapsed" "$stamp" <<'EOF'
import json, os, sys
out, elapsed, stamp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rep = json.load(open(os.path.join(out, "scaling.json")))
def read(name):
    return open(os.path.join(out, name)).read().rstrip("\n")
def num(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"
md = [f"# numapool scaling study, {stamp}", "", "## Machine", "", "```", read("machine.txt"), "```", "",
      "`numapool topo`:", "", "```", read("topo.txt"), "```", "",
      "## Plan", "", f"Placement {rep['placement']}, size {rep['size']}, {rep['reps']} repetitions per contender at each point. "
      "Each point is a fresh process bound to its CPUs with GOMAXPROCS set to their count "
      "(the commands below have the same effect; the study sets the mask and memory policy itself).", "",
      "```", read("plan.txt"), "```", "", "## Results", "",
      "Speedup: how many times faster than sequential code on one CPU (for a throughput, the ratio of throughputs); "
      "efficiency: speedup per worker (100 % is perfect scaling).", ""]
workloads = []
for r in rep["rows"]:
    if r["workload"] not in workloads:
        workloads.append(r["workload"])
for w in workloads:
    rows = [r for r in rep["rows"] if r["workload"] == w]
    unit = rows[0]["unit"]
    md += [f"### {w}", "", f"| contender | workers | median {unit} | min–max | speedup | efficiency |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r.get("na"):
            md.append(f"| {r['contender']} | {r['workers']} | n/a | | | {r['na']} |")
            continue
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        ef = f"{100 * r['efficiency']:.0f} %" if r.get("efficiency") else "-"
        md.append(f"| {r['contender']} | {r['workers']} | {num(r['median'])} | {num(r['min'])}–{num(r['max'])} | {sp} | {ef} |")
    md.append("")
if rep.get("locality_bounds"):
    md += ["### Locality bound", "", "One node's CPUs, all memory bound to that node (local), then to the farthest node (remote): "
           "the most that placing memory well can give on this machine.", "",
           "| workload | contender | workers | CPUs on | local | remote | gain |", "| --- | --- | ---: | --- | ---: | ---: | ---: |"]
    for b in rep["locality_bounds"]:
        md.append(f"| {b['workload']} | {b['contender']} | {b['workers']} | node {b['cpu_node']} | {num(b['local'])} {b['unit']} | "
                  f"{num(b['remote'])} {b['unit']} (node {b['far_node']}, distance {b.get('distance', '?')}) | {b['gain']:.2f}x |")
    md.append("")
for n in rep.get("notes") or []:
    md += [f"Note: {n}", ""]
md += ["![speedup against workers](scaling.svg)", "", f"The study took {elapsed} s (measured; the plan and the machine description not included).", ""]
open(os.path.join(out, "report.md"), "w").write("\n".join(md))
EOF
echo "scaling-study: took ${elapsed} s; report in $out/report.md" >&2
echo "$out/report.md"
