#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core's suite through the device daemon passes no fewer cases than
# in-process, module by module: pyverbs.sh's counts in RESULTS/daemon/MODULE
# against RESULTS/MODULE.
#   tests/conformance/modes_agree.sh RESULTS MODULE...
set -euo pipefail

results=$1
shift
status=0
for module in "$@"; do
  if [[ ! -f $results/$module || ! -f $results/daemon/$module ]]; then
    echo "$module: no result in both modes (a run did not finish)" >&2
    status=1
    continue
  fi
  read -r _ inproc _ _ <"$results/$module"
  read -r _ daemon _ _ <"$results/daemon/$module"
  printf '%-24s in-process %4d passed, through uroced %4d passed\n' "$module" "$inproc" "$daemon"
  if ((daemon < inproc)); then
    echo "$module: $((inproc - daemon)) fewer cases pass through uroced" >&2
    status=1
  fi
done
exit $status
