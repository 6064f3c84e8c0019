#!/usr/bin/env bash
# perf-report.sh: run the comparison suite once and write the performance
# report (scripts/perfreport) from its JSON, with the machine's
# description (numapool topo), the Go version and the CPU-to-CPU round
# trip before and after the suite.
#
#   scripts/perf-report.sh [-o FILE] [-m "MACHINE"] [-r README] [-- numapool bench flags...]
#
#   -o FILE     where the report goes (default docs/performance.md)
#   -r README   whose verdict table to rewrite from the same run: the lines
#               between its "<!-- verdicts: ..." and "<!-- end of verdicts -->"
#               markers, which say per workload whether numapool leads,
#               ties or trails (default README.md when the report goes to
#               docs/performance.md, so that README and report tell of one
#               run; none for any other -o; -r "" for none)
#   -m MACHINE  one line about the machine for the header, e.g.
#               "a 2-CPU virtual machine with one NUMA node"
#   bench flags default to --report, the report's suite (--size quick
#   --reps 5; numapool bench's own default is a one-minute first look);
#   CI passes a tiny suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
out=docs/performance.md machine="" readme=unset
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift 2 ;;
    -m) machine=$2; shift 2 ;;
    -r) readme=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "perf-report: unknown option $1 (bench flags go after --)" >&2; exit 2 ;;
  esac
done
if [ "$readme" = unset ]; then
  if [ "$out" = docs/performance.md ]; then readme=README.md; else readme=""; fi
fi
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--report)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/numapool" ./cmd/numapool
go build -o "$work/perfreport" ./scripts/perfreport
"$work/numapool" topo >"$work/topo.txt"
# numapool bench times the round trip and the hand-offs when it prints
# tables; a run of one workload no contender runs (sequential's pingpong
# hands nothing over) takes only those measurements, and its progress
# lines would only be noise.
roundtrip() {
  "$work/numapool" bench --workload pingpong --contender sequential --reps 1 --size 0.001 2>/dev/null |
    grep -E '^(a cache line from.*before the run|a hand-off to another goroutine)' |
    sed "s/before the run/$1/; /^a hand-off/s/\$/ ($1)/" >>"$work/rt.txt" || true
}
: >"$work/rt.txt"
roundtrip "before the suite"
start=$SECONDS
"$work/numapool" bench --json "${flags[@]}" >"$work/bench.json"
took=$((SECONDS - start))
roundtrip "after it"
"$work/perfreport" -in "$work/bench.json" -topo "$work/topo.txt" -roundtrip "$work/rt.txt" \
  -run "numapool bench ${flags[*]} --json (${took} s)" -machine "$machine" -go "$(go version | awk '{print $3, $4}')" -o "$out" \
  ${readme:+-readme "$readme"}
echo "perf-report: wrote $out${readme:+ and the verdicts in $readme} from a suite run of ${took} s" >&2
