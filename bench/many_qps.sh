#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Many RC QPs at once: unmodified ib_write_bw over net_memif (two uroce
# processes on shared memory, MTU 9000, path MTU 4096) with 1 QP and with
# QPS QPs (10,000 by default), at 4 KiB and 64 KiB, TX depth 64 each; the
# aggregate against one QP's. perftest's CQ holds tx_depth x QPs entries,
# which 10,000 QPs at its default depth of 128 would take past the
# device's max_cqe (2^20).
# Run as root after building: bench/many_qps.sh [BUILD_DIR] [QPS]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

build=${1:-build}
qps=${2:-10000}
run=$(realpath "$build/bin/uroce-run")
ns=uroce-many-qps
work=$(mktemp -d)
cleanup() {
  ip netns del "$ns" 2>/dev/null || true
  memif_hugepages_restore
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
memif_hugepages

sock=$work/memif.sock
gbps() {  # OUT SIZE: the average, or what went wrong
  local v
  v=$(awk -v s="$2" '$1 == s && NF >= 5 { v = $4 } END { print v }' "$1.client")
  if [[ -n $v ]]; then echo "$v"; else grep -m1 -oE "Failed status [0-9]+|Couldn't [a-z ]+" "$1.client" || echo "-"; fi
}

printf '%-10s %10s %14s %14s %10s\n' size QPs "one QP Gb/s" "all QPs Gb/s" ratio
for size in 4096 65536; do
  # About 2.6 GB (4 KiB) or 13 GB (64 KiB) each way for one QP, and at
  # least 64 WRs a QP for all (perftest lowers the TX depth to -n).
  total=$((2621440000 / size * (size / 4096 > 1 ? 5 : 1)))
  # -N: no peak rate, which perftest finds by comparing every completion
  # time with every post time (minutes at 640,000 WRs).
  memif_pair "$ns" "$sock" "$work/one.$size" ib_write_bw -d uroce0 -s "$size" -q 1 -t 64 -n "$total" \
    -N --report_gbits || true
  memif_pair "$ns" "$sock" "$work/many.$size" ib_write_bw -d uroce0 -s "$size" -q "$qps" -t 64 \
    -n $((total / qps > 64 ? total / qps : 64)) -N --report_gbits || true
  one=$(gbps "$work/one.$size" "$size")
  many=$(gbps "$work/many.$size" "$size")
  record "many_qps.$size.qps" "$qps"
  record "many_qps.$size.one_gbps" "$one"
  record "many_qps.$size.all_gbps" "$many"
  printf '%-10s %10s %14s %14s %10s\n' "$size B" "$qps" "$one" "$many" \
    "$(awk -v x="$many" -v y="$one" 'BEGIN { if (y + 0 == 0 || x + 0 == 0) print "-"; else printf "%.2fx", x / y }')"
done
echo "(target: all QPs >= 0.9x one QP)"
