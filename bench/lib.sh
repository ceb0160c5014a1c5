# SPDX-License-Identifier: BSD-3-Clause
# Helpers the side-by-side benchmarks share; sourced, not run. Callers set
# $duration (seconds of each timed run) and $run (uroce-run's path).

# KEY VALUE: a figure for bench/speed_goals.sh, which reads the file
# $RESULTS once the benchmarks it runs are done (nothing when unset)
record() { [[ -z ${RESULTS:-} ]] || echo "$1 $2" >>"$RESULTS"; }

wait_listen() {  # NAMESPACE PORT: until a TCP socket listens there (10 s at most)
  for _ in $(seq 200); do
    ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q LISTEN && return
    sleep 0.05
  done
}

wait_udp() {  # NAMESPACE PORT: until a UDP socket is bound there
  for _ in $(seq 200); do
    ip netns exec "$1" ss -Hlun "sport = :$2" | grep -q . && return
    sleep 0.05
  done
}

# perftest result columns: bw "<bytes> <iters> <peak> <average> <rate>",
# lat "<bytes> <iters> <min> <max> <typical> ..."
bw_of() { awk '$1 == 65536 && NF >= 5 { v = $4 } END { print v }' "$1"; }
lat_of() { awk '$1 == 2 && NF >= 7 { v = $5 } END { print v }' "$1"; }
# the message rate (Mpps) of a 64 B bw run; "+ 0" because a warning on
# stderr may follow the figure on its line
rate_of() { awk '$1 == 64 && NF >= 5 { v = $5 + 0 } END { print v }' "$1"; }

# One perftest pair, the server's TCP exchange on 18515:
# OUT_PREFIX SERVER_PREFIX CLIENT_PREFIX PEER TOOL ARGS...
# (a prefix is "ip netns exec NS ...": its fourth word is the namespace)
perftest_pair() {
  local out=$1 sp=$2 cp=$3 peer=$4 ns_s
  shift 4
  ns_s=$(awk '{print $4}' <<<"$sp")
  $sp "$@" >"$out.server" 2>&1 &
  local pid=$!
  wait_listen "$ns_s" 18515
  $cp "$@" "$peer" >"$out.client" 2>&1
  wait "$pid"
}

# One sockperf ping-pong of 14-byte messages, spinning at both ends
# (--nonblocked), as perftest spins on its CQ: OUT SERVER_NS CLIENT_NS IP
# PORT [--tcp]
sockperf_pp() {
  local out=$1 sns=$2 cns=$3 ip=$4 port=$5
  shift 5
  ip netns exec "$sns" sockperf sr -i "$ip" -p "$port" --nonblocked "$@" >/dev/null 2>&1 &
  local sp=$!
  if [[ " $* " == *" --tcp "* ]]; then wait_listen "$sns" "$port"; else wait_udp "$sns" "$port"; fi
  ip netns exec "$cns" sockperf pp -i "$ip" -p "$port" -m 14 -t "$duration" --nonblocked "$@" \
    >"$out" 2>&1 || true
  kill "$sp" 2>/dev/null
  wait "$sp" 2>/dev/null || true
}

iperf_gbps() {  # IPERF3_JSON
  python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9))' "$1"
}
sockperf_p50() { awk '/percentile 50.000 =/ { print $NF }' "$1"; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (x == "" || y == "" || y == 0) print "-"; else printf "%.2fx", x / y }'; }
row() { printf "%-50s %12s %16s\n" "$@"; }

# The CPUs this shell may run on, one number each ("0-2,5" -> 0 1 2 5).
allowed_cpus() {
  local list part parts out=()
  list=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)
  IFS=, read -ra parts <<<"$list"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then
      out+=($(seq "${part%-*}" "${part#*-}"))
    else
      out+=("$part")
    fi
  done
  echo "${out[@]}"
}

# Hugepages for net_memif: 600 more, and /dev/hugepages mounted if it was
# not. memif_hugepages_restore, from the script's EXIT trap, gives back
# what was taken (nothing before memif_hugepages ran).
memif_hugepages() {
  hp_before=$(cat /proc/sys/vm/nr_hugepages)
  hp_mounted=0
  echo $((hp_before + 600)) >/proc/sys/vm/nr_hugepages
  if ! mountpoint -q /dev/hugepages; then
    mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages && hp_mounted=1
  fi
}
memif_hugepages_restore() {
  [[ -n ${hp_before:-} ]] || return 0
  ((hp_mounted)) && umount /dev/hugepages || true
  echo "$hp_before" >/proc/sys/vm/nr_hugepages
}

# A perftest pair over net_memif in NAMESPACE: two uroce processes on
# shared memory through SOCK (MTU 9000, hugepages), the client reaching
# the server's perftest over loopback; their output in OUT.server and
# OUT.client. memif_pair NAMESPACE SOCK OUT TOOL ARGS...
memif_pair() {
  local ns=$1 sock=$2 out=$3
  shift 3
  # The last run's server leaves its socket file, which the next server
  # cannot bind and its client would take for the new server's.
  rm -f "$sock"
  # PIN=1: the server on the last CPU this shell may use and the client
  # on the first, each perftest with its poll thread (EAL's own threads,
  # which mostly sleep, keep every CPU), so that the scheduler does not
  # move them about: a 64 B message rate varies by 2x from run to run
  # without.
  local pin_s=() pin_c=()
  if [[ ${PIN:-0} == 1 ]]; then
    local cpus
    read -ra cpus <<<"$(allowed_cpus)"
    if ((${#cpus[@]} > 1)); then
      pin_s=(taskset -c "${cpus[-1]}")
      pin_c=(taskset -c "${cpus[0]}")
    fi
  fi
  ip netns exec "$ns" "${pin_s[@]}" "$run" --hugepages --mtu 9000 --ip 10.78.0.2/24 \
    --port "net_memif0,role=server,socket=$sock,socket-abstract=no" -- "$@" >"$out.server" 2>&1 &
  local pid=$!
  # The server's port is down until the client's memif connects, and the
  # server listens for perftest's TCP exchange only once it is up: start
  # the client as soon as the socket exists, and again should it have
  # tried TCP before the server listened.
  for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
  for _ in 1 2 3 4 5; do
    ip netns exec "$ns" "${pin_c[@]}" "$run" --hugepages --mtu 9000 --ip 10.78.0.1/24 \
      --port "net_memif0,role=client,socket=$sock,socket-abstract=no" -- "$@" 127.0.0.1 \
      >"$out.client" 2>&1 && break
    grep -q "Couldn't connect" "$out.client" || break
    sleep 0.2
  done
  wait "$pid"
}
