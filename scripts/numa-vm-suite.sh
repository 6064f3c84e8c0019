#!/usr/bin/env bash
# numa-vm-suite.sh: numa_test on several NUMA layouts, each in its own qemu
# VM (scripts/numa-vm.sh): 2 nodes x 2 CPUs; 4 nodes x 1 CPU; 2 nodes x 1
# CPU plus a memory-only node with an asymmetric distance matrix. Root in
# the VM, numa_test also takes a CPU offline and back under a running pool
# (TestCPUOfflineAndBack, cores binding) on each layout.
# Prints the wall time of each layout; exits non-zero if any fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
bin=$(mktemp -d)/numa.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
CGO_ENABLED=0 go test -c -o "$bin" ./numa_test
fail=0
run() { # name, numa-vm options..., --, test flags...
  local name=$1; shift
  local vmopts=() testflags=()
  while [ "$1" != "--" ]; do vmopts+=("$1"); shift; done
  shift
  testflags=("$@")
  local start=$SECONDS
  echo "== numa_test on $name"
  # The test binary's own timeout comes first: a hang then ends with every
  # goroutine's stack on the console, not only with qemu's kill.
  if scripts/numa-vm.sh --timeout 600 "${vmopts[@]}" "$bin" -test.v -test.timeout 300s -vm.hostcpus "$(nproc)" "${testflags[@]}" |
    grep -vE '^(SeaBIOS|iPXE|Press Ctrl-B|Booting from|\s*$)'; then
    echo "== $name: PASS in $((SECONDS - start)) s"
  else
    echo "== $name: FAIL in $((SECONDS - start)) s"
    fail=1
  fi
}
run "2 nodes x 2 CPUs" --nodes 2 --cpus 2 -- -vm.nodes 2 -vm.cpus 2
run "4 nodes x 1 CPU" --nodes 4 --cpus 1 --dist "0-1=15,2-3=15" -- -vm.nodes 4 -vm.cpus 1 -vm.dist "0-1=15,2-3=15"
run "2 nodes x 1 CPU + a memory-only node, asymmetric distances" --nodes 2 --cpus 1 --memory-only 1 --dist "0-1=21,0-2=17,1-2=28" -- \
  -vm.nodes 2 -vm.cpus 1 -vm.memonly 1 -vm.dist "0-1=21,0-2=17,1-2=28"
exit $fail
