#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Scenarios on the fabric (scripts/fabric.sh): unmodified ib_write_bw over
# uroce-run through uroce-switch, a summary table, and a plot of per-flow
# rate and switch queue depth over time.
#
#   scripts/scenario.sh incast [--senders N] [--rate RATE] [--seconds S]
#                              [--no-ecn] [--pfc] [--dcqcn] [--out DIR]
#       N senders write into one receiver behind a RATE bottleneck (the
#       switch port toward the receiver) that marks ECN like a RED queue;
#       --dcqcn turns on uroce's congestion control at every host.
#   scripts/scenario.sh lossy  [--loss P] [--seconds S] [--lat] [--out DIR]
#       One flow through a switch that loses, duplicates, reorders and
#       delays frames; --lat makes it ib_write_lat (64 KiB, ITERS
#       iterations, 2000 by default) instead of ib_write_bw.
#   Any scenario: --selective-repeat offers selective repeat at every
#   host (docs/transport.md), instead of go-back-N alone.
#   scripts/scenario.sh pfc-storm [--seconds S] [--out DIR]
#       One flow through a switch with PFC; a stuck receiver NIC (a raw
#       socket) sends XOFF forever; the switch's watchdog ends the storm.
#
# UROCE_FABRIC_PREFIX names the namespaces (default usc-).
# Writes DIR/summary.txt (the table), DIR/rates.png (the plot),
# DIR/switch.csv (the switch's time series) and each program's output.
# Run as root after building (cmake --build build).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${UROCE_BIN_DIR:-$root/build/bin}
scenario=${1:-}
shift || true

senders=4
rate=100mbit
seconds=10
ecn=1
pfc=0
dcqcn=0
loss=0.01
lat=0
sr=0
out=
while [[ $# -gt 0 ]]; do
  case $1 in
    --senders) senders=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --no-ecn) ecn=0; shift ;;
    --pfc) pfc=1; shift ;;
    --dcqcn) dcqcn=1; shift ;;
    --loss) loss=$2; shift 2 ;;
    --lat) lat=1; shift ;;
    --selective-repeat) sr=1; shift ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '3,24p' "$0" >&2; exit 2 ;;
  esac
done
case $scenario in
  incast | lossy | pfc-storm) ;;
  *) sed -n '3,24p' "$0" >&2; exit 2 ;;
esac
out=${out:-/tmp/uroce-scenario-$scenario}
mkdir -p "$out"
rm -f "$out"/*.stats "$out"/*.log "$out"/*.csv "$out"/*.dat "$out"/summary.txt
prefix=${UROCE_FABRIC_PREFIX:-usc-}
trap '"$root/scripts/fabric.sh" down $prefix' EXIT

if [[ $scenario == incast ]]; then
  hosts=$((senders + 1))
else
  senders=1
  hosts=2
fi
receiver=$hosts
"$root/scripts/fabric.sh" up "$hosts" "$prefix"

# ---- the switch ----
switch_args=(--stats-file "$out/switch.csv" --stats-interval 100)
case $scenario in
  incast)
    switch_args+=(--rate "$((receiver - 1))=$rate")
    [[ $ecn == 1 ]] && switch_args+=(--ecn "${ECN:-kmin=10000,kmax=100000,pmax=0.2}")
    [[ $pfc == 1 ]] && switch_args+=(--pfc)
    ;;
  lossy)
    switch_args+=(--loss "$loss" --duplicate 0.002 --reorder 0.005 --delay 100us+50us --seed 1)
    ;;
  pfc-storm)
    switch_args+=(--pfc --rate "1=$rate")
    pfc=1
    ;;
esac
UROCE_SWITCH=$bin/uroce-switch "$root/scripts/fabric.sh" switch "$prefix" -- "${switch_args[@]}" \
  >"$out/switch.log" 2>&1 &
switch_pid=$!
for _ in $(seq 200); do
  grep -q forwarding "$out/switch.log" && break
  sleep 0.1
done

env_common=()
[[ $ecn == 1 && $scenario == incast ]] && env_common+=(UROCE_DEVICE0_ECN=true)
if [[ $dcqcn == 1 ]]; then
  # DCQCN's defaults are ConnectX's, made for microsecond round trips at
  # 25-100 Gb/s. Here the bottleneck carries 100 Mb/s and a queue's worth
  # of round trip is milliseconds: the timers and steps are scaled to
  # match (docs/congestion-control.md). A veth host moves 1-3 Gb/s
  # through af_packet, not the 10 Gb/s its link reports: 1 Gb/s is the
  # rate a flow starts from (rpg_max_rate).
  env_common+=(UROCE_DCQCN_ENABLED=true
    UROCE_DCQCN_RPG_TIME_RESET="${DCQCN_TIME_RESET_US:-50000}"
    UROCE_DCQCN_RPG_BYTE_RESET="${DCQCN_BYTE_RESET:-10000000}"
    UROCE_DCQCN_RPG_AI_RATE="${DCQCN_AI_MBPS:-1}"
    UROCE_DCQCN_RPG_HAI_RATE="${DCQCN_HAI_MBPS:-5}"
    UROCE_DCQCN_RATE_REDUCE_MONITOR_PERIOD="${DCQCN_MONITOR_US:-1000}"
    UROCE_DCQCN_MIN_TIME_BETWEEN_CNPS="${DCQCN_CNP_US:-500}"
    UROCE_DCQCN_DCE_TCP_RTT="${DCQCN_ALPHA_US:-1000}"
    UROCE_DCQCN_RPG_MAX_RATE="${DCQCN_MAX_MBPS:-1000}")
else
  # On by default (as on ConnectX): the runs without it say so.
  env_common+=(UROCE_DCQCN_ENABLED=false)
fi
[[ $sr == 1 ]] && env_common+=(UROCE_DEVICE0_SELECTIVE_REPEAT=true)
if [[ $pfc == 1 ]]; then
  env_common+=(UROCE_PFC_ENABLED=true)
  # At lab rates a legitimate pause lasts far longer than at 100 Gb/s
  # (a 1 MB queue drains in 80 ms at 100 Mb/s): the hosts' 200 ms
  # watchdog would call congestion a storm. The storm scenario keeps it.
  [[ $scenario != pfc-storm ]] && env_common+=(UROCE_PFC_WATCHDOG_MS=0)
fi

# run_uroce HOST IP LOG STATS PROGRAM...: a program over uroce on a host.
run_uroce() {
  local host=$1 ip=$2 log=$3 stats=$4
  shift 4
  ip netns exec "${prefix}h$host" env UROCE_STATS_FILE="$stats" "${env_common[@]}" \
    "$bin/uroce-run" --port net_af_packet0,iface=rdma --ip "$ip/24" -- "$@" >"$log" 2>&1
}

# ---- the flows: sender i writes to its own server on the receiver ----
bw=(ib_write_bw -d uroce0 -x 1 -s 65536 -D "$seconds" --report_gbits)
# Queues at lab rates hold tens to hundreds of milliseconds (1 MB at
# 100 Mb/s is 80 ms; lossless ones more), past perftest's default local
# ACK timeout of 67 ms: 1 s (-u 18) keeps flows that wait in a queue, or
# behind a pause, from timing out and going back N for nothing.
[[ $pfc == 1 || $scenario == incast ]] && bw+=(-u 18)
[[ $lat == 1 ]] && bw=(ib_write_lat -d uroce0 -x 1 -s 65536 -n "${ITERS:-2000}")
servers=()
for i in $(seq 1 "$senders"); do
  run_uroce "$receiver" "10.78.0.$((100 + i))" "$out/server$i.log" "$out/server$i.stats" \
    "${bw[@]}" -p $((18515 + i)) &
  servers+=($!)
done
for i in $(seq 1 "$senders"); do
  for _ in $(seq 300); do
    ip netns exec "${prefix}h$receiver" ss -Hltn "sport = :$((18515 + i))" | grep -q LISTEN && break
    sleep 0.1
  done
done

storm_pid=
if [[ $scenario == pfc-storm ]]; then
  # A stuck NIC on the receiver's link: XOFF for priority 3 every
  # millisecond, from 1 s into the run until its end.
  ip netns exec "${prefix}h$receiver" python3 - "$seconds" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.setsockopt(263, 20, 1)  # SOL_PACKET, PACKET_QDISC_BYPASS: not seen by uroce's own socket
s.bind(("rdma", 0))
frame = bytes.fromhex("0180c2000001" "02570c0ffee0" "8808" "0101" "0008") + \
    b"\x00\x00" * 3 + b"\xff\xff" + b"\x00\x00" * 4
frame += bytes(60 - len(frame))
time.sleep(1)
end = time.time() + float(sys.argv[1]) - 2
while time.time() < end:
    s.send(frame)
    time.sleep(0.001)
PY
  storm_pid=$!
fi

pids=()
for i in $(seq 1 "$senders"); do
  run_uroce "$i" "10.78.0.$i" "$out/sender$i.log" "$out/sender$i.stats" \
    "${bw[@]}" -p $((18515 + i)) "192.168.78.$receiver" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}" "${servers[@]}"; do wait "$p" || failed=1; done
if [[ -n $storm_pid ]]; then wait "$storm_pid" 2>/dev/null || true; fi
kill -INT "$switch_pid" 2>/dev/null || true
wait "$switch_pid" 2>/dev/null || true

# ---- the table ----
stat() {  # FILE SCOPE.COUNTER: summed over the file's lines
  awk -v k="$2" '{ if ($2 "." $3 == k) s += $4 } END { print s + 0 }' "$1" 2>/dev/null || echo 0
}
sw() { awk -v k="$1" '$1 == "switch" && $2 "." $3 == k { s += $4 } END { print s + 0 }' "$out/switch.log"; }
{
  case $scenario in
    incast) what="bottleneck $rate, ECN $([[ $ecn == 1 ]] && echo on || echo off), PFC $([[ $pfc == 1 ]] && echo on || echo off), DCQCN $([[ $dcqcn == 1 ]] && echo on || echo off)" ;;
    lossy) what="loss $loss, duplication 0.002, reordering 0.005, delay 100us+50us, $([[ $lat == 1 ]] && echo ib_write_lat || echo ib_write_bw)" ;;
    pfc-storm) what="bottleneck $rate, PFC on, XOFF forever from the receiver's link after 1 s" ;;
  esac
  echo "scenario: $scenario ($senders sender(s), ${seconds} s, $what)"
  # With --lat the rate column is ib_write_lat's median and the last two
  # are its 99th and 99.9th percentiles, in microseconds.
  printf '%-8s %12s %10s %10s %10s %8s %8s\n' flow "$([[ $lat == 1 ]] && echo "median us" || echo "Gb/s")" \
    go-back-N "SR resent" "CE seen" "$([[ $lat == 1 ]] && echo "p99 us" || echo CNPs)" \
    "$([[ $lat == 1 ]] && echo "p99.9 us" || echo cuts)"
  rates=()
  for i in $(seq 1 "$senders"); do
    if [[ $lat == 1 ]]; then
      # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
      # (A flow that failed printed none: its row says so.)
      read -r r p99 p999 < <(awk '/#bytes/ { getline; print $5, $8, $9; exit }' "$out/sender$i.log") ||
        true
    else
      r=$(awk '/#bytes/ { getline; print $4; exit }' "$out/sender$i.log")
      p99=$(stat "$out/server$i.stats" port.np_cnp_sent)
      p999=$(stat "$out/sender$i.stats" port.rp_cnp_handled)
    fi
    rates+=("${r:-0}")
    printf '%-8s %12s %10s %10s %10s %8s %8s\n' "h$i" "${r:-fail}" \
      "$(stat "$out/sender$i.stats" port.completer_retry_err)" \
      "$(stat "$out/sender$i.stats" port.sr_retransmitted)" \
      "$(stat "$out/server$i.stats" port.np_ecn_marked_roce_packets)" \
      "${p99:-}" "${p999:-}"
  done
  printf '%s\n' "${rates[@]}" | awk '{ s += $1; q += $1 * $1; n++ }
    END { printf "total %.2f Gb/s, Jain fairness %.3f\n", s, (q > 0 ? s * s / (n * q) : 0) }'
  e=$((receiver - 1))
  echo "switch: port toward the receiver: queue max $(sw "port$e.q3.max_depth") B," \
    "ECN marked $(sw "port$e.ecn_marked"), dropped $(awk '$1 == "switch" && $3 ~ /^drop_/ { s += $4 } END { print s + 0 }' "$out/switch.log")"
  pfc_sent=$(awk '$1 == "switch" && $3 ~ /^tx_prio[0-9]_pause$/ { s += $4 } END { print s + 0 }' "$out/switch.log")
  pfc_rcvd=$(awk '$1 == "switch" && $3 ~ /^rx_prio[0-9]_pause$/ { s += $4 } END { print s + 0 }' "$out/switch.log")
  echo "switch: PFC XOFF sent $pfc_sent, received $pfc_rcvd, storms $(awk '$1 == "switch" && $3 == "pfc_storm_detected" { s += $4 } END { print s + 0 }' "$out/switch.log")," \
    "impairments: lost $(awk '$1 == "switch" && $3 ~ /impair_lost/ { s += $4 } END { print s + 0 }' "$out/switch.log")," \
    "reordered $(awk '$1 == "switch" && $3 ~ /impair_reordered/ { s += $4 } END { print s + 0 }' "$out/switch.log")"
} | tee "$out/summary.txt"

# ---- the plot: per-flow rate (ingress bytes of priority 3 on each
# sender's port) and the receiver port's queue 3 depth ----
awk -F, -v n="$senders" -v e=$((receiver - 1)) '
  NR == 1 { next }
  $3 != 3 { next }
  {
    t = $1; p = $2
    if (p < n) { if (p in last) rate[t, p] = ($4 - last[p]) * 8 / (t - lt[p]) / 1e6; last[p] = $4; lt[p] = t }
    if (p == e) depth[t] = $6 / 1024
    times[t] = 1
  }
  END {
    for (t in times) {
      line = t
      for (p = 0; p < n; p++) line = line " " ((t, p) in rate ? rate[t, p] : "NaN")
      print line, (t in depth ? depth[t] : "NaN")
    }
  }' "$out/switch.csv" | sort -n >"$out/rates.dat"
{
  echo "set terminal pngcairo size 1000,700 noenhanced"
  echo "set output '$out/rates.png'"
  echo "set multiplot layout 2,1 title '$scenario through uroce-switch'"
  echo "set ylabel 'Mb/s'; set grid; set key outside right"
  printf "plot "
  for i in $(seq 1 "$senders"); do
    printf "'%s' using 1:%d with lines title 'h%d'" "$out/rates.dat" $((i + 1)) "$i"
    [[ $i -lt $senders ]] && printf ", "
  done
  echo
  echo "set ylabel 'KiB'; set xlabel 'seconds'"
  echo "plot '$out/rates.dat' using 1:$((senders + 2)) with lines title 'queue (port $((receiver - 1)), prio 3)'"
  echo "unset multiplot"
} | gnuplot 2>"$out/gnuplot.log" || echo "no plot: see $out/gnuplot.log" >&2
echo "plot: $out/rates.png"
exit $failed
