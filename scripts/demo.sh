#!/usr/bin/env bash
# The main job, on a machine with no RDMA hardware: two hosts (network
# namespaces joined by a veth pair, and two processes on shared memory)
# move data with RoCEv2 through uroce, beside kernel TCP on the same link.
# Installs what it needs, builds, runs, prints throughput and latency.
# Until the libibverbs binding lands, the two ends are uroce's own
# two-host benchmark; then this runs Debian's unmodified ib_write_bw.
# Run as root: sudo scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "$(nproc)" --target two_host_bench
bash bench/two_host.sh build
