#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The device daemon's cost, side by side in one run on one link: two
# namespaces (scripts/testbed.sh, uroce on net_af_packet over the "rdma"
# veth), unmodified perftest
#   in-process: each program opens the port itself (uroce-run --port);
#   uroced:     a daemon on each host owns the port and the programs attach
#               (uroce-run with no port): one more hop through shared
#               memory each way, and the daemon's loop on every frame's path.
# Latency: ib_send_lat 2 B, median (t_typical). Throughput: ib_write_bw
# 64 KiB for DURATION seconds, one pair, then the aggregate of 1, 2, 4 and
# 8 pairs at once through the daemons. Then the CPU an idle daemon takes
# (utime+stime over 5 s, in % of one core), right after traffic (its short
# naps) and after it settled (its long ones).
# Run as root after building: bench/daemon_vs_inprocess.sh [BUILD_DIR] [DURATION] [MTU]
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
duration=${2:-5}
mtu=${3:-1500}
bin=$(realpath "$build/bin")
prefix=uroce-dbench-
work=$(mktemp -d)
a=${prefix}a
b=${prefix}b
daemons=()

cleanup() {
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/testbed.sh down "$prefix"
  rm -rf "$work"
}
trap cleanup EXIT

TESTBED_MTU=$mtu scripts/testbed.sh up "$prefix"

wait_listen() {  # NAMESPACE PORT
  for _ in $(seq 200); do
    ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q LISTEN && return
    sleep 0.05
  done
}
bw_of() { awk '$1 == 65536 && NF >= 5 { v = $4 } END { print v + 0 }' "$1"; }
lat_of() { awk '$1 == 2 && NF >= 7 { v = $5 } END { print v }' "$1"; }

inproc() {  # HOST(a|b)
  local n=1
  [[ $1 == b ]] && n=2
  echo "ip netns exec $prefix$1 $bin/uroce-run --port net_af_packet0,iface=rdma --ip 10.77.0.$n/24 --"
}
attached() {  # HOST
  echo "ip netns exec $prefix$1 env UROCE_DAEMON_SOCKET=$work/$1.sock $bin/uroce-run --"
}

# pair OUT MODE PORT TOOL ARGS...: server on b, client on a.
pair() {
  local out=$1 mode=$2 port=$3
  shift 3
  $($mode b) "$@" -p "$port" >"$out.server" 2>&1 &
  local pid=$!
  wait_listen "$b" "$port"
  $($mode a) "$@" -p "$port" 192.168.77.2 >"$out.client" 2>&1
  wait "$pid"
}

start_daemons() {
  for h in a b; do
    local n=1
    [[ $h == b ]] && n=2
    printf '[[device]]\nname = "uroce0"\nport = "net_af_packet0,iface=rdma"\nip = ["10.77.0.%s/24"]\n[daemon]\nsocket = "%s"\n' \
      "$n" "$work/$h.sock" >"$work/$h.toml"
    ip netns exec "$prefix$h" "$bin/uroced" --config "$work/$h.toml" >"$work/uroced-$h.log" 2>&1 &
    daemons+=($!)
  done
  for h in a b; do
    for _ in $(seq 200); do
      grep -q "listening on" "$work/uroced-$h.log" && break
      sleep 0.05
    done
  done
  if [[ -n ${UROCED_NICE:-} ]]; then  # another nice value than the configured one
    for p in "${daemons[@]}"; do renice -n "$UROCED_NICE" -p "$p" >/dev/null; ps -L -o tid= -p "$p" | xargs -r renice -n "$UROCED_NICE" -p >/dev/null; done
  fi
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
idle_cpu() {  # PID SECONDS: % of one core
  local t0 t1 hz
  hz=$(getconf CLK_TCK)
  t0=$(cpu_ticks "$1")
  sleep "$2"
  t1=$(cpu_ticks "$1")
  echo "scale=1; 100 * ($t1 - $t0) / ($hz * $2)" | bc
}

lat_args=(-d uroce0 -x 1 -F -n 20000)
bw_args=(-d uroce0 -x 1 -F -D "$duration")

# In-process first (no daemon holds the port meanwhile).
pair "$work/lat-in" inproc 18515 ib_send_lat "${lat_args[@]}"
pair "$work/bw-in" inproc 18515 ib_write_bw "${bw_args[@]}"
start_daemons
pair "$work/lat-d" attached 18515 ib_send_lat "${lat_args[@]}"
pair "$work/bw-d" attached 18515 ib_write_bw "${bw_args[@]}"

declare -A agg
for n in 1 2 4 8; do
  pids=()
  for i in $(seq 0 $((n - 1))); do
    pair "$work/agg$n-$i" attached $((18600 + i)) ib_write_bw "${bw_args[@]}" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  total=0
  for i in $(seq 0 $((n - 1))); do
    total=$(echo "$total + $(bw_of "$work/agg$n-$i.client")" | bc)
  done
  agg[$n]=$total
done
busy_cpu=$(idle_cpu "${daemons[0]}" 5)
settled_cpu=$(idle_cpu "${daemons[0]}" 5)

gbps() { echo "scale=2; $1 * 8 * 1048576 / 1000000000" | bc; }
ratio() { echo "scale=2; $1 / $2" | bc; }
lat_in=$(lat_of "$work/lat-in.client")
lat_d=$(lat_of "$work/lat-d.client")
bw_in=$(bw_of "$work/bw-in.client")
bw_d=$(bw_of "$work/bw-d.client")
echo
echo "uroced against in-process, af_packet veth, MTU $mtu, $(nproc) cores, ${duration}s runs"
printf '%-44s %12s %12s %8s\n' "" "in-process" "uroced" "ratio"
printf '%-44s %9s us %9s us %7sx\n' "ib_send_lat 2 B, median" "$lat_in" "$lat_d" "$(ratio "$lat_d" "$lat_in")"
printf '%-44s %7s Gb/s %7s Gb/s %7sx\n' "ib_write_bw 64 KiB, one pair" "$(gbps "$bw_in")" "$(gbps "$bw_d")" \
  "$(ratio "$bw_d" "$bw_in")"
for n in 1 2 4 8; do
  printf '%-44s %12s %7s Gb/s %7sx\n' "ib_write_bw 64 KiB, $n pairs at once, aggregate" "" \
    "$(gbps "${agg[$n]}")" "$(ratio "${agg[$n]}" "${agg[1]}")"
done
printf '%-44s %12s %10s %%\n' "uroced CPU, idle just after traffic" "" "$busy_cpu"
printf '%-44s %12s %10s %%\n' "uroced CPU, idle and settled" "" "$settled_cpu"
