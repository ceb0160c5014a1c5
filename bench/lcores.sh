#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The engine on one lcore and on two (DeviceConfig::lcores, docs/engine.md
# "Several lcores"): unmodified ib_write_bw with 4 QPs over net_memif (two
# uroce processes on shared memory, MTU 9000), 64 B and 64 KiB, each
# device on LCORES lcores, each lcore with a queue of the memif port; and
# how many of the received frames came in on the queue of the lcore that
# does not own their QP (memif has no RSS: a frame arrives on the queue of
# the sender's lcore). Each process then runs perftest's thread and one
# poll thread per lcore: on a machine with fewer cores than that, the two
# lcores share cores and measure the handoff's cost, not its gain.
# Run as root after building: bench/lcores.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

build=${1:-build}
duration=${2:-5}
run=$(realpath "$build/bin/uroce-run")
ns=uroce-lcores
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
# The server's counter NAME summed over its lines (UROCE_STATS_FILE).
server_counter() { awk -v n="$2" '$2 == "engine" && $3 == n { v += $4 } END { print v + 0 }' "$1"; }

printf '%-28s %8s %14s %14s %8s\n' run lcores result "handed over" cores
cores=$(nproc)
for lcores in 1 2; do
  for size in 64 65536; do
    out=$work/bw.$size.$lcores
    rm -f "$out.stats"
    UROCE_DEVICE0_LCORES=$lcores UROCE_STATS_FILE=$out.stats \
      memif_pair "$ns" "$sock" "$out" ib_write_bw -d uroce0 -s "$size" -q 4 -D "$duration" \
      --report_gbits || true
    if ((size == 64)); then
      v=$(awk '$1 == 64 && NF >= 5 { v = $5 + 0 } END { print v }' "$out.client")
      unit=Mpps
      key=lcores.write_64_mpps.$lcores
    else
      v=$(bw_of "$out.client")
      unit=Gb/s
      key=lcores.write_64k_gbps.$lcores
    fi
    record "$key" "$v"
    # Both processes append their counters: the share of all frames.
    rx=$(server_counter "$out.stats" rx_frames)
    handed=$(server_counter "$out.stats" rx_handed_off)
    printf '%-28s %8s %14s %14s %8s\n' "ib_write_bw $size B, 4 QPs" "$lcores" "${v:--} $unit" \
      "$(awk -v h="$handed" -v r="$rx" 'BEGIN { if (r == 0) print "-"; else printf "%.0f %%", 100 * h / r }')" \
      "$cores"
  done
done
echo "(handed over: received frames that came in on another lcore's queue than"
echo " their QP's, both processes; result: perftest's average)"
