#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A small RoCE fabric on one machine: N hosts as network namespaces, each
# with a data link to a switch namespace where uroce-switch forwards
# between them, and a management network on a kernel bridge for the
# programs' own TCP exchange.
#
#   scripts/fabric.sh up N [PREFIX]    create hosts <PREFIX>h1..hN and <PREFIX>sw
#   scripts/fabric.sh down [PREFIX]    remove them (and anything running in them)
#   scripts/fabric.sh switch [PREFIX] -- ARGS...
#                                      run uroce-switch in <PREFIX>sw, one port per
#                                      host in host order (port i-1 faces host i)
#
# Host i: interface "rdma" (no kernel address; uroce uses 10.78.0.i/24) and
# interface "ctl" (192.168.78.i/24, on the bridge). The switch namespace
# has "p1".."pN" (the hosts' data links) and the bridge "mgmt".
# MTU of the data links: $FABRIC_MTU (default 1500).
set -euo pipefail

cmd=${1:-}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
mtu=${FABRIC_MTU:-1500}

down() {
  local prefix=$1
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}(h[0-9]+|sw)$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}

up() {
  local n=$1 prefix=$2
  [[ $n =~ ^[0-9]+$ && $n -ge 2 && $n -le 32 ]] || {
    echo "fabric: N must be 2 to 32" >&2
    exit 2
  }
  down "$prefix"
  local sw=${prefix}sw
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add mgmt type bridge
  ip -n "$sw" link set mgmt up
  for i in $(seq 1 "$n"); do
    local h=${prefix}h$i
    ip netns add "$h"
    ip -n "$h" link set lo up
    ip link add rdma netns "$h" type veth peer name "p$i" netns "$sw"
    ip link add ctl netns "$h" type veth peer name "m$i" netns "$sw"
    # The data links belong to uroce and uroce-switch: no kernel address
    # and no IPv6 chatter on them.
    ip netns exec "$h" sysctl -qw net.ipv6.conf.rdma.disable_ipv6=1
    ip netns exec "$sw" sysctl -qw "net.ipv6.conf.p$i.disable_ipv6=1"
    ip -n "$h" link set rdma mtu "$mtu" up
    ip -n "$sw" link set "p$i" mtu "$mtu" up
    ip -n "$h" addr add "192.168.78.$i/24" dev ctl
    ip -n "$h" link set ctl up
    ip -n "$sw" link set "m$i" master mgmt up
  done
}

case "$cmd" in
  up)
    up "${1:?usage: $0 up N [PREFIX]}" "${2:-uroce-fab-}"
    ;;
  down)
    down "${1:-uroce-fab-}"
    ;;
  switch)
    prefix=uroce-fab-
    if [[ ${1:-} != -- && -n ${1:-} ]]; then
      prefix=$1
      shift
    fi
    [[ ${1:-} == -- ]] && shift
    ports=()
    for p in $(ip -n "${prefix}sw" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' |
      grep -E '^p[0-9]+$' | sort -V); do
      ports+=(--port "net_af_packet$((${#ports[@]} / 2)),iface=$p")
    done
    exec ip netns exec "${prefix}sw" "${UROCE_SWITCH:-$root/build/bin/uroce-switch}" "${ports[@]}" "$@"
    ;;
  *)
    sed -n '3,19p' "$0" >&2
    exit 2
    ;;
esac
