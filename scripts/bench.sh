#!/usr/bin/env bash
# bench.sh: the full comparison suite with more repetitions, written to a
# results directory as text tables, JSON, CSV and an SVG chart.
#
#   scripts/bench.sh [OUTDIR] [extra numapool bench flags...]
#
# OUTDIR defaults to bench-results/DATE. The suite takes several minutes
# on 2 cores; add e.g. --workload fib-12,triad to run part of it, or
# --spec 2x2 to give numapool a synthetic multi-node topology.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
out=${1:-bench-results/$(date +%Y-%m-%d-%H%M)}
[ $# -gt 0 ] && shift
mkdir -p "$out"
bin=$(mktemp -d)/numapool
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/numapool
"$bin" topo --json >"$out/topology.json"
"$bin" bench --size full --reps 10 --plot "$out/bench.svg" "$@" | tee "$out/bench.txt"
"$bin" bench --size full --reps 10 --json "$@" >"$out/bench.json"
"$bin" bench --size full --reps 10 --csv "$@" >"$out/bench.csv"
echo "bench.sh: results in $out (bench.txt, bench.json, bench.csv, bench.svg, topology.json)" >&2
