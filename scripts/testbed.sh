#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts as network namespaces, each with two links to the other:
#   ctl:  a kernel veth pair with kernel addresses, for the programs' own
#         TCP exchange (perftest's and the pingpongs' out-of-band setup);
#   rdma: a veth pair with no kernel address, which uroce drives through
#         net_af_packet with addresses of its own.
#
#   scripts/testbed.sh up   [PREFIX]   create <PREFIX>a and <PREFIX>b
#   scripts/testbed.sh down [PREFIX]   remove them
#
# Addresses: ctl 192.168.77.1 (a) and .2 (b); uroce 10.77.0.1 (a) and .2 (b).
# Interfaces in each namespace: ctl, rdma. MTU: $TESTBED_MTU (default 1500).
#
# TESTBED_LAYOUT=netdev builds instead what a production host has: one
# link, "eth", with the kernel's addresses 10.78.0.1/24 and fd78::1/64 (a),
# .2 and ::2 (b), which uroce shares with the kernel in netdev mode
# (uroce-run --netdev eth): the programs' TCP and RDMA go over it alike.
set -euo pipefail

cmd=${1:-}
prefix=${2:-uroce-}
a=${prefix}a
b=${prefix}b
mtu=${TESTBED_MTU:-1500}
layout=${TESTBED_LAYOUT:-two-links}

down() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
}

up_netdev() {
  ip link add eth netns "$a" type veth peer name eth netns "$b"
  local n=1
  for ns in "$a" "$b"; do
    ip -n "$ns" link set lo up
    # No duplicate address detection: the link-local address (GID 0's
    # twin) answers neighbour solicitations as soon as the link is up.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.eth.accept_dad=0
    ip -n "$ns" link set eth mtu "$mtu" up
    ip -n "$ns" addr add "10.78.0.$n/24" dev eth
    ip -n "$ns" addr add "fd78::$n/64" dev eth nodad
    n=$((n + 1))
  done
}

up() {
  down
  ip netns add "$a"
  ip netns add "$b"
  if [ "$layout" = netdev ]; then
    up_netdev
    return
  fi
  for link in ctl rdma; do
    ip link add "$link" netns "$a" type veth peer name "$link" netns "$b"
  done
  local n=1
  for ns in "$a" "$b"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set ctl up
    ip -n "$ns" addr add "192.168.77.$n/24" dev ctl
    # The RDMA link belongs to uroce: no kernel address and no IPv6
    # chatter (router solicitations) on it.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.rdma.disable_ipv6=1
    ip -n "$ns" link set rdma mtu "$mtu" up
    n=$((n + 1))
  done
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *)
    echo "usage: $0 up|down [PREFIX]" >&2
    exit 2
    ;;
esac
