#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Selective repeat against go-back-N on a lossy fabric, side by side: one
# unmodified ib_write_bw (64 KiB, its goodput) and one ib_write_lat
# (64 KiB, its median and tail completion times) over uroce through
# uroce-switch, which loses LOSS of the frames (and duplicates 0.2 %,
# reorders 0.5 %, delays 100 to 150 us: scripts/scenario.sh lossy).
# Each loss rate runs with go-back-N and with selective repeat. Loss 0 is
# the bar of a lossless fabric (PFC prevents congestion drops, not random
# loss), though its reordering still costs go-back-N. No threshold is
# fatal: this is a measurement; each run's table stays in OUT/<run>. The
# go-back-N and resend counts are the two runs' together.
# Run as root after building:
#   bench/selective_repeat.sh [--loss "0 0.01 0.05"] [--seconds S] [--out OUT]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
losses="0 0.01 0.05"
seconds=10
out=/tmp/uroce-selective-repeat
while [[ $# -gt 0 ]]; do
  case $1 in
    --loss) losses=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '3,13p' "$0" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"

# run NAME LOSS FLAGS...: one scenario; prints its flow line's fields.
run() {
  local name=$1 loss=$2
  shift 2
  "$root/scripts/scenario.sh" lossy --loss "$loss" --seconds "$seconds" "$@" --out "$out/$name" \
    >"$out/$name.log" 2>&1 || echo "$name: the flow failed (see $out/$name)" >&2
  awk '/^h1 / { print $2, $3, $4, $6, $7 }' "$out/$name/summary.txt"
}

echo "selective repeat against go-back-N: 64 KiB WRITEs through uroce-switch, ${seconds} s per goodput run"
printf '%-6s %-18s %10s %10s %10s %10s %10s %10s\n' loss transport "Gb/s" "median us" "p99 us" \
  "p99.9 us" go-back-N "SR resent"
row() {  # LOSS LABEL FLAGS...
  local loss=$1 label=$2 tag
  shift 2
  tag=$(printf '%s' "$label-$loss" | tr -c 'a-zA-Z0-9' '-')
  # A run that failed prints nothing: its row says "fail".
  read -r gbps gbn_bw sr_bw _ _ < <(run "bw-$tag" "$loss" "$@") || true
  read -r median gbn_lat sr_lat p99 p999 < <(run "lat-$tag" "$loss" --lat "$@") || true
  printf '%-6s %-18s %10s %10s %10s %10s %10s %10s\n' "$loss" "$label" "${gbps:-fail}" \
    "${median:-fail}" "${p99:-}" "${p999:-}" "$((${gbn_bw:-0} + ${gbn_lat:-0}))" \
    "$((${sr_bw:-0} + ${sr_lat:-0}))"
}
for loss in $losses; do
  row "$loss" "go-back-N"
  row "$loss" "selective repeat" --selective-repeat
done
