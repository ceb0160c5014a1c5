#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Netdev mode against what users would use instead, side by side in one
# run, on one veth pair between two namespaces, at MTU 1500 and at MTU
# 3000 (path MTU 2048, the largest a veth with XDP attached allows):
#   - ib_write_bw (64 KiB, DURATION seconds) and ib_send_lat (2 B) over a
#     netdev device (uroce-run --netdev: the kernel's interface and
#     addresses, perftest's TCP exchange on the same link), its port on
#     net_af_packet (the default) and on net_af_xdp (--port af_xdp);
#   - the same over today's dedicated link (a veth of uroce's own, with
#     addresses the kernel does not have; scripts/testbed.sh's default);
#   - kernel TCP (iperf3) and spinning UDP (sockperf --nonblocked) on the
#     netdev link, alone and while a uroce device is open on it at both
#     ends (af_packet: the kernel runs uroce's socket filter on every
#     frame; af_xdp: the XDP program runs, and the veth loses GSO).
# Run as root after building: bench/netdev_vs_tcp.sh [BUILD_DIR] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

build=${1:-build}
duration=${2:-5}
run=$(realpath "$build/bin/uroce-run")
netdev=uroce-nbench-
dedicated=uroce-dbench-
work=$(mktemp -d)

cleanup() {
  pkill -f "ibv_asyncwatch -d uroce0" 2>/dev/null || true
  scripts/testbed.sh down "$netdev"
  scripts/testbed.sh down "$dedicated"
  rm -rf "$work"
}
trap cleanup EXIT

kernel_round() {  # OUT_PREFIX PORT
  ip netns exec "$nb" iperf3 -s -1 -p "$2" >/dev/null 2>&1 &
  local server=$!
  wait_listen "$nb" "$2"
  ip netns exec "$na" iperf3 -c 10.78.0.2 -p "$2" -t "$duration" -l 64K -J >"$1-iperf.json"
  wait "$server"
  sockperf_pp "$1-udp-spin" "$nb" "$na" 10.78.0.2 $(($2 + 10))
}

# The kernel's numbers with a uroce device open, idle, at both ends
# (ibv_asyncwatch waits for async events): OUT_PREFIX PORT TCP_PORT
kernel_beside() {
  for ns in "$na" "$nb"; do
    ip netns exec "$ns" "$run" --netdev eth --port "$2" -- ibv_asyncwatch -d uroce0 \
      >/dev/null 2>&1 &
  done
  sleep 2
  kernel_round "$1" "$3"
  pkill -f "ibv_asyncwatch -d uroce0" 2>/dev/null || true
  sleep 1
}

# One MTU's rows: MTU
measure() {
  local mtu=$1 w=$work/$1
  mkdir -p "$w"
  TESTBED_LAYOUT=netdev TESTBED_MTU=$mtu scripts/testbed.sh up "$netdev"
  na=${netdev}a nb=${netdev}b
  for port in af_packet af_xdp; do
    local on="ip netns exec NS $run --netdev eth --port $port --"
    perftest_pair "$w/$port-bw" "${on/NS/$nb}" "${on/NS/$na}" 10.78.0.2 \
      ib_write_bw -d uroce0 -s 65536 -D "$duration" --report_gbits
    perftest_pair "$w/$port-lat" "${on/NS/$nb}" "${on/NS/$na}" 10.78.0.2 \
      ib_send_lat -d uroce0 -s 2 -n 20000
  done
  kernel_round "$w/kernel" 5201
  kernel_beside "$w/beside-af_packet" af_packet 5301
  kernel_beside "$w/beside-af_xdp" af_xdp 5401
  scripts/testbed.sh down "$netdev"

  TESTBED_MTU=$mtu scripts/testbed.sh up "$dedicated"
  local da=${dedicated}a db=${dedicated}b
  on_link() { echo "ip netns exec $1 $run --port net_af_packet0,iface=rdma --ip $2/24 --"; }
  perftest_pair "$w/ded-bw" "$(on_link "$db" 10.77.0.2)" "$(on_link "$da" 10.77.0.1)" \
    192.168.77.2 ib_write_bw -d uroce0 -s 65536 -D "$duration" --report_gbits
  perftest_pair "$w/ded-lat" "$(on_link "$db" 10.77.0.2)" "$(on_link "$da" 10.77.0.1)" \
    192.168.77.2 ib_send_lat -d uroce0 -s 2 -n 20000
  scripts/testbed.sh down "$dedicated"

  local pbw plat xbw xlat dbw dlat kbw klat
  pbw=$(bw_of "$w/af_packet-bw.client") plat=$(lat_of "$w/af_packet-lat.client")
  xbw=$(bw_of "$w/af_xdp-bw.client") xlat=$(lat_of "$w/af_xdp-lat.client")
  dbw=$(bw_of "$w/ded-bw.client") dlat=$(lat_of "$w/ded-lat.client")
  kbw=$(iperf_gbps "$w/kernel-iperf.json") klat=$(sockperf_p50 "$w/kernel-udp-spin")
  echo
  row "veth, MTU $mtu" "64 KiB Gb/s" "median lat (us)"
  row "ib_write_bw / ib_send_lat, uroce netdev, af_xdp" "$xbw" "$xlat"
  row "ib_write_bw / ib_send_lat, uroce netdev, af_packet" "$pbw" "$plat"
  row "ib_write_bw / ib_send_lat, uroce dedicated link" "$dbw" "$dlat"
  row "iperf3 TCP / sockperf UDP spinning, same link" "$kbw" "$klat"
  for port in af_packet af_xdp; do
    row "  the same, a uroce $port device open at both ends" \
      "$(iperf_gbps "$w/beside-$port-iperf.json")" "$(sockperf_p50 "$w/beside-$port-udp-spin")"
  done
  row "  af_xdp / af_packet" "$(ratio "$xbw" "$pbw")" "$(ratio "$xlat" "$plat")"
  row "  af_xdp / kernel" "$(ratio "$xbw" "$kbw")" "$(ratio "$xlat" "$klat")"
  row "  af_packet / kernel" "$(ratio "$pbw" "$kbw")" "$(ratio "$plat" "$klat")"
  row "  af_packet netdev / dedicated" "$(ratio "$pbw" "$dbw")" "$(ratio "$plat" "$dlat")"
  row "  kernel beside af_xdp / alone" \
    "$(ratio "$(iperf_gbps "$w/beside-af_xdp-iperf.json")" "$kbw")" \
    "$(ratio "$(sockperf_p50 "$w/beside-af_xdp-udp-spin")" "$klat")"
}

measure 1500
measure 3000
echo
echo "(targets: af_xdp at least af_packet; netdev within 0.9x of the dedicated"
echo " link; ib_write_bw 1.0x iperf3 and ib_send_lat 1.0x spinning UDP)"
