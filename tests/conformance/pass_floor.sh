#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The floor under rdma-core's test suite over uroce: the cases passed by
# all the modules pyverbs.sh ran (their counts in RESULTS/MODULE) may not
# fall below the number in FLOOR_FILE. A module that lost cases to skips
# still exits 0 by itself; the total catches it. Raise the floor when a
# feature makes more cases pass.
#   tests/conformance/pass_floor.sh RESULTS FLOOR_FILE MODULE...
set -euo pipefail

results=$1
floor_file=$2
shift 2
floor=$(grep -Ev '^[[:space:]]*(#|$)' "$floor_file" | head -1)
if [[ ! $floor =~ ^[0-9]+$ ]]; then
  echo "$floor_file: no pass floor in it" >&2
  exit 1
fi
total=0
missing=()
for module in "$@"; do
  if [[ ! -f $results/$module ]]; then
    missing+=("$module")
    continue
  fi
  read -r _ passed _ skipped <"$results/$module"
  printf '%-24s %4d passed %4d skipped\n' "$module" "$passed" "$skipped"
  total=$((total + passed))
done
if ((${#missing[@]} > 0)); then
  echo "no result from ${missing[*]}: those modules did not finish" >&2
  exit 1
fi
echo "pyverbs: $total cases passed, floor $floor"
if ((total < floor)); then
  echo "pyverbs: $total passed is below the floor of $floor ($floor_file)" >&2
  exit 1
fi
if ((total > floor)); then
  echo "pyverbs: $((total - floor)) above the floor: raise it in $floor_file"
fi
