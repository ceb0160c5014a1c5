#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Checks the layer map (docs/architecture.md) against the code: each
# folder of lib/ and drivers/ (and apps/) may include only the folders the
# table below allows, so an include against the map fails CI. Also: no
# DPDK header and no DPDK link outside drivers/dpdk.
#   scripts/check-layers.sh            (from anywhere; exit 1 on a violation)
set -euo pipefail
cd "$(dirname "$0")/.."

# folder: the folders it may include, bottom of the map first. An include
# "X/..." names folder X (lib/X or drivers/X); the public headers are
# include/uroce: uroce/config.h belongs to config, uroce/uroce.h to api.
declare -A allowed=(
  [counters]=""
  [wire]=""
  [config]=""
  [log]=""
  [stats]="log"
  [transport]="wire counters"
  [pfc]="wire counters"
  [cc]="transport wire counters config"
  [cm]="wire counters"
  [port]="wire counters"
  [engine]="port transport pfc wire counters log"
  [switch]="port pfc wire counters log config"
  [verbs]="engine port transport cc pfc cm wire counters config log stats"
  [daemon]="verbs engine port transport cm wire counters config log stats"
  [api]="verbs wire config"
  [dpdk]="verbs port wire counters log config"
  [packet]="verbs port wire counters log config"
  [ibverbs]="daemon verbs wire log config"
  [rdmacm]="ibverbs verbs cm wire log config"
  [apps]="api daemon dpdk switch verbs port pfc wire counters config log stats"
)

status=0
check_folder() {  # NAME DIR
  local name=$1 dir=$2 line file target layer ok
  while IFS= read -r line; do
    file=${line%%:*}
    target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")
    case $target in
      uroce/config.h) layer=config ;;
      uroce/uroce.h) layer=api ;;
      */*) layer=${target%%/*} ;;
      *) continue ;;  # a header of the same folder, by name
    esac
    [[ $layer == "$name" ]] && continue
    ok=0
    for a in ${allowed[$name]}; do [[ $a == "$layer" ]] && ok=1; done
    if ((!ok)); then
      echo "layers: $file includes \"$target\": $name may not use $layer" >&2
      status=1
    fi
  done < <(grep -rHE '^#include "' "$dir" --include='*.h' --include='*.cc' || true)
}

for dir in lib/* drivers/*; do
  [[ -d $dir ]] || continue
  name=$(basename "$dir")
  if [[ -z ${allowed[$name]+set} ]]; then
    echo "layers: $dir is not on the map (scripts/check-layers.sh, docs/architecture.md)" >&2
    status=1
    continue
  fi
  check_folder "$name" "$dir"
done
check_folder apps apps

# DPDK stays in drivers/dpdk: its headers, and its libraries in the build.
if grep -rlE '#include <(rte_|dpdk)' lib drivers apps --include='*.h' --include='*.cc' |
  grep -v '^drivers/dpdk/'; then
  echo "layers: DPDK headers outside drivers/dpdk (above)" >&2
  status=1
fi
if grep -lE 'PkgConfig::DPDK' lib/*/CMakeLists.txt drivers/ibverbs/CMakeLists.txt \
  drivers/rdmacm/CMakeLists.txt 2>/dev/null; then
  echo "layers: DPDK linked outside drivers/dpdk (above)" >&2
  status=1
fi

((status == 0)) && echo "layers: every include follows the map"
exit "$status"
