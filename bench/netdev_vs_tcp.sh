#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Netdev mode against what users would use instead, side by side in one
# run, on one veth pair between two namespaces at MTU 1500:
#   - ib_write_bw (64 KiB, DURATION seconds) and ib_send_lat (2 B) over a
#     netdev device (uroce-run --netdev: the kernel's interface and
#     addresses, perftest's TCP exchange on the same link);
#   - the same over today's dedicated link (a veth of uroce's own, with
#     addresses the kernel does not have; scripts/testbed.sh's default);
#   - kernel TCP (iperf3) and spinning UDP (sockperf --nonblocked) on the
#     netdev link, alone and while a uroce device is open on it (the
#     kernel then runs uroce's socket filter on every frame).
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

# --- netdev mode: one link, the kernel's addresses ------------------------
TESTBED_LAYOUT=netdev scripts/testbed.sh up "$netdev"
na=${netdev}a nb=${netdev}b
on_netdev() { echo "ip netns exec $1 $run --netdev eth --"; }
perftest_pair "$work/nd-bw" "$(on_netdev "$nb")" "$(on_netdev "$na")" 10.78.0.2 \
  ib_write_bw -d uroce0 -s 65536 -D "$duration" --report_gbits
perftest_pair "$work/nd-lat" "$(on_netdev "$nb")" "$(on_netdev "$na")" 10.78.0.2 \
  ib_send_lat -d uroce0 -s 2 -n 20000

kernel_round() {  # OUT_PREFIX PORT
  ip netns exec "$nb" iperf3 -s -1 -p "$2" >/dev/null 2>&1 &
  local server=$!
  wait_listen "$nb" "$2"
  ip netns exec "$na" iperf3 -c 10.78.0.2 -p "$2" -t "$duration" -l 64K -J >"$1-iperf.json"
  wait "$server"
  sockperf_pp "$1-udp-spin" "$nb" "$na" 10.78.0.2 $(($2 + 10))
}
kernel_round "$work/kernel" 5201
# The same with a uroce device open at both ends (ibv_asyncwatch waits
# for async events: the device stays open and idle).
for ns in "$na" "$nb"; do
  ip netns exec "$ns" "$run" --netdev eth -- ibv_asyncwatch -d uroce0 >/dev/null 2>&1 &
done
sleep 2
kernel_round "$work/kernel-beside" 5301
pkill -f "ibv_asyncwatch -d uroce0" 2>/dev/null || true
scripts/testbed.sh down "$netdev"

# --- a dedicated link: uroce's own addresses on the rdma veth ---------------
scripts/testbed.sh up "$dedicated"
da=${dedicated}a db=${dedicated}b
on_link() { echo "ip netns exec $1 $run --port net_af_packet0,iface=rdma --ip $2/24 --"; }
perftest_pair "$work/ded-bw" "$(on_link "$db" 10.77.0.2)" "$(on_link "$da" 10.77.0.1)" \
  192.168.77.2 ib_write_bw -d uroce0 -s 65536 -D "$duration" --report_gbits
perftest_pair "$work/ded-lat" "$(on_link "$db" 10.77.0.2)" "$(on_link "$da" 10.77.0.1)" \
  192.168.77.2 ib_send_lat -d uroce0 -s 2 -n 20000

# --- the table ----------------------------------------------------------------
nbw=$(bw_of "$work/nd-bw.client") nlat=$(lat_of "$work/nd-lat.client")
dbw=$(bw_of "$work/ded-bw.client") dlat=$(lat_of "$work/ded-lat.client")
kbw=$(iperf_gbps "$work/kernel-iperf.json") klat=$(sockperf_p50 "$work/kernel-udp-spin")
sbw=$(iperf_gbps "$work/kernel-beside-iperf.json")
slat=$(sockperf_p50 "$work/kernel-beside-udp-spin")
echo
row "veth, MTU 1500 (path MTU 1024)" "64 KiB Gb/s" "median lat (us)"
row "ib_write_bw / ib_send_lat, uroce netdev (af_packet)" "$nbw" "$nlat"
row "ib_write_bw / ib_send_lat, uroce dedicated link" "$dbw" "$dlat"
row "iperf3 TCP / sockperf UDP spinning, same link" "$kbw" "$klat"
row "  the same, a uroce device open at both ends" "$sbw" "$slat"
row "  netdev / dedicated" "$(ratio "$nbw" "$dbw")" "$(ratio "$nlat" "$dlat")"
row "  netdev / kernel" "$(ratio "$nbw" "$kbw")" "$(ratio "$nlat" "$klat")"
row "  kernel beside uroce / kernel alone" "$(ratio "$sbw" "$kbw")" "$(ratio "$slat" "$klat")"
echo "(targets: netdev within 0.9x of the dedicated link; the kernel's own"
echo " traffic within 0.95x with a device open on its interface)"
