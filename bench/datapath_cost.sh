#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The datapath's instructions per packet, beyond the copy and the CRC:
# datapath_cost (two engines joined in memory, one thread) under
# callgrind, which counts the instructions of the transfer alone. A
# virtual machine has no hardware counters for perf stat; callgrind counts
# instructions the same anywhere (the engines' virtual time step comes
# from a timed run, so a loaded machine moves the counts a little).
#   - total: every instruction of the transfer, both engines, divided by
#     the data packets (the ACKs the responder sends are part of what a
#     data packet costs);
#   - copy: memcpy/memmove (the payload into frames and out of them);
#   - CRC: the CRC-32 kernels (ISA-L's crc32_gzip_refl under the ICRC);
#   - the rest is the datapath's own: posting, the transport, building
#     and parsing headers, the ICRC's masking, the port, completions.
# Also the rate of the same transfer on one core, without callgrind. The
# last row runs each host's engine on two lcores (datapath_cost --lcores
# 2, still one thread), the QPs placed so that every frame arrives on the
# other lcore's queue and is handed over: what spreading QPs over lcores
# adds to a packet at worst.
# Run after building: bench/datapath_cost.sh [BUILD_DIR] [WRITES]
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
writes=${2:-20000}
bin="$build/bin/datapath_cost"
command -v valgrind >/dev/null || {
  echo "datapath_cost: valgrind is not installed (scripts/setup.sh installs it)" >&2
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

result() { awk -v k="$2" '$1 == "result" && $2 == k { print $3 }' "$1"; }

printf '%-8s %6s %9s %9s %9s %9s %9s %9s %13s\n' size lcores packets total port copy crc datapath \
  "Mpps, 1 core"
for run in "64 1" "1024 1" "4096 1" "64 2"; do
  read -r size lcores <<<"$run"
  tag=$size.$lcores
  # At full speed first: the rate, and the time an iteration of the loop
  # takes, which the engines' virtual time then advances by under callgrind.
  "$bin" --size "$size" --lcores "$lcores" --count $((writes * 10)) >"$work/rate.$tag"
  step=$(result "$work/rate.$tag" ns_per_iteration)
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.$tag" \
    "$bin" --size "$size" --lcores "$lcores" --count "$writes" --step-ns "$step" \
    >"$work/out.$tag" 2>"$work/vg.$tag"
  packets=$(result "$work/out.$tag" data_packets)
  if [[ $(result "$work/out.$tag" instrumented) != 1 ]]; then
    echo "datapath_cost: built without valgrind's headers; rebuild after scripts/setup.sh" >&2
    exit 1
  fi
  # callgrind_annotate lists "N (pct)  file:function [object]" per
  # function: self cost, and inclusive cost for the port's entry points.
  # --auto=no: no annotated source lines, whose counts would add to the
  # functions' own.
  callgrind_annotate --auto=no --threshold=100 "$work/cg.$tag" >"$work/self.$tag"
  callgrind_annotate --auto=no --threshold=100 --inclusive=yes "$work/cg.$tag" >"$work/incl.$tag"
  port=$(awk 'function n(x) { gsub(",", "", x); return x + 0 }
    /PipePort::(tx_alloc|tx_burst|rx_burst|rx_release)\(/ { s += n($1) } END { print s + 0 }' \
    "$work/incl.$tag")
  awk -v p="$packets" -v s="$size" -v l="$lcores" -v port="$port" \
    -v mpps="$(result "$work/rate.$tag" mpps)" '
    function n(x) { gsub(",", "", x); return x + 0 }
    /PROGRAM TOTALS/ { total = n($1) }
    /^ *[0-9,]+ / && !/PROGRAM TOTALS/ {
      if ($0 ~ /mem(cpy|move)/) copy += n($1)
      else if ($0 ~ /crc32|libisal/) crc += n($1)
    }
    END {
      printf "%-8s %6d %9d %9.0f %9.0f %9.0f %9.0f %9.0f %13.2f\n", s " B", l, p, total / p,
        port / p, copy / p, crc / p, (total - port - copy - crc) / p, mpps
      # for bench/speed_goals.sh
      if (ENVIRON["RESULTS"] != "")
        printf "datapath_cost.%s%s %.0f\n", s, l == 1 ? "" : ".lcores" l,
          (total - port - copy - crc) / p >>ENVIRON["RESULTS"]
    }' "$work/self.$tag"
done
echo "(instructions per data packet, the ACKs it takes included; port: the"
echo "in-memory pipe that stands in for a NIC, its allocations included;"
echo "datapath: all the rest but the copy and the CRC; goal 300 or fewer)"
