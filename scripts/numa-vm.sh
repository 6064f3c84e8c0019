#!/usr/bin/env bash
# numa-vm.sh: run a static Linux binary in a qemu VM whose kernel sees
# several NUMA nodes, stream its output, and exit with its exit code.
#
#   scripts/numa-vm.sh [options] BINARY [ARGS...]
#   CGO_ENABLED=0 go test -exec "$PWD/scripts/numa-vm.sh" ./numa_test   (as go test -exec: an absolute path)
#
# Options (or the environment variable in brackets, for go test -exec):
#   --nodes N            NUMA nodes with CPUs                       [NUMAPOOL_VM_NODES=2]
#   --cpus C             CPUs per node                              [NUMAPOOL_VM_CPUS=2]
#   --mem MB             memory per node, MiB                       [NUMAPOOL_VM_MEM=256]
#   --memory-only K      K more nodes with memory and no CPU        [NUMAPOOL_VM_MEMORY_ONLY=0]
#   --dist LIST          distances "0-1=20,0-2=30,..." (symmetric; default 10 local, 20 remote)
#                                                                   [NUMAPOOL_VM_DIST]
#   --timeout S          give up after S seconds                    [NUMAPOOL_VM_TIMEOUT=600]
#   --append ARGS        extra kernel arguments                     [NUMAPOOL_VM_APPEND]
#
# Exit status: the binary's; 124 on timeout; 125 when the VM ended without
# reporting one; 126 when qemu or the kernel could not be installed; 2 on
# bad usage. The Debian kernel (linux-image-amd64) is
# downloaded once and its ELF vmlinux cached in ${XDG_CACHE_HOME:-~/.cache}/numapool-vm,
# so later runs need no network. No KVM is needed: the VM runs under TCG.
set -euo pipefail

nodes=${NUMAPOOL_VM_NODES:-2} cpus=${NUMAPOOL_VM_CPUS:-2} mem=${NUMAPOOL_VM_MEM:-256}
memonly=${NUMAPOOL_VM_MEMORY_ONLY:-0} dist=${NUMAPOOL_VM_DIST:-} timeout=${NUMAPOOL_VM_TIMEOUT:-600}
append=${NUMAPOOL_VM_APPEND:-}
usage() { sed -n '2,22p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --memory-only) memonly=$2; shift 2 ;;
    --dist) dist=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --append) append=$2; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) echo "numa-vm: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
binary=$1; shift
[ -f "$binary" ] || { echo "numa-vm: $binary: no such file" >&2; exit 2; }
for v in nodes cpus mem memonly timeout; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "numa-vm: --$v ${!v}: not a number" >&2; exit 2; }
done
[ "$nodes" -ge 1 ] && [ "$cpus" -ge 1 ] || { echo "numa-vm: need at least one node and one CPU" >&2; exit 2; }
if file "$binary" 2>/dev/null | grep -q 'dynamically linked'; then
  echo "numa-vm: $binary is dynamically linked; build it with CGO_ENABLED=0" >&2; exit 2
fi

here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/numapool-vm
mkdir -p "$cache"

if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
  echo "numa-vm: installing qemu-system-x86" >&2
  (export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq qemu-system-x86) >/dev/null ||
    { echo "numa-vm: installing qemu-system-x86 with apt-get failed; install it and run again" >&2; exit 126; }
fi

# The kernel: Debian's linux-image-amd64, its ELF vmlinux extracted once
# (booting it through qemu's PVH entry skips 3-4 s of decompression under TCG).
if [ ! -s "$cache/vmlinux" ]; then
  echo "numa-vm: fetching Debian's kernel (once)" >&2
  work=$(mktemp -d)
  # A fresh machine may have no package lists yet.
  (cd "$work" && apt-get download linux-image-amd64 >/dev/null 2>&1) ||
    apt-get update -qq >/dev/null
  (cd "$work" && apt-get download linux-image-amd64 >/dev/null 2>&1 &&
    dep=$(dpkg-deb -f linux-image-amd64_*.deb Depends | sed 's/[ ,(].*//') &&
    apt-get download "$dep" >/dev/null 2>&1 &&
    dpkg-deb --fsys-tarfile "$dep"_*.deb | tar -x --wildcards './boot/vmlinuz-*') ||
    { echo "numa-vm: could not download Debian's linux-image-amd64 with apt-get download" >&2; exit 126; }
  python3 - "$work"/boot/vmlinuz-* "$cache/vmlinux.tmp" <<'EOF'
import lzma, sys
data = open(sys.argv[1], "rb").read()
magic = b"\xfd7zXZ\x00"
off = data.find(magic)
if off < 0:
    sys.exit("numa-vm: no xz stream in " + sys.argv[1])
d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
elf = d.decompress(data[off:])
if elf[:4] != b"\x7fELF":
    sys.exit("numa-vm: the kernel image does not hold an ELF vmlinux")
open(sys.argv[2], "wb").write(elf)
EOF
  mv "$cache/vmlinux.tmp" "$cache/vmlinux"
  rm -rf "$work"
fi

# The init program, built once per source change.
export PATH="/usr/local/go/bin:$PATH"
init=$cache/vminit
if [ ! -x "$init" ] || [ "$here/vminit/main_linux.go" -nt "$init" ]; then
  (cd "$here/.." && CGO_ENABLED=0 go build -o "$init" ./scripts/vminit)
fi

# The initramfs: /init, /payload and /payload.args, as an uncompressed newc cpio.
run=$(mktemp -d)
trap 'rm -rf "$run"' EXIT
printf '%s\n' "$@" >"$run/payload.args"
python3 - "$run/initramfs.cpio" "$init" "$binary" "$run/payload.args" <<'EOF'
import os, sys
out, files = sys.argv[1], [("init", sys.argv[2], 0o100755), ("payload", sys.argv[3], 0o100755), ("payload.args", sys.argv[4], 0o100644)]
def entry(f, name, data, mode, ino):
    name_b = name.encode() + b"\0"
    hdr = "070701" + "".join("%08x" % v for v in (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
    f.write(hdr.encode() + name_b)
    f.write(b"\0" * ((4 - (110 + len(name_b)) % 4) % 4))
    f.write(data)
    f.write(b"\0" * ((4 - len(data) % 4) % 4))
with open(out, "wb") as f:
    for i, (name, path, mode) in enumerate(files, 1):
        entry(f, name, open(path, "rb").read(), mode, i)
    entry(f, "TRAILER!!!", b"", 0, 0)
EOF

# The NUMA layout.
total=$((nodes + memonly))
args=(-accel tcg -cpu max -m $((mem * total))M -smp $((nodes * cpus)),sockets=$nodes,cores=$cpus,threads=1)
for ((n = 0; n < total; n++)); do
  args+=(-object "memory-backend-ram,id=m$n,size=${mem}M")
  if [ $n -lt "$nodes" ]; then
    args+=(-numa "node,nodeid=$n,cpus=$((n * cpus))-$((n * cpus + cpus - 1)),memdev=m$n")
  else
    args+=(-numa "node,nodeid=$n,memdev=m$n")
  fi
done
declare -A d
if [ -n "$dist" ]; then
  IFS=, read -ra pairs <<<"$dist"
  for p in "${pairs[@]}"; do
    [[ $p =~ ^([0-9]+)-([0-9]+)=([0-9]+)$ ]] || { echo "numa-vm: --dist: bad entry $p (want a-b=value)" >&2; exit 2; }
    d[${BASH_REMATCH[1]},${BASH_REMATCH[2]}]=${BASH_REMATCH[3]}
    d[${BASH_REMATCH[2]},${BASH_REMATCH[1]}]=${BASH_REMATCH[3]}
  done
fi
if [ "$total" -gt 1 ]; then
  for ((a = 0; a < total; a++)); do
    for ((b = 0; b < total; b++)); do
      [ $a -eq $b ] && continue
      args+=(-numa "dist,src=$a,dst=$b,val=${d[$a,$b]:-20}")
    done
  done
fi

log=$run/console.log
status=0
timeout --foreground "$timeout" qemu-system-x86_64 "${args[@]}" \
  -kernel "$cache/vmlinux" -initrd "$run/initramfs.cpio" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 numa_balancing=disable $append" \
  -nographic -no-reboot -monitor none -serial stdio 2>&1 |
  tee "$log" | sed -u -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g' -e 's/\x1bc//g' -e '/^NUMAPOOL-VM-EXIT /d' || status=$?
code=$(sed -n 's/^.*NUMAPOOL-VM-EXIT \([0-9]*\).*$/\1/p' "$log" | tail -1)
if [ -n "$code" ]; then
  exit "$code"
fi
if [ "$status" -eq 124 ] || [ "${PIPESTATUS[0]:-0}" -eq 124 ]; then
  echo "numa-vm: timed out after ${timeout}s" >&2
  exit 124
fi
echo "numa-vm: the VM ended without reporting an exit code" >&2
exit 125
