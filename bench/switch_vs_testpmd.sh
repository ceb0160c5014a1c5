#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# uroce-switch's forwarding rate against dpdk-testpmd's io forwarding on
# the same ports, side by side in one run.
#
# Three network namespaces in a line, joined by veth pairs:
#
#   source --veth-- forwarder --veth-- sink
#
# Every process reaches its veths through net_af_packet. The source is
# dpdk-testpmd --forward-mode=txonly, sending as fast as it can; the sink is
# dpdk-testpmd --forward-mode=rxonly, counting what arrives. The forwarder
# between them is, in turn, dpdk-testpmd --forward-mode=io (each mbuf from
# one port straight to the other, untouched: the least work a DPDK
# forwarder can do, so the most it can pass over these ports) and
# uroce-switch with the same two ports (MAC learning, its queues and
# counters). For each frame size and forwarder, traffic flows for a
# warm-up and then for DURATION seconds, over which the source's and the
# sink's port counters are read (DPDK telemetry): frames offered, frames
# that reached the sink per second, and the sink's L2 bit rate (frame
# bytes without FCS, preamble or gap). What the source offers beyond what
# reaches the sink was dropped at the forwarder (its receive ring
# overflowed): the forwarder, not the source, sets the rate.
#
# CPUs: the machine this was written on has two. The forwarder's rate is
# measured only if the forwarder is the bottleneck, so the source gets
# CPU 0 to itself (with the kernel's work of delivering its frames into
# the forwarder's ring, done there too) and the forwarder and the sink,
# both busy-polling, share CPU 1, where the scheduler gives each half of
# it. testpmd's main lcores only print statistics once a second and sit on
# CPU 0. Three busy processes on two cores make the absolute numbers noisy
# (and anything else running on the machine makes them more so), but both
# forwarders run on equal footing: same ports, same ring sizes, same CPU
# share, same source and sink. ROUNDS>1 alternates the two forwarders that
# many times and sums their windows, which evens out slow drifts.
#
# Run as root after building:
#   bench/switch_vs_testpmd.sh [BUILD_DIR]
# Environment: DURATION (seconds per forwarder and frame size, default 10),
# SIZES (frame lengths in bytes without FCS, testpmd's --txpkts; default
# "64 1500"), ROUNDS (default 1),
# WARMUP (seconds of traffic before the window, default 2).
# Needs dpdk-testpmd, which Debian 12 ships in the package dpdk-dev.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
duration=${DURATION:-10}
sizes=${SIZES:-64 1500}
rounds=${ROUNDS:-1}
warmup=${WARMUP:-2}

if [[ $(id -u) -ne 0 ]]; then
  echo "switch_vs_testpmd.sh: run as root (it makes network namespaces)" >&2
  exit 1
fi
if [[ ! -x $build/bin/uroce-switch ]]; then
  echo "switch_vs_testpmd.sh: no $build/bin/uroce-switch: build first" >&2
  exit 1
fi
switch=$(realpath "$build/bin/uroce-switch")
testpmd=$(command -v dpdk-testpmd || true)
if [[ -z $testpmd ]]; then
  echo "switch_vs_testpmd.sh: no dpdk-testpmd (apt-get install dpdk-dev)" >&2
  exit 1
fi

tag=usb-$$
ns_src=$tag-src
ns_fwd=$tag-fwd
ns_snk=$tag-snk
rundir=/var/run/dpdk
work=$(mktemp -d)
pids=()
switch_pids=()  # uroce-switch names its DPDK runtime directory after its pid

cleanup() {
  local pid ns
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for ns in "$ns_src" "$ns_fwd" "$ns_snk"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  wait 2>/dev/null || true
  for ns in "$ns_src" "$ns_fwd" "$ns_snk"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work" "$rundir/$tag-"{src,fwd,snk}
  for pid in "${switch_pids[@]}"; do rm -rf "$rundir/uroce-$pid"; done
}
trap cleanup EXIT
# A signal ends the script through its EXIT trap, which tears down.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the line: source -- forwarder -- sink ---------------------------------
# The veths are made inside their namespaces, so their names cannot clash
# with anything outside; IPv6 is off on them, so that the kernel sends no
# router solicitations or DAD probes into the measurement.
for ns in "$ns_src" "$ns_fwd" "$ns_snk"; do
  ip netns add "$ns"
  ip -n "$ns" link set lo up
done
ip link add usb-s netns "$ns_src" type veth peer name usb-f0 netns "$ns_fwd"
ip link add usb-f1 netns "$ns_fwd" type veth peer name usb-k netns "$ns_snk"
for end in "$ns_src:usb-s" "$ns_fwd:usb-f0" "$ns_fwd:usb-f1" "$ns_snk:usb-k"; do
  ns=${end%%:*} ifc=${end#*:}
  ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$ifc.disable_ipv6=1"
  ip -n "$ns" link set "$ifc" up
done

# uroce-switch gives its net_af_packet ports rings of 4096 frames unless
# told otherwise; every port here gets that ring, so both forwarders have
# the same ones.
vdev() { echo "net_af_packet$1,iface=$2,framecnt=4096"; }
# EAL: no hugepages, no PCI scan, a runtime directory of its own (named
# after the namespace; DPDK telemetry listens there). testpmd sizes its
# default mbuf pool for the largest rings a port could have, over 300 MB
# with net_af_packet: 16384 mbufs are plenty.
cmd=()
testpmd_cmd() {  # NAMESPACE LCORES VDEV... -- TESTPMD_ARGS...: the command in cmd
  local ns=$1 lcores=$2
  shift 2
  cmd=(ip netns exec "$ns" "$testpmd" --lcores "$lcores" --no-huge -m 512 --no-pci
    --file-prefix "$ns")
  while [[ $1 != -- ]]; do cmd+=(--vdev "$1"); shift; done
  shift
  cmd+=(-- --total-num-mbufs=16384 --nb-cores=1 --stats-period=1 "$@")
}

started=
start() {  # LOG COMMAND...: runs COMMAND in the background, its pid in $started
  local log=$1
  shift
  "$@" </dev/null >"$log" 2>&1 &
  started=$!
  pids+=("$started")
}
alive() {
  local s
  s=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $s != Z* ]]
}
wait_for() {  # WHAT PID LOG TEST...: until TEST holds, or fail showing LOG
  local what=$1 pid=$2 log=$3
  shift 3
  for _ in $(seq 300); do
    "$@" && return 0
    alive "$pid" || break
    sleep 0.1
  done
  echo "switch_vs_testpmd.sh: $what did not start; its output:" >&2
  tail -20 "$log" >&2
  exit 1
}
stop() {  # PID...: SIGINT (they print their counters and exit), SIGKILL after 15 s
  local pid
  for pid; do kill -INT "$pid" 2>/dev/null || true; done
  for pid; do
    for _ in $(seq 150); do alive "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    forget "$pid"
  done
}
forget() {  # PID: reaped, so its number may be reused and is no longer ours to kill
  local p keep=()
  for p in "${pids[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  pids=("${keep[@]}")
}

# The window: waits for frames at the sink, lets them flow WARMUP seconds,
# then reads the source's and the sink's counters DURATION seconds apart.
# Prints: seconds, frames sent by the source, frames and bytes received by
# the sink.
cat >"$work/window.py" <<'EOF'
import json, socket, sys, time

src, snk, warmup, duration = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])

def stats(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    s.recv(65536)  # the greeting
    s.send(b"/ethdev/stats,0")
    r = json.loads(s.recv(65536))["/ethdev/stats"]
    s.close()
    return r

deadline = time.monotonic() + 30
while stats(snk)["ipackets"] == 0:
    if time.monotonic() > deadline:
        sys.exit("no frames reached the sink")
    time.sleep(0.1)
time.sleep(warmup)
t0, a, b = time.monotonic(), stats(src), stats(snk)
time.sleep(duration)
t1, c, d = time.monotonic(), stats(src), stats(snk)
print("%.6f %d %d %d" % (t1 - t0, c["opackets"] - a["opackets"], d["ipackets"] - b["ipackets"],
                         d["ibytes"] - b["ibytes"]))
EOF

declare -A secs sent got bytes
switch_drops=0

run() {  # FORWARDER SIZE ROUND
  local fwd=$1 size=$2 out=$work/$1-$2-$3 sink fwdpid src res s n r b
  testpmd_cmd "$ns_snk" 0@0,1@1 "$(vdev 0 usb-k)" -- --port-topology=loop --forward-mode=rxonly
  start "$out.sink" "${cmd[@]}"
  sink=$started
  wait_for "the sink" "$sink" "$out.sink" test -S "$rundir/$ns_snk/dpdk_telemetry.v2"
  if [[ $fwd == testpmd ]]; then
    testpmd_cmd "$ns_fwd" 0@0,1@1 "$(vdev 0 usb-f0)" "$(vdev 1 usb-f1)" -- --forward-mode=io
    start "$out.fwd" "${cmd[@]}"
    fwdpid=$started
    wait_for "testpmd io" "$fwdpid" "$out.fwd" test -S "$rundir/$ns_fwd/dpdk_telemetry.v2"
  else
    # uroce-switch runs its forwarding loop on its main thread: taskset
    # pins it (EAL's own lcore setting affects only its start-up thread).
    start "$out.fwd" ip netns exec "$ns_fwd" taskset -c 1 "$switch" \
      --port "$(vdev 0 usb-f0)" --port "$(vdev 1 usb-f1)"
    fwdpid=$started
    switch_pids+=("$fwdpid")
    wait_for "uroce-switch" "$fwdpid" "$out.fwd" grep -q forwarding "$out.fwd"
  fi
  testpmd_cmd "$ns_src" 0@0,1@0 "$(vdev 0 usb-s)" -- --port-topology=loop \
    --forward-mode=txonly "--txpkts=$size"
  start "$out.src" "${cmd[@]}"
  src=$started
  wait_for "the source" "$src" "$out.src" test -S "$rundir/$ns_src/dpdk_telemetry.v2"
  # In the background, so that a signal need not wait for the window.
  start "$out.win" python3 "$work/window.py" "$rundir/$ns_src/dpdk_telemetry.v2" \
    "$rundir/$ns_snk/dpdk_telemetry.v2" "$warmup" "$duration"
  local win=$started rc=0
  wait "$win" || rc=$?
  forget "$win"
  if ((rc != 0)); then
    echo "switch_vs_testpmd.sh: $fwd, $size-byte frames: $(tail -1 "$out.win")" >&2
    tail -20 "$out.fwd" >&2
    exit 1
  fi
  stop "$src" "$fwdpid" "$sink"
  res=$(cat "$out.win")
  # A testpmd leaves its runtime directory behind; uroce-switch one named
  # after its pid.
  rm -rf "$rundir/$tag-"{src,fwd,snk} "$rundir/uroce-$fwdpid"
  read -r s n r b <<<"$res"
  local k=$fwd/$size
  secs[$k]=$(awk -v x="${secs[$k]:-0}" -v y="$s" 'BEGIN { print x + y }')
  sent[$k]=$((${sent[$k]:-0} + n))
  got[$k]=$((${got[$k]:-0} + r))
  bytes[$k]=$((${bytes[$k]:-0} + b))
  if [[ $fwd == switch ]]; then
    switch_drops=$((switch_drops + $(awk '$1 == "switch" && $3 ~ /^drop_/ { d += $4 } END { print d + 0 }' "$out.fwd")))
  fi
}

begin=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  for size in $sizes; do
    run testpmd "$size" "$round"
    run switch "$size" "$round"
  done
done

# --- the table ---------------------------------------------------------------
mpps() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.3f", n / s / 1e6 }'; }
gbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.3f", b * 8 / s / 1e9 }'; }
lost() { awk -v n="$1" -v r="$2" 'BEGIN { printf "%.0f%%", (n > 0 ? 100 * (n - r) / n : 0) }'; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (y == 0) print "-"; else printf "%.2fx", x / y }'; }
row() {  # LABEL KEY
  local k=$2
  printf "%-30s %12s %10s %10s %9s\n" "$1" "$(mpps "${sent[$k]}" "${secs[$k]}")" \
    "$(mpps "${got[$k]}" "${secs[$k]}")" "$(gbps "${bytes[$k]}" "${secs[$k]}")" \
    "$(lost "${sent[$k]}" "${got[$k]}")"
}

echo
echo "net_af_packet on veth, source -> forwarder -> sink; ${duration} s x ${rounds} per row;"
echo "source on CPU 0, forwarder and sink sharing CPU 1"
printf "%-30s %12s %10s %10s %9s\n" "forwarder, frame size" "offered Mpps" "sink Mpps" "sink Gb/s" "dropped"
for size in $sizes; do
  row "dpdk-testpmd io, $size B" "testpmd/$size"
  row "uroce-switch, $size B" "switch/$size"
  t=$(awk -v n="${got[testpmd/$size]}" -v s="${secs[testpmd/$size]}" 'BEGIN { print n / s }')
  u=$(awk -v n="${got[switch/$size]}" -v s="${secs[switch/$size]}" 'BEGIN { print n / s }')
  printf "%-30s %12s %10s\n" "  uroce-switch / testpmd" "" "$(ratio "$u" "$t")"
done
echo "(dropped: offered frames that did not reach the sink, lost at the forwarder;"
echo " uroce-switch's own drop counters: $switch_drops; the run took $((SECONDS - begin)) s)"
