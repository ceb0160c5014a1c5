#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI over uroce against MPI over kernel TCP, side by side in one run, on
# the same veth pair (scripts/testbed.sh's "rdma" link, MTU 1500):
#   - Open MPI's pml ucx over UCX's rc_verbs on uroce (one rank per host,
#     each owning its device through uroce-run, on uroce's packet port,
#     the faster of its veth ports: docs/packet-port.md);
#   - Open MPI's pml ob1 with btl tcp on the same link (kernel addresses
#     added to it for that run), what a user without RDMA runs.
# The job is tests/mpi's mpi_check: a ping-pong of 8 B (half its round
# trip is the latency) and of 1 MiB (bandwidth), every byte checked on
# both transports alike, and an allreduce. Both spin: pml ucx polls its
# device; ob1 polls its sockets.
# Then UCX's own active-message latency (ucx_perftest am_lat over
# rc_verbs) against the raw verbs one (ib_send_lat) on the same link:
# what UCX adds to uroce.
# Run as root after building: bench/mpi_vs_tcp.sh [BUILD_DIR] [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
iters=${2:-5000}
run=$(realpath "$build/bin/uroce-run")
check=$(realpath "$build/bin/mpi_check")
prefix=uroce-mpib-
a=${prefix}a
b=${prefix}b
work=$(mktemp -d)

cleanup() {
  scripts/testbed.sh down "$prefix"
  rm -rf "$work"
}
trap cleanup EXIT
scripts/testbed.sh up "$prefix"

# mpirun's launch agent: ip netns exec in place of ssh.
cat >"$work/agent.sh" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in 192.168.77.2) ns=$b ;; *) ns=$a ;; esac
exec ip netns exec \$ns sh -c "\$*"
EOF
chmod +x "$work/agent.sh"

# --bind-to none: the two "hosts" are one machine, and mpirun would bind
# each host's one rank to its core 0, the same core for both: every
# message would then wait for the scheduler to switch ranks (about a 4 ms
# tick for ob1's TCP), which measures the binding, not the transports.
mpi() {  # OUT OPTIONS A_PREFIX B_PREFIX
  ip netns exec "$a" mpirun --allow-run-as-root --mca plm_rsh_agent "$work/agent.sh" \
    --mca oob_tcp_if_include ctl --bind-to none $2 \
    -np 1 --host 192.168.77.1:1 $3 "$check" "$iters" : \
    -np 1 --host 192.168.77.2:1 $4 "$check" "$iters" >"$1" 2>&1
}
uroce_on() { echo "$run --port packet:rdma --ip 10.77.0.$1/24 --"; }

mpi "$work/ucx" "--mca pml ucx" "$(uroce_on 1)" "$(uroce_on 2)"
ip -n "$a" addr add 10.77.0.1/24 dev rdma
ip -n "$b" addr add 10.77.0.2/24 dev rdma
mpi "$work/tcp" "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include rdma" "" ""
ip -n "$a" addr flush dev rdma
ip -n "$b" addr flush dev rdma

# mpi_check: "pingpong ... 8 B: N round trips intact, X us each" and
# "pingpong ... 1 MiB: N round trips intact, Y MB/s".
lat_of() { awk '/ 8 B:/ { print $(NF - 2) / 2 }' "$1"; }
bw_of() { awk '/ 1 MiB:/ { print $(NF - 1) * 8 / 1000 }' "$1"; }
for f in ucx tcp; do
  if [[ -z $(lat_of "$work/$f") || -z $(bw_of "$work/$f") ]]; then
    echo "mpi_vs_tcp: the $f job failed:" >&2
    cat "$work/$f" >&2
    exit 1
  fi
done

# UCX's am_lat over rc_verbs against ib_send_lat, both over uroce.
wait_listen() {  # NAMESPACE PORT
  for _ in $(seq 200); do
    ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q LISTEN && return
    sleep 0.05
  done
}
pair() {  # OUT PORT TOOL ARGS... (server on b, client on a naming b's ctl address)
  local out=$1 port=$2
  shift 2
  ip netns exec "$b" $(uroce_on 2) "$@" >"$out.server" 2>&1 &
  local pid=$!
  wait_listen "$b" "$port"
  ip netns exec "$a" $(uroce_on 1) "$@" 192.168.77.2 >"$out" 2>&1
  wait "$pid"
}
pair "$work/am" 13337 ucx_perftest -t am_lat -x rc_verbs -d uroce0:1 -n "$iters" -w 1000
pair "$work/sl" 18515 ib_send_lat -d uroce0 -s 8 -n "$iters"
# Averages, one-way: ucx_perftest's "Final: <iters> <p50> <average> ..."
# (its p50 is not always filled in) and perftest's t_avg column.
am=$(awk '/Final:/ { print $4 }' "$work/am")
sl=$(awk '$1 == 8 && NF >= 7 { v = $6 } END { print v }' "$work/sl")
sl_typical=$(awk '$1 == 8 && NF >= 7 { v = $5 } END { print v }' "$work/sl")

printf '\nMPI over uroce vs MPI over kernel TCP (veth, MTU 1500, %d iterations)\n' "$iters"
printf '%-40s %12s %12s %8s\n' "" "uroce (ucx)" "TCP (ob1)" "ratio"
awk -v u="$(lat_of "$work/ucx")" -v t="$(lat_of "$work/tcp")" \
  'BEGIN { printf "%-40s %9.2f us %9.2f us %7.2fx\n", "ping-pong 8 B, one-way latency", u, t, u / t }'
awk -v u="$(bw_of "$work/ucx")" -v t="$(bw_of "$work/tcp")" \
  'BEGIN { printf "%-40s %7.2f Gb/s %7.2f Gb/s %7.2fx\n", "ping-pong 1 MiB, bandwidth", u, t, u / t }'
printf '\nWhat UCX adds to the verbs (both over uroce, 8 B, one-way average)\n'
awk -v am="$am" -v sl="$sl" \
  'BEGIN { printf "ucx_perftest am_lat rc_verbs %.2f us, ib_send_lat %.2f us: %.2fx\n", am, sl, am / sl }'
printf 'ib_send_lat typical (p50) %.2f us: the averages are its tail\n' "$sl_typical"
