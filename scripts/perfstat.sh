#!/usr/bin/env bash
# perfstat.sh: run one workload under `perf stat` once per mode (contender)
# and print the counters side by side, with ratios to the first mode.
#
#   scripts/perfstat.sh [-w WORKLOAD] [-r REPS] [-s SIZE] [MODE...]
#
# MODE is a contender of `numapool bench` (default: numapool numapool-flat
# numapool-threads goroutines pond). Each mode runs alone
# (`numapool bench --mode MODE`), so the counters are its own.
#
# Counters: task-clock, context-switches, cpu-migrations, page-faults, and
# where the CPU exposes them cycles, instructions, cache-misses, node-loads,
# node-load-misses. A counter the machine does not support prints as
# "not supported", never as zero; the software ones still compare.
#
# Permissions: perf needs kernel.perf_event_paranoid <= 2 for a user's own
# processes (the Debian default; hardware events may need <= 1, or root).
# Check with `cat /proc/sys/kernel/perf_event_paranoid`; lower it with
# `sudo sysctl kernel.perf_event_paranoid=1`.
set -euo pipefail
cd "$(dirname "$0")/.."

workload=fib-12 reps=5 size=quick
while getopts "w:r:s:h" opt; do
  case $opt in
    w) workload=$OPTARG ;;
    r) reps=$OPTARG ;;
    s) size=$OPTARG ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(numapool numapool-flat numapool-threads goroutines pond)

if ! command -v perf >/dev/null 2>&1; then
  echo "perfstat: installing linux-perf" >&2
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq linux-perf) >/dev/null || true
  fi
  command -v perf >/dev/null 2>&1 || { echo "perfstat: perf is not installed and could not be" >&2; exit 1; }
fi

export PATH="/usr/local/go/bin:$PATH"
bin=$(mktemp -d)/numapool
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/numapool

events=task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions,cache-misses,node-loads,node-load-misses
out=$(dirname "$bin")
for m in "${modes[@]}"; do
  echo "perfstat: $workload on $m ($reps reps, size $size)" >&2
  perf stat -x, -e "$events" -o "$out/$m.perf" -- \
    "$bin" bench --mode "$m" --workload "$workload" --reps "$reps" --size "$size" --csv >"$out/$m.csv"
done

# perf -x, lines: value,unit,event,run-time,percentage,... ("<not supported>" as value).
python3 - "$out" "${modes[@]}" <<'EOF'
import csv, os, statistics, sys
out, modes = sys.argv[1], sys.argv[2:]
events = []
table = {}
for m in modes:
    table[m] = {}
    for line in open(os.path.join(out, m + ".perf")):
        if not line.strip() or line.startswith("#"):
            continue
        f = line.rstrip("\n").split(",")
        if len(f) < 3:
            continue
        value, event = f[0], f[2]
        if event not in events:
            events.append(event)
        table[m][event] = None if value.startswith("<") else float(value)
    vals = [float(r["value"]) for r in csv.DictReader(open(os.path.join(out, m + ".csv"))) if r["value"] and not r["na"]]
    nas = [r["na"] for r in csv.DictReader(open(os.path.join(out, m + ".csv"))) if r["na"]]
    table[m]["median result"] = statistics.median(vals) if vals else None
    if nas:
        table[m]["n/a"] = nas[0]
events.append("median result")
base = modes[0]
w = max(len(e) for e in events) + 2
print("".ljust(w) + "".join(m.rjust(22) for m in modes))
for e in events:
    row = e.ljust(w)
    for m in modes:
        v = table[m].get(e)
        if v is None:
            cell = "not supported" if e != "median result" else "n/a"
        else:
            b = table[base].get(e)
            cell = f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
            if m != base and b:
                cell += f" ({v / b:.2f}x)"
        row += cell.rjust(22)
    print(row)
print(f"\nratios are to {base}; 'median result' is the workload's own figure (see numapool bench).")
EOF
