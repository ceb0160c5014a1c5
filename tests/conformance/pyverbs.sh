#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core's own verbs test suite (Debian's python3-pyverbs installs it
# under /usr/share/doc/rdma-core/tests) over uroce: one module, run by
# run_tests.py through uroce-run on a device whose port is one end of a
# veth pair in a network namespace of its own. Prints the module's
# counts and the reason of each group of skips, and writes the counts to
# RESULTS/MODULE for the pass floor (pass_floor.sh). Fails on any
# failure or error, or if nothing ran; exits 77 (which ctest reports as
# Skipped) if every case ran and skipped, none passing: a module that
# passes nothing has not passed.
#   tests/conformance/pyverbs.sh BIN_DIR MODULE RESULTS [HUGEPAGES]  (as root)
# With HUGEPAGES, at least that many 2 MB pages are reserved for the run
# (the module's huge-page cases skip without them) and the count is put
# back afterwards. UROCE_PYVERBS_PRELOAD names libraries to preload into
# the suite's python ahead of uroce (a sanitizer's runtime). With MODE
# daemon the device is a device daemon's (uroced in the namespace), the
# suite attached to it; the counts go to RESULTS/daemon/MODULE. With MODE
# netdev the veth has the kernel address 10.77.0.1, the daemon's device is
# a netdev device on it and the suite sees it in sysfs (uroce-run --sysfs),
# as test_rdmacm needs: it finds the device's interface there, takes the
# interface's address, and forks both sides of each connection onto the
# device. The counts go to RESULTS/netdev/MODULE.
#   tests/conformance/pyverbs.sh BIN_DIR MODULE RESULTS [HUGEPAGES [MODE]]
set -euo pipefail

bin=$1
module=$2
results=$3
hugepages=${4:-0}
mode=${5:-inproc}
if [[ $mode != inproc ]]; then results=$results/$mode; fi
mkdir -p "$results"
rm -f "$results/$module"
nr_huge=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
huge_before=
suite=/usr/share/doc/rdma-core/tests
if [[ ! -f $suite/run_tests.py ]]; then
  echo "rdma-core's test suite is missing: install python3-pyverbs (scripts/setup.sh does)" >&2
  exit 1
fi
work=$(mktemp -d)
ns=upv$$
daemon_pid=
cleanup() {
  if [[ -n $daemon_pid ]]; then kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  if [[ -n $huge_before ]]; then echo "$huge_before" >"$nr_huge"; fi
  rm -rf "$work"
}
trap cleanup EXIT

if ((hugepages > 0)) && [[ -w $nr_huge ]] && (($(cat "$nr_huge") < hugepages)); then
  huge_before=$(cat "$nr_huge")
  echo "$hugepages" >"$nr_huge"
fi

# The suite as a package named tests, its compressed modules expanded.
cp -r "$suite" "$work/tests"
gunzip -f "$work"/tests/*.gz

ip netns add "$ns"
ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n "$ns" link add rdma type veth peer name peer
ip -n "$ns" link set lo up
ip -n "$ns" link set rdma up
ip -n "$ns" link set peer up
if [[ $mode == netdev ]]; then ip -n "$ns" addr add 10.77.0.1/24 dev rdma; fi

status=0
preload=()
if [[ -n ${UROCE_PYVERBS_PRELOAD:-} ]]; then preload=(env "LD_PRELOAD=$UROCE_PYVERBS_PRELOAD"); fi
device=(--port net_af_packet0,iface=rdma --ip 10.77.0.1/24)
if [[ $mode != inproc ]]; then
  if [[ $mode == netdev ]]; then
    printf '[[device]]\nname = "uroce0"\nnetdev = "rdma"\n[daemon]\nsocket = "%s"\n' \
      "$work/uroced.sock" >"$work/uroced.toml"
  else
    printf '[[device]]\nname = "uroce0"\nport = "net_af_packet0,iface=rdma"\nip = ["10.77.0.1/24"]\n[daemon]\nsocket = "%s"\n' \
      "$work/uroced.sock" >"$work/uroced.toml"
  fi
  ip netns exec "$ns" "$bin/uroced" --config "$work/uroced.toml" >"$work/uroced.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 200); do
    grep -q "listening on" "$work/uroced.log" && break
    sleep 0.05
  done
  if ! grep -q "listening on" "$work/uroced.log"; then
    cat "$work/uroced.log" >&2
    echo "pyverbs $module: uroced did not start" >&2
    exit 1
  fi
  preload+=(env "UROCE_DAEMON_SOCKET=$work/uroced.sock")
  device=()
  if [[ $mode == netdev ]]; then device=(--sysfs); fi
fi
ip netns exec "$ns" "${preload[@]}" "$bin/uroce-run" "${device[@]}" -- \
  /usr/bin/python3 "$work/tests/run_tests.py" --dev uroce0 --gid 1 -v "$module" \
  >"$work/log" 2>&1 || status=$?
cat "$work/log"
if [[ -n $daemon_pid ]] && ! kill -0 "$daemon_pid" 2>/dev/null; then
  cat "$work/uroced.log" >&2
  echo "pyverbs $module: uroced died during the run" >&2
  status=1
fi

# unittest's -v lines: "name (tests.module.Class.name) ... result", the
# result sometimes on the next line (after a docstring or a print).
summary=$(/usr/bin/python3 - "$work/log" "$module" <<'PY'
import collections, re, sys
counts = collections.Counter()
skips = collections.Counter()
known = ("ok", "skipped", "FAIL", "ERROR", "expected failure", "unexpected success")
pending = False
for line in open(sys.argv[1], errors="replace"):
    line = line.rstrip("\n")
    m = re.match(r"^test_\S+ \(tests\.\w+\.\S+\)(?: \.\.\. (.*))?$", line)
    if m:
        res = m.group(1) or ""
    elif pending:
        res = line.split(" ... ", 1)[-1]
    else:
        continue
    pending = not res.startswith(known)
    if pending:
        continue
    if res.startswith("ok"):
        counts["passed"] += 1
    elif res.startswith("skipped"):
        counts["skipped"] += 1
        skips[res[len("skipped "):]] += 1
    elif res.startswith("FAIL") or res.startswith("unexpected success"):
        counts["failed"] += 1
    elif res.startswith("ERROR"):
        counts["errors"] += 1
    else:
        counts["passed"] += 1  # an expected failure
total = sum(counts.values())
print(f"pyverbs {sys.argv[2]}: {total} tests, {counts['passed']} passed, "
      f"{counts['skipped']} skipped, {counts['failed']} failed, {counts['errors']} errors")
for reason, n in sorted(skips.items()):
    print(f"  skipped {n}: {reason}")
PY
)
echo "$summary"
ran=$(grep -Eo '^Ran [0-9]+ tests?' "$work/log" | grep -Eo '[0-9]+' || echo 0)
if [[ $status -ne 0 || $ran -eq 0 ]] || grep -Eq '^pyverbs .* [1-9][0-9]* (failed|errors)' <<<"$summary"; then
  echo "pyverbs $module: not clean (exit status $status, $ran tests ran)" >&2
  exit 1
fi
passed=$(sed -nE 's/^pyverbs [^:]+: [0-9]+ tests, ([0-9]+) passed.*/\1/p' <<<"$summary")
skipped=$(sed -nE 's/^pyverbs [^:]+: .* ([0-9]+) skipped.*/\1/p' <<<"$summary")
echo "passed $passed skipped $skipped" >"$results/$module"
if ((passed == 0)); then
  echo "pyverbs $module: every case skipped, none passed" >&2
  exit 77
fi
