#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# PFC, ECN and loss recovery on the real clock, where the machine's load
# decides how often they act: how far a sender outruns a slow receiver or
# a switch's bottleneck, how soon a watchdog sees a storm, how long a
# dead peer takes to be declared dead. The tests assert what holds
# whatever the load (tests/integration/two_process_test.cc,
# tests/interop/fabric_test.cc) and the timed behaviour on virtual time
# (tests/engine/pfc_engine_test.cc, tests/switch, the simulator); this
# measures the rest, the same scenarios as those tests, and prints each
# number beside the target an idle machine meets. A missed target is
# printed, not fatal: this is a measurement.
#
# Two processes (rdma_peer) over a veth pair between namespaces:
#   pfc      a slow receiver (300 Mb/s from a 512 KiB buffer) with PFC
#   no-pfc   the same without PFC, a 128 KiB buffer
#   storm    XOFF every 200 us from b's side; a's watchdog at 50 ms
#   killed   b killed mid-transfer: a's time to RETRY_EXC_ERR
# Two hosts through uroce-switch (scripts/fabric.sh), ib_write_bw:
#   ecn      a 500 Mb/s bottleneck marking ECN
#   dcqcn    the same with DCQCN
#   sw-pfc   a 300 Mb/s bottleneck with PFC at the switch
#   hop-pfc  the receiver slow (300 Mb/s) with PFC: it pauses the switch,
#            which pauses the sender
# Run as root after building: bench/lossless.sh [BUILD_DIR] [SCENARIO...]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$root/build}")
shift || true
scenarios=("$@")
((${#scenarios[@]})) || scenarios=(pfc no-pfc storm killed ecn dcqcn sw-pfc hop-pfc)
bin=$build/bin
peer=$bin/rdma_peer
work=$(mktemp -d)
ns_a=uroce-ll-a$$
ns_b=uroce-ll-b$$
if_a=ula$$
if_b=ulb$$
fabric=ull$$-

cleanup() {
  for ns in "$ns_a" "$ns_b"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  "$root/scripts/fabric.sh" down "$fabric" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

missed=0
target() {  # DESCRIPTION AWK_CONDITION
  if awk "BEGIN { exit !($2) }"; then
    echo "    met:    $1"
  else
    echo "    MISSED: $1"
    missed=$((missed + 1))
  fi
}

# --- two processes over a veth -------------------------------------------

veth_up() {
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  ip link add "$if_a" type veth peer name "$if_b"
  ip link set "$if_a" netns "$ns_a"
  ip link set "$if_b" netns "$ns_b"
  # No kernel addresses, no IPv6: the addresses are uroce's.
  ip netns exec "$ns_a" sysctl -qw "net.ipv6.conf.$if_a.disable_ipv6=1"
  ip netns exec "$ns_b" sysctl -qw "net.ipv6.conf.$if_b.disable_ipv6=1"
  ip -n "$ns_a" link set "$if_a" up
  ip -n "$ns_b" link set "$if_b" up
}

# peer ROLE DIR ARGS...: one rdma_peer, its output in DIR/ROLE.out.
peer() {
  local role=$1 dir=$2
  shift 2
  local ns=$ns_a iface=$if_a ip=10.77.0.1 other=10.77.0.2
  if [[ $role == b ]]; then ns=$ns_b iface=$if_b ip=10.77.0.2 other=10.77.0.1; fi
  timeout 180 ip netns exec "$ns" "$peer" --role "$role" --device "net_af_packet0,iface=$iface" \
    --ip "$ip" --peer "$other" --dir "$dir" "$@" >"$dir/$role.out" 2>&1
}

# pair NAME "A ARGS" "B ARGS": both peers to the end.
pair() {
  local dir=$work/$1
  mkdir -p "$dir"
  # shellcheck disable=SC2086 # the arguments are words
  peer b "$dir" $3 &
  local b=$!
  # shellcheck disable=SC2086
  peer a "$dir" $2 || echo "  $1: peer a failed (see $dir/a.out)"
  wait "$b" || echo "  $1: peer b failed (see $dir/b.out)"
}

stat() { awk -v k="$2" '$1 == "stat" && $2 == k { v = $3 } END { print v + 0 }' "$work/$1"; }

scenario_pfc() {
  pair pfc "--pfc --pfc-watchdog-ms 0 --timeout 18" \
    "--pfc --xoff-kb 64 --rx-rate 300 --rx-buffer-kb 512 --timeout 18"
  local xoff xon paused drops gbn
  xoff=$(stat pfc/b.out tx_prio3_pause)
  xon=$(stat pfc/b.out tx_prio3_resume)
  paused=$(stat pfc/a.out rx_prio3_pause_duration)
  drops=$(stat pfc/b.out rx_buffer_dropped)
  gbn=$(stat pfc/a.out completer_retry_err)
  echo "pfc: slow receiver with PFC: $xoff XOFF, $xon XON, sender paused $paused us," \
    "$drops dropped, $gbn go-back-N"
  target "the receiver paused the sender ($xoff XOFF > 0)" "$xoff > 0"
  target "nothing dropped ($drops)" "$drops == 0"
  target "nothing resent ($gbn go-back-N)" "$gbn == 0"
}

scenario_no_pfc() {
  pair no-pfc "" "--rx-rate 300 --rx-buffer-kb 128"
  local drops gbn
  drops=$(stat no-pfc/b.out rx_buffer_dropped)
  gbn=$(stat no-pfc/a.out completer_retry_err)
  echo "no-pfc: slow receiver without PFC: $drops dropped, $gbn go-back-N"
  target "the receiver overflowed ($drops dropped > 0)" "$drops > 0"
  target "the sender went back N ($gbn > 0)" "$gbn > 0"
}

scenario_storm() {
  local dir=$work/storm
  mkdir -p "$dir"
  # A stuck NIC on b's side: XOFF for priority 3 every 200 us, unseen by
  # b's own socket (PACKET_QDISC_BYPASS).
  ip netns exec "$ns_b" python3 - "$if_b" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.setsockopt(263, 20, 1)
s.bind((sys.argv[1], 0))
frame = bytes.fromhex("0180c2000001" "02050c123456" "8808" "0101" "0008") + \
    b"\x00\x00" * 3 + b"\xff\xff" + b"\x00\x00" * 4
frame += bytes(60 - len(frame))
while True:
    s.send(frame)
    time.sleep(0.0002)
PY
  local storm=$!
  sleep 0.5
  pair storm "--pfc --timeout 18 --pfc-watchdog-ms 50" "--pfc --timeout 18"
  kill "$storm" 2>/dev/null || true
  wait "$storm" 2>/dev/null || true
  local storms ignored pauses
  storms=$(stat storm/a.out pfc_storm_detected)
  ignored=$(stat storm/a.out rx_pause_ignored)
  pauses=$(stat storm/a.out rx_prio3_pause)
  echo "storm: $pauses XOFF received, $storms storms detected, $ignored pauses ignored"
  target "the watchdog saw the storm within its 50 ms ($storms >= 1)" "$storms >= 1"
  target "and ignored the pauses ($ignored > 0)" "$ignored > 0"
}

scenario_killed() {
  local dir=$work/killed
  mkdir -p "$dir"
  peer b "$dir" &
  local b=$!
  peer a "$dir" --expect-peer-death &
  local a=$!
  for _ in $(seq 3000); do [[ -e $dir/a.writing ]] && break; sleep 0.01; done
  sleep 0.1
  local t0 t1
  t0=$(date +%s.%N)
  ip netns pids "$ns_b" | xargs -r kill -9
  # (bash reports b's death at the first wait: not news here)
  { wait "$a" || echo "  killed: peer a failed (see $dir/a.out)"; } 2>/dev/null
  t1=$(date +%s.%N)
  wait "$b" 2>/dev/null || true
  local secs timeouts
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  timeouts=$(stat killed/a.out local_ack_timeout_err)
  echo "killed: RETRY_EXC_ERR ${secs} s after the kill, $timeouts local ACK timeouts"
  target "declared dead within 10 s (8 timeouts of 67 ms: 0.54 s)" "$secs < 10"
}

# --- two hosts through uroce-switch --------------------------------------

# run_fabric NAME "SWITCH ARGS" "ENV 1" "ENV 2" PERFTEST_ARGS: the switch,
# a server on host 2 and a client on host 1; counters in $work/NAME/.
run_fabric() {
  local name=$1 swargs=$2 env1=$3 env2=$4 args=$5 dir=$work/$1
  mkdir -p "$dir"
  "$root/scripts/fabric.sh" up 2 "$fabric" >/dev/null
  # shellcheck disable=SC2086 # the switch's arguments are words
  UROCE_SWITCH=$bin/uroce-switch "$root/scripts/fabric.sh" switch "$fabric" -- $swargs \
    >"$dir/switch.log" 2>&1 &
  local sw=$!
  for _ in $(seq 1000); do grep -qs forwarding "$dir/switch.log" && break; sleep 0.02; done
  host() {  # N ENV PROGRAM...
    local n=$1 env=$2
    shift 2
    # shellcheck disable=SC2086 # ENV is words
    ip netns exec "${fabric}h$n" env UROCE_STATS_FILE="$dir/h$n.stats" $env "$bin/uroce-run" \
      --port net_af_packet0,iface=rdma --ip "10.78.0.$n/24" -- "$@"
  }
  # shellcheck disable=SC2086 # perftest's arguments are words
  host 2 "$env2" ib_write_bw -d uroce0 -x 1 $args --report_gbits >"$dir/server.log" 2>&1 &
  local server=$!
  for _ in $(seq 600); do
    ip netns exec "${fabric}h2" ss -Hltn 'sport = :18515' | grep -q LISTEN && break
    sleep 0.05
  done
  # shellcheck disable=SC2086
  host 1 "$env1" ib_write_bw -d uroce0 -x 1 $args --report_gbits 192.168.78.2 \
    >"$dir/client.log" 2>&1 || echo "  $name: the client failed (see $dir/client.log)"
  wait "$server" || echo "  $name: the server failed (see $dir/server.log)"
  kill -INT "$sw" 2>/dev/null || true
  wait "$sw" 2>/dev/null || true
  "$root/scripts/fabric.sh" down "$fabric" >/dev/null
}

# counter FILE DEVICE SCOPE.NAME: one counter of a stats file or the
# switch's final table ("DEVICE SCOPE NAME VALUE" lines), summed.
counter() {
  awk -v d="$2" -v k="$3" '$1 == d && $2 "." $3 == k { v += $4 } END { print v + 0 }' "$1"
}
sw_drops() { awk '$1 == "switch" && $3 ~ /^drop_/ { v += $4 } END { print v + 0 }' "$1"; }

scenario_ecn() {
  run_fabric ecn "--rate 1=500mbit --ecn kmin=20000,kmax=200000,pmax=0.1" \
    UROCE_DEVICE0_ECN=true UROCE_DEVICE0_ECN=true "-s 65536 -n 2000"
  local d=$work/ecn marked ce depth
  marked=$(counter "$d/switch.log" switch port1.ecn_marked)
  ce=$(counter "$d/h2.stats" uroce0 port.np_ecn_marked_roce_packets)
  depth=$(counter "$d/switch.log" switch port1.q3.max_depth)
  echo "ecn: 500 Mb/s bottleneck: switch marked $marked, host 2 saw $ce CE, queue max $depth B"
  target "the queue toward host 2 grew past kmin ($depth > 20000 B)" "$depth > 20000"
  target "the switch marked ($marked > 0) and host 2 saw it ($ce > 0)" "$marked > 0 && $ce > 0"
}

scenario_dcqcn() {
  run_fabric dcqcn "--rate 1=500mbit --ecn kmin=20000,kmax=200000,pmax=0.1" \
    UROCE_DCQCN_ENABLED=true UROCE_DCQCN_ENABLED=true "-s 65536 -n 2000"
  local d=$work/dcqcn marked cnps handled
  marked=$(counter "$d/switch.log" switch port1.ecn_marked)
  cnps=$(counter "$d/h2.stats" uroce0 port.np_cnp_sent)
  handled=$(counter "$d/h1.stats" uroce0 port.rp_cnp_handled)
  echo "dcqcn: 500 Mb/s bottleneck: $marked marked, $cnps CNPs sent, $handled handled"
  target "CE brought CNPs ($cnps > 0)" "$cnps > 0"
  target "the sender cut its rate ($handled > 0)" "$handled > 0"
}

scenario_sw_pfc() {
  local pfc="UROCE_PFC_ENABLED=true UROCE_PFC_WATCHDOG_MS=0"
  run_fabric sw-pfc "--rate 1=300mbit --pfc" "$pfc" "$pfc" "-s 65536 -n 1000 -u 18"
  local d=$work/sw-pfc xoff paused drops gbn
  xoff=$(counter "$d/switch.log" switch port0.tx_prio3_pause)
  paused=$(counter "$d/h1.stats" uroce0 pfc.rx_prio3_pause)
  drops=$(sw_drops "$d/switch.log")
  gbn=$(counter "$d/h1.stats" uroce0 port.completer_retry_err)
  echo "sw-pfc: 300 Mb/s bottleneck with PFC: switch sent $xoff XOFF, host 1 took $paused," \
    "$drops dropped, $gbn go-back-N"
  target "the switch paused host 1 ($xoff > 0, received $paused)" "$xoff > 0 && $paused > 0"
  target "nothing dropped ($drops) or resent ($gbn)" "$drops == 0 && $gbn == 0"
}

scenario_hop_pfc() {
  local pfc="UROCE_PFC_ENABLED=true UROCE_PFC_WATCHDOG_MS=0"
  run_fabric hop-pfc "--pfc" "$pfc" \
    "$pfc UROCE_PFC_XOFF_KB=64 UROCE_FAULT_RX_RATE_MBPS=300 UROCE_FAULT_RX_BUFFER_KB=512" \
    "-s 65536 -n 1000 -u 18"
  local d=$work/hop-pfc h2 swrx swtx h1 drops
  h2=$(counter "$d/h2.stats" uroce0 pfc.tx_prio3_pause)
  swrx=$(counter "$d/switch.log" switch port1.rx_prio3_pause)
  swtx=$(counter "$d/switch.log" switch port0.tx_prio3_pause)
  h1=$(counter "$d/h1.stats" uroce0 pfc.rx_prio3_pause)
  drops=$(sw_drops "$d/switch.log")
  echo "hop-pfc: host 2 sent $h2 XOFF, the switch took $swrx and sent $swtx, host 1 took $h1;" \
    "$drops dropped"
  target "host 2 paused the switch ($h2 > 0, received $swrx)" "$h2 > 0 && $swrx > 0"
  target "the switch passed the pressure on ($swtx > 0, received $h1)" "$swtx > 0 && $h1 > 0"
  target "nothing dropped ($drops)" "$drops == 0"
}

veth_up
for s in "${scenarios[@]}"; do
  case $s in
    pfc) scenario_pfc ;;
    no-pfc) scenario_no_pfc ;;
    storm) scenario_storm ;;
    killed) scenario_killed ;;
    ecn) scenario_ecn ;;
    dcqcn) scenario_dcqcn ;;
    sw-pfc) scenario_sw_pfc ;;
    hop-pfc) scenario_hop_pfc ;;
    *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
done
echo "lossless: $missed targets missed"
