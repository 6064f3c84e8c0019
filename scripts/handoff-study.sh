#!/usr/bin/env bash
# handoff-study.sh: what numapool's hand-offs and blocking cost against
# goroutines on this machine. It needs nothing but the repository, Go and
# python3, and takes about a minute a round.
#
#   scripts/handoff-study.sh [-r ROUNDS] [-h]
#
#   -r ROUNDS  rounds of every figure (default 5)
#   -h         print this help
#
# A pool's workers are goroutines locked to their threads: work handed to
# one that sleeps, a processor taken back from one, a spare or a
# stand-in that takes over from a blocked one, each wakes a thread. The
# suite prints what that costs here ("a hand-off ... locked ..."); this
# script measures the figures that depend on it, each beside its
# yardstick in the same run:
#
#   pingpong, pingpong-spaced  pool.Run back to back, and after a pause,
#                              against a goroutine and a channel (suite);
#   spawn                      Submit from one goroutine, against the best
#                              other contender (suite);
#   submit from 8              BenchmarkSubmitFrom8 against a channel-fed
#                              pool;
#   small loop                 BenchmarkParallelForSmall's p50 against a
#                              goroutine hand-off;
#   blocking                   BenchmarkBlocking: every tenth task blocked
#                              1ms (sleep, nanosleep, a pipe's read), marked
#                              with Worker.Block, unmarked, unmarked with
#                              workers in reserve, against a goroutine per
#                              task; BenchmarkBlockingLong: blocked 20ms.
#
# It prints each figure's median over the rounds and its ratio to the
# yardstick (numapool's time over the yardstick's: below 1 is better),
# and leaves the raw output in the directory it names.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

rounds=5
while getopts "r:h" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "handoff-study: unexpected argument $1" >&2; exit 2; }
case $rounds in
  ''|*[!0-9]*|0) echo "handoff-study: -r wants a number of rounds, 1 or more, not '$rounds'" >&2; exit 2 ;;
esac

export PATH="/usr/local/go/bin:$PATH"
out=${TMPDIR:-/tmp}/handoff-study-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
go build -o "$out/numapool" ./cmd/numapool
go test -c -o "$out/pool.test" ./pool

bench() { "$out/pool.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2"; }
for r in $(seq "$rounds"); do
  "$out/numapool" bench --workload spawn,pingpong,pingpong-spaced --reps 3 --size quick \
    --contender numapool,goroutines,chanpool,pond,ants,errgroup >"$out/suite-$r.txt" 2>"$out/suite-$r.err" ||
    { echo "handoff-study: the suite failed in round $r: see $out/suite-$r.err" >&2; exit 1; }
  {
    bench '^(BenchmarkSubmitFrom8|BenchmarkSubmitFrom8ChanPool)$' 1s
    bench '^BenchmarkParallelForSmall$/^(real|goroutine)$' 200ms
    bench '^(BenchmarkBlocking|BenchmarkBlockingLong)$' 10x
  } >"$out/bench-$r.txt" 2>&1
  echo "handoff-study: round $r of $rounds done" >&2
done

grep -h '^a hand-off\|^numapool bench:' "$out/suite-1.txt" | head -2
python3 - "$out" "$rounds" <<'EOF'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
figs = {}
def add(name, v):
    figs.setdefault(name, []).append(v)
for r in range(1, rounds + 1):
    table = None
    for line in open(f"{out}/suite-{r}.txt"):
        m = re.match(r"^(\S+): ", line)
        if m:
            table = m.group(1)
        m = re.match(r"^  (\S+)\s+([\d.]+)\s", line)
        if m and table and m.group(1) != "contender":
            add(f"{table}/{m.group(1)}", float(m.group(2)))
    for line in open(f"{out}/bench-{r}.txt"):
        f = line.split()
        if not f or not f[0].startswith("Benchmark"):
            continue
        name = re.sub(r"-\d+$", "", f[0])
        vals = dict(zip(f[3::2], f[2::2]))
        for unit in ("ns/task", "p50-ns", "ns/op"):
            if unit in vals:
                add(name, float(vals[unit]))
                break
med = {k: statistics.median(v) for k, v in figs.items()}
rows = []
def row(what, a, b):
    if a in med and b in med:
        rows.append((what, med[a], med[b], med[a] / med[b]))
row("pingpong (µs): numapool / goroutines", "pingpong/numapool", "pingpong/goroutines")
row("pingpong-spaced (µs): numapool / goroutines", "pingpong-spaced/numapool", "pingpong-spaced/goroutines")
others = [k for k in med if k.startswith("spawn/") and k != "spawn/numapool"]
if others and "spawn/numapool" in med:
    best = min(others, key=lambda k: med[k])
    row(f"spawn (ns/task): numapool / {best.split('/')[1]}", "spawn/numapool", best)
row("submit from 8 (ns/task): numapool / chanpool", "BenchmarkSubmitFrom8", "BenchmarkSubmitFrom8ChanPool")
row("small loop p50 (ns): numapool / goroutine", "BenchmarkParallelForSmall/real", "BenchmarkParallelForSmall/goroutine")
for kind in ("sleep", "nanosleep", "pipe"):
    for form in ("marked", "unmarked", "unmarked-reserve"):
        row(f"blocking {kind} {form} (ns/task): / goroutines", f"BenchmarkBlocking/{kind}/{form}", f"BenchmarkBlocking/{kind}/goroutine")
row("blocking 20ms, unmarked-reserve (ns/task): / goroutines", "BenchmarkBlockingLong/unmarked-reserve", "BenchmarkBlockingLong/goroutine")
if not rows:
    sys.exit(f"handoff-study: no figures found in {out}")
w = max(len(r[0]) for r in rows)
print(f"{'figure':<{w}}  {'numapool':>10}  {'yardstick':>10}  ratio")
for what, a, b, ratio in rows:
    print(f"{what:<{w}}  {a:>10.4g}  {b:>10.4g}  {ratio:.2f}")
print(f"(medians of {rounds} rounds; raw output in {out})")
EOF
