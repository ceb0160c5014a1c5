#!/usr/bin/env bash
# Two-host benchmark: RoCEv2 through uroce between two processes, over
# net_af_packet on a veth pair between two network namespaces and over
# net_memif, and kernel TCP over the same veth pair, side by side.
# Throughput: 512 MiB of 64 KiB RDMA WRITEs (16 in flight) against one TCP
# stream of 64 KiB writes. Latency: 64 B RDMA READ round trips against
# 64 B TCP ping-pong. Run as root after building: bench/two_host.sh [BUILD_DIR]
set -euo pipefail

build=${1:-build}
bin=$(realpath "$build/bin/two_host_bench")
work=$(mktemp -d)
ns_a=uroce-bench-a$$
ns_b=uroce-bench-b$$
hp_before=$(cat /proc/sys/vm/nr_hugepages)
mounted=0

cleanup() {
  ip netns pids "$ns_a" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns pids "$ns_b" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  ((mounted)) && umount /dev/hugepages || true
  echo "$hp_before" > /proc/sys/vm/nr_hugepages
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add ua$$ type veth peer name ub$$
ip link set ua$$ netns "$ns_a"
ip link set ub$$ netns "$ns_b"
ip -n "$ns_a" link set ua$$ up
ip -n "$ns_b" link set ub$$ up
ip -n "$ns_a" link set lo up
ip -n "$ns_b" link set lo up

value() { awk -v k="$2" '$1 == "result" && $2 == k { print $3 }' "$1"; }
row() {  # NAME RESULT_FILE
  printf "%-34s %12s %14s %14s\n" "$1" "$(value "$2" write_gbps)" \
    "$(value "$2" latency_p50_us)" "$(value "$2" latency_p99_us)"
}

# uroce over net_af_packet (no kernel IPs on the veths: uroce owns them).
d="$work/afp"; mkdir -p "$d"
ip netns exec "$ns_b" "$bin" roce --role b --device "net_af_packet0,iface=ub$$" \
  --ip 10.79.0.2 --peer 10.79.0.1 --dir "$d" >"$d/b.out" 2>&1 &
ip netns exec "$ns_a" "$bin" roce --role a --device "net_af_packet0,iface=ua$$" \
  --ip 10.79.0.1 --peer 10.79.0.2 --dir "$d" >"$d/a.out" 2>&1
wait

# uroce over net_memif (shared memory; wants hugepages).
echo 384 > /proc/sys/vm/nr_hugepages
if ! mountpoint -q /dev/hugepages; then
  mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages && mounted=1
fi
d="$work/memif"; mkdir -p "$d"
sock="$d/memif.sock"
"$bin" roce --hugepages --role b --device "net_memif0,role=server,socket=$sock,socket-abstract=no" \
  --ip 10.80.0.2 --peer 10.80.0.1 --dir "$d" >"$d/b.out" 2>&1 &
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.05; done
"$bin" roce --hugepages --role a --device "net_memif0,role=client,socket=$sock,socket-abstract=no" \
  --ip 10.80.0.1 --peer 10.80.0.2 --dir "$d" >"$d/a.out" 2>&1
wait

# Kernel TCP over the same veth pair.
ip -n "$ns_a" addr add 10.79.0.1/24 dev ua$$
ip -n "$ns_b" addr add 10.79.0.2/24 dev ub$$
d="$work/tcp"; mkdir -p "$d"
ip netns exec "$ns_b" "$bin" tcp-server --ip 10.79.0.2 --port 5201 >"$d/b.out" 2>&1 &
ip netns exec "$ns_a" "$bin" tcp-client --ip 10.79.0.2 --port 5201 >"$d/a.out" 2>&1
wait

printf "%-34s %12s %14s %14s\n" "two hosts, one stream" "Gb/s" "p50 lat (us)" "p99 lat (us)"
row "uroce RC WRITE, af_packet on veth" "$work/afp/a.out"
row "uroce RC WRITE, memif" "$work/memif/a.out"
row "kernel TCP, same veth" "$work/tcp/a.out"
