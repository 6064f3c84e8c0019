#!/usr/bin/env bash
# perfstat.sh: run one workload under `perf stat` for each mode (contender)
# in alternating rounds and print, per counter and for the workload's own
# figure, the median and min-max over the rounds, with the ratio of each
# mode's median to the first mode's.
#
#   scripts/perfstat.sh [-w WORKLOAD] [-r REPS] [-s SIZE] [-n ROUNDS] [-o DIR] [-h] [MODE...]
#
#   -w WORKLOAD  a workload of `numapool bench` (default fib-12)
#   -r REPS      repetitions inside each run (default 5); a run's figure is their median
#   -s SIZE      quick, full or a factor such as 0.2 (default quick)
#   -n ROUNDS    rounds (default 5); each round runs every mode once, starting one
#                mode further on than the round before, so that a slow minute of the
#                host slows every mode alike
#   -o DIR       keep every run's perf and CSV output in DIR (default: a temporary
#                directory, removed at the end)
#   -h           print this help
#
# MODE is a contender of `numapool bench` (default: numapool numapool-flat
# numapool-threads goroutines pond); naming one twice is an error. Each run
# is a process of its own (`numapool bench --mode MODE`), so the counters
# are that mode's alone.
#
# Counters: task-clock, context-switches, cpu-migrations, page-faults, and
# where the CPU exposes them cycles, instructions, cache-misses, node-loads,
# node-load-misses. The output names the counters this machine does not
# have (a virtual machine often has no hardware counters; the software ones
# still compare).
#
# Permissions: perf needs kernel.perf_event_paranoid <= 2 for a user's own
# processes (the Debian default; hardware events may need <= 1, or root).
# Check with `cat /proc/sys/kernel/perf_event_paranoid`; lower it with
# `sudo sysctl kernel.perf_event_paranoid=1`.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

workload=fib-12 reps=5 size=quick rounds=5 keep=
while getopts "w:r:s:n:o:h" opt; do
  case $opt in
    w) workload=$OPTARG ;;
    r) reps=$OPTARG ;;
    s) size=$OPTARG ;;
    n) rounds=$OPTARG ;;
    o) keep=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(numapool numapool-flat numapool-threads goroutines pond)

case $rounds in ''|*[!0-9]*) echo "perfstat: -n $rounds: want a number of rounds, 1 or more" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] || { echo "perfstat: -n $rounds: want 1 or more rounds" >&2; exit 2; }
for ((i = 0; i < ${#modes[@]}; i++)); do
  for ((j = 0; j < i; j++)); do
    if [ "${modes[i]}" = "${modes[j]}" ]; then
      echo "perfstat: mode ${modes[i]} is named twice; name each mode once" >&2
      exit 2
    fi
  done
done

if ! command -v perf >/dev/null 2>&1; then
  echo "perfstat: installing linux-perf" >&2
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq linux-perf) >/dev/null || true
  fi
  command -v perf >/dev/null 2>&1 || { echo "perfstat: perf is not installed and could not be" >&2; exit 1; }
fi

export PATH="/usr/local/go/bin:$PATH"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${keep:-$tmp}
mkdir -p "$out"
bin=$tmp/numapool
go build -o "$bin" ./cmd/numapool
# A bad workload or mode fails here, before any round.
for m in "${modes[@]}"; do
  "$bin" bench --mode "$m" --workload "$workload" --reps 1 --size 0.0001 --csv >/dev/null 2>"$tmp/check" ||
    { echo "perfstat: $(cat "$tmp/check")" >&2; exit 2; }
done

events=task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions,cache-misses,node-loads,node-load-misses
n=${#modes[@]}
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < n; i++)); do
    m=${modes[(r + i) % n]}
    echo "perfstat: round $((r + 1))/$rounds: $workload on $m ($reps reps, size $size)" >&2
    perf stat -x, -e "$events" -o "$out/$m.$r.perf" -- \
      "$bin" bench --mode "$m" --workload "$workload" --reps "$reps" --size "$size" --csv >"$out/$m.$r.csv"
  done
done

# perf -x, lines: value,unit,event,run-time,percentage,... ("<not supported>"
# or "<not counted>" as the value).
python3 - "$out" "$rounds" "$workload" "${modes[@]}" <<'EOF'
import csv, os, statistics, sys
out, rounds, workload, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
FIGURE = "workload figure"
events, missing = [], []
vals = {m: {} for m in modes}   # mode -> event -> [value per round]
unit, na = "", {}
for m in modes:
    for r in range(rounds):
        for line in open(os.path.join(out, f"{m}.{r}.perf")):
            if not line.strip() or line.startswith("#"):
                continue
            f = line.rstrip("\n").split(",")
            if len(f) < 3:
                continue
            value, event = f[0], f[2]
            if event not in events:
                events.append(event)
            if value.startswith("<"):
                if event not in missing:
                    missing.append(event)
                continue
            vals[m].setdefault(event, []).append(float(value))
        rows = list(csv.DictReader(open(os.path.join(out, f"{m}.{r}.csv"))))
        figs = [float(x["value"]) for x in rows if x["value"] and not x["na"]]
        unit = next((x["unit"] for x in rows if x["unit"]), unit)
        if figs:
            vals[m].setdefault(FIGURE, []).append(statistics.median(figs))
        na.update({m: x["na"] for x in rows if x["na"]})
events = [e for e in events if e not in missing] + [FIGURE]

def fmt(v):
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"

base = modes[0]
cells = {}
for e in events:
    for m in modes:
        v = vals[m].get(e)
        if not v:
            cells[e, m] = na.get(m, "n/a") if e == FIGURE else "-"
            continue
        med = statistics.median(v)
        cell = f"{fmt(med)} [{fmt(min(v))}-{fmt(max(v))}]"
        b = vals[base].get(e)
        if m != base and b and statistics.median(b):
            cell += f" {med / statistics.median(b):.2f}x"
        cells[e, m] = cell
label = {FIGURE: f"{workload} ({unit})" if unit else workload}
w0 = max(len(label.get(e, e)) for e in events) + 2
ws = {m: max([len(m)] + [len(cells[e, m]) for e in events]) + 3 for m in modes}
print(f"{workload}: {rounds} rounds, each mode once per round; median [min-max] over the rounds, ratio of medians to {base}")
print("".ljust(w0) + "".join(m.rjust(ws[m]) for m in modes))
for e in events:
    print(label.get(e, e).ljust(w0) + "".join(cells[e, m].rjust(ws[m]) for m in modes))
if missing:
    print(f"\nnot counted on this machine: {', '.join(missing)}")
print(f"\nthe {workload} row is the workload's own figure (see numapool help bench): each run's median over its repetitions.")
EOF
[ -z "$keep" ] || echo "perfstat: every run's perf and CSV output is in $keep" >&2
