#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The testbed's incast (scripts/scenario.sh incast): N unmodified
# ib_write_bw senders over uroce into one receiver through uroce-switch,
# whose port toward the receiver is a RATE bottleneck marking ECN. Run
# side by side: no congestion control (what rxe offers), uroce's DCQCN,
# PFC, and selective repeat (no congestion control, no PFC: losses cost
# only what was lost). Prints per-run goodput, Jain's fairness, switch
# drops and queue, go-back-N, selective resends and CNPs, and whether DCQCN met its targets (Jain's
# index at least 0.9, fewer drops and less go-back-N than without it);
# each run's table and plot stay in OUT/<run>.
# Run as root after building:
#   bench/incast.sh [--senders N] [--rate RATE] [--seconds S] [--out OUT]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
senders=4
rate=100mbit
seconds=10
out=/tmp/uroce-incast
while [[ $# -gt 0 ]]; do
  case $1 in
    --senders) senders=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '3,13p' "$0" >&2; exit 2 ;;
  esac
done

runs=("no-cc:" "dcqcn:--dcqcn" "pfc:--pfc" "pfc+dcqcn:--pfc --dcqcn" "sr:--selective-repeat")
for r in "${runs[@]}"; do
  name=${r%%:*}
  # shellcheck disable=SC2086 # the flags are words
  "$root/scripts/scenario.sh" incast --senders "$senders" --rate "$rate" --seconds "$seconds" \
    ${r#*:} --out "$out/$name" >"$out-$name.log" 2>&1 || echo "$name: a flow failed (see $out/$name)" >&2
done

echo "incast: $senders senders into $rate, $seconds s, ECN marking at the bottleneck"
printf '%-10s %10s %8s %10s %12s %10s %10s %10s %10s\n' run "Mb/s" Jain drops "queue max B" go-back-N \
  "SR resent" CNPs "PFC XOFF"
declare -A jain drops gbn
for r in "${runs[@]}"; do
  name=${r%%:*}
  s=$out/$name/summary.txt
  row=$(awk -v name="$name" '
    /^h[0-9]/ { gbn += $3; sr += $4; cnp += $6 }
    /^total/ { mbps = $2 * 1000; jain = $6 }
    /queue max/ { for (i = 1; i <= NF; i++) { if ($i == "max") q = $(i + 1); if ($i == "dropped") d = $(i + 1) } }
    /PFC XOFF sent/ { for (i = 1; i <= NF; i++) if ($i == "sent") x = $(i + 1) }
    END { gsub(",", "", x); printf "%-10s %10.1f %8.3f %10d %12d %10d %10d %10d %10d\n", name, mbps, jain, d, q, gbn, sr, cnp, x }
  ' "$s")
  echo "$row"
  read -r _ _ jain[$name] drops[$name] _ gbn[$name] _ <<<"$row"
done

# What the incast test asserted before it ran on shared CI machines, where
# the load moves these numbers: DCQCN's targets against no congestion
# control. A missed target is printed, not fatal: this is a measurement.
target() {  # DESCRIPTION CONDITION
  if awk "BEGIN { exit !($2) }"; then echo "  met:    $1"; else echo "  MISSED: $1"; fi
}
echo "targets (dcqcn against no-cc):"
target "Jain's fairness with DCQCN >= 0.9 (${jain[dcqcn]})" "${jain[dcqcn]} >= 0.9"
target "fewer drops with DCQCN (${drops[dcqcn]} < ${drops[no-cc]})" "${drops[dcqcn]} < ${drops[no-cc]}"
target "less go-back-N with DCQCN (${gbn[dcqcn]} < ${gbn[no-cc]})" "${gbn[dcqcn]} < ${gbn[no-cc]}"
