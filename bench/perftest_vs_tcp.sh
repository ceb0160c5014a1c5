#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Unmodified perftest over uroce against what users would use instead,
# side by side in one run:
#   veth:  two namespaces (scripts/testbed.sh); ib_write_bw and ib_send_lat
#          over uroce on its own packet port (packet:rdma, UDP GSO
#          super-frames) and on DPDK's net_af_packet, then iperf3 and
#          sockperf over kernel TCP on the same veth pair (kernel addresses
#          added for that run); at MTU 1500 (path MTU 1024) and 9000 (path
#          MTU 4096).
#   memif: two processes on shared memory (net_memif, hugepages, MTU 9000:
#          path MTU 4096), against kernel TCP over loopback, the kernel's
#          own path between two processes on one machine; and the message
#          rate of 64 B WRITEs and SENDs on one QP (issue's targets: 3 and
#          2 Mpps).
# Throughput: 64 KiB messages for DURATION seconds (ib_write_bw -D, iperf3
# -t, its defaults with GSO, as users run it). Latency: median one-way
# (half round trip) latency of small messages, perftest's t_typical
# against sockperf's 50th percentile (sockperf's smallest message is 14
# bytes; ib_send_lat sends 2). perftest spins on its CQ, so the kernel's
# figures that it is compared with spin too (sockperf --nonblocked, both
# ends): UDP, which crosses the kernel once each way as uroce's packet
# socket does, and TCP. Never a blocking socket: its latency is how long
# the machine takes to wake a thread, not the network.
# Run as root after building: bench/perftest_vs_tcp.sh [BUILD_DIR] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

build=${1:-build}
duration=${2:-5}
run=$(realpath "$build/bin/uroce-run")
prefix=uroce-bench-
work=$(mktemp -d)

cleanup() {
  scripts/testbed.sh down "$prefix"
  pkill -f "memif-bench-$$" 2>/dev/null || true
  memif_hugepages_restore
  [[ -n ${KEEP_WORK:-} ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
a=${prefix}a
b=${prefix}b

uroce_in() {  # NAMESPACE IP PORT...
  echo "ip netns exec $1 $run --port $3 --ip $2/24 --"
}

# Spinning UDP and spinning TCP: SERVER_NS CLIENT_NS IP PORT OUT
sockperf_runs() {
  sockperf_pp "$5-udp-spin" "$1" "$2" "$3" "$4"
  sockperf_pp "$5-tcp-spin" "$1" "$2" "$3" $(($4 + 1)) --tcp
}

# --- veth, at each MTU: uroce on each port, then kernel TCP -----------------
veth_round() {  # MTU
  local mtu=$1 out=$work/veth$1 port name
  TESTBED_MTU=$mtu scripts/testbed.sh up "$prefix"
  for port in packet:rdma net_af_packet0,iface=rdma; do
    name=${port%%[:,]*}
    perftest_pair "$out-$name-bw" "$(uroce_in "$b" 10.77.0.2 "$port")" \
      "$(uroce_in "$a" 10.77.0.1 "$port")" 192.168.77.2 \
      ib_write_bw -d uroce0 -s 65536 -D "$duration" --report_gbits
    perftest_pair "$out-$name-lat" "$(uroce_in "$b" 10.77.0.2 "$port")" \
      "$(uroce_in "$a" 10.77.0.1 "$port")" 192.168.77.2 \
      ib_send_lat -d uroce0 -s 2 -n 20000
  done
  # Kernel TCP on the same pair, with kernel addresses for this run.
  ip -n "$a" addr add 10.77.0.1/24 dev rdma
  ip -n "$b" addr add 10.77.0.2/24 dev rdma
  ip netns exec "$b" iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
  wait_listen "$b" 5201
  ip netns exec "$a" iperf3 -c 10.77.0.2 -p 5201 -t "$duration" -l 64K -J >"$out-iperf.json"
  wait
  sockperf_runs "$b" "$a" 10.77.0.2 11111 "$out"
  ip -n "$a" addr flush dev rdma
  ip -n "$b" addr flush dev rdma
}
veth_round 1500
veth_round 9000

# --- memif: two processes on shared memory -------------------------------
memif_hugepages
sock="$work/memif-bench-$$.sock"
memif_pair "$a" "$sock" "$work/memif-bw" ib_write_bw -d uroce0 -s 65536 -D "$duration" --report_gbits
memif_pair "$a" "$sock" "$work/memif-lat" ib_send_lat -d uroce0 -s 2 -n 20000
# Message rate: 64 B on one QP, as many in flight as perftest keeps.
PIN=1 memif_pair "$a" "$sock" "$work/memif-rate-write" ib_write_bw -d uroce0 -s 64 -D "$duration"
PIN=1 memif_pair "$a" "$sock" "$work/memif-rate-send" ib_send_bw -d uroce0 -s 64 -D "$duration"

# --- kernel TCP over loopback ----------------------------------------------
ip netns exec "$a" iperf3 -s -1 -p 5202 >/dev/null 2>&1 &
wait_listen "$a" 5202
ip netns exec "$a" iperf3 -c 127.0.0.1 -p 5202 -t "$duration" -l 64K -J >"$work/lo-iperf.json"
wait
sockperf_runs "$a" "$a" 127.0.0.1 11121 "$work/lo"

# --- the table ---------------------------------------------------------------

# A uroce link against its kernel baseline: LABEL UROCE_PREFIX KERNEL_PREFIX
# KERNEL_LABEL
compare() {
  local bw lat tbw udp tcp
  bw=$(bw_of "$2-bw.client")
  lat=$(lat_of "$2-lat.client")
  tbw=$(iperf_gbps "$3-iperf.json")
  udp=$(sockperf_p50 "$3-udp-spin")
  tcp=$(sockperf_p50 "$3-tcp-spin")
  row "ib_write_bw / ib_send_lat, uroce, $1" "$bw" "$lat"
  row "iperf3 TCP / sockperf UDP spinning, $4" "$tbw" "$udp"
  row "  uroce / kernel" "$(ratio "$bw" "$tbw")" "$(ratio "$lat" "$udp")"
  row "sockperf TCP spinning, $4" "" "$tcp"
  row "  uroce / spinning TCP" "" "$(ratio "$lat" "$tcp")"
  record "$5.write_bw_gbps" "$bw"
  record "$5.send_lat_us" "$lat"
  record "$5.iperf3_gbps" "$tbw"
  record "$5.udp_spin_us" "$udp"
  record "$5.tcp_spin_us" "$tcp"
}

echo
row "" "64 KiB Gb/s" "median lat (us)"
for mtu in 1500 9000; do
  compare "veth $mtu, packet port" "$work/veth$mtu-packet" "$work/veth$mtu" "veth $mtu" \
    "veth$mtu.packet"
  compare "veth $mtu, net_af_packet" "$work/veth$mtu-net_af_packet0" "$work/veth$mtu" "veth $mtu" \
    "veth$mtu.af_packet"
done
compare "memif" "$work/memif" "$work/lo" "loopback" memif
echo "(targets: throughput >= 1.0x TCP on veth and >= 2x over memif;"
echo " latency <= 1.0x spinning UDP on veth, under 1.0 us over memif)"
echo
row "" "64 B Mpps" "target"
row "ib_write_bw, uroce, memif, one QP" "$(rate_of "$work/memif-rate-write.client")" 3
row "ib_send_bw, uroce, memif, one QP" "$(rate_of "$work/memif-rate-send.client")" 2
record memif.write_64_mpps "$(rate_of "$work/memif-rate-write.client")"
record memif.send_64_mpps "$(rate_of "$work/memif-rate-send.client")"
