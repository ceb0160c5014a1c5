#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job, on a machine with no RDMA hardware: two hosts (network
# namespaces) run Debian's unmodified ib_write_bw and ib_send_lat against
# each other over uroce, RoCEv2 on a veth pair that uroce drives through
# DPDK's net_af_packet. Installs what it needs, builds, runs, prints the
# results and removes the namespaces. No hugepages needed.
# With --daemon, each host runs uroced, which owns its device, and the
# programs attach to it, as programs share an RDMA NIC. With --netdev
# (--netdev af_xdp), each host has one interface with kernel addresses, as
# production hosts have, and uroce shares it with the kernel (netdev mode,
# docs/netdev-mode.md), its port on net_af_packet (net_af_xdp): perftest's
# TCP and its RDMA go to the same address. With --packet, uroce drives the
# veth through its own packet port instead (UDP GSO super-frames,
# docs/packet-port.md).
# Run as root:
#   sudo scripts/demo.sh [--daemon | --packet | --netdev [af_packet|af_xdp|packet]]
set -euo pipefail
cd "$(dirname "$0")/.."
daemon=0
netdev=
port=net_af_packet0,iface=rdma
case ${1:-} in
  --daemon) daemon=1 ;;
  --packet) port=packet:rdma ;;
  --netdev) netdev=${2:-af_packet} ;;
  "") ;;
  *)
    echo "usage: scripts/demo.sh [--daemon | --packet | --netdev [af_packet|af_xdp|packet]]" >&2
    exit 2
    ;;
esac
bash scripts/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "$(nproc)" --target uroce-run uroce-ibverbs uroced

prefix=uroce-demo-
run="$PWD/build/bin/uroce-run"
work=$(mktemp -d)
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null || true
  wait 2>/dev/null || true
  scripts/testbed.sh down "$prefix"
  rm -rf "$work"
}
trap cleanup EXIT
if [[ -n $netdev ]]; then
  TESTBED_LAYOUT=netdev scripts/testbed.sh up "$prefix"
else
  scripts/testbed.sh up "$prefix"
fi

if ((daemon)); then
  for host in a b; do
    [[ $host == a ]] && n=1 || n=2
    cat >"$work/$host.toml" <<EOF
[[device]]
name = "uroce0"
port = "net_af_packet0,iface=rdma"
ip = ["10.77.0.$n/24"]
[daemon]
socket = "$work/$host.sock"
EOF
    ip netns exec "$prefix$host" "$PWD/build/bin/uroced" --config "$work/$host.toml" \
      >"$work/uroced-$host.log" 2>&1 &
    for _ in $(seq 100); do
      grep -q "listening on" "$work/uroced-$host.log" && break
      sleep 0.1
    done
    echo "uroced on host $host: $(grep -m1 'listening on' "$work/uroced-$host.log")"
  done
fi

# host a is 10.77.0.1 to uroce (192.168.77.1 to the kernel), b is .2; in
# netdev mode a is 10.78.0.1 to both, b .2
peer=192.168.77.2
[[ -n $netdev ]] && peer=10.78.0.2
over_uroce() {  # HOST PROGRAM ARGS...
  local host=$1 n
  shift
  [[ $host == a ]] && n=1 || n=2
  if [[ -n $netdev ]]; then
    ip netns exec "$prefix$host" "$run" --netdev eth --port "$netdev" -- "$@"
  elif ((daemon)); then
    ip netns exec "$prefix$host" env UROCE_DAEMON_SOCKET="$work/$host.sock" "$run" -- "$@"
  else
    ip netns exec "$prefix$host" "$run" --port "$port" --ip "10.77.0.$n/24" -- "$@"
  fi
}

pair() {  # PROGRAM ARGS... : server on b, client on a
  echo
  echo "### $*   (uroce0 on host a -> uroce0 on host b)"
  over_uroce b "$@" >/tmp/uroce-demo-server.log 2>&1 &
  local server=$!
  for _ in $(seq 100); do
    ip netns exec "${prefix}b" ss -Hltn 'sport = :18515' | grep -q LISTEN && break
    sleep 0.1
  done
  over_uroce a "$@" "$peer"
  wait "$server"
}

over_uroce a ibv_devinfo -d uroce0
pair ib_write_bw -d uroce0 -s 65536 -n 5000 --report_gbits
pair ib_send_lat -d uroce0 -s 2 -n 10000
