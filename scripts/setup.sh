#!/usr/bin/env bash
# Installs every package uroce needs to build, test and benchmark, from
# Debian's archive only. Idempotent: a second run changes nothing.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
  echo "setup.sh: run as root (it installs Debian packages)" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# tshark asks whether non-root users may capture; answer before it asks.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
# iperf3 offers to run as a daemon: the benchmarks start their own.
echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections

packages=(
  # build
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  # the datapath and its libraries
  libdpdk-dev libisal-dev zlib1g-dev libboost-dev libspdlog-dev libfmt-dev libtomlplusplus-dev
  # the XDP program of the af_xdp port (clang -target bpf; bpf_helpers.h)
  libbpf-dev
  # the verbs surface and the unmodified programs that must run over it
  # (rdmacm-utils: rping, ucmatose, udaddy, rdma_server/client on librdmacm)
  libibverbs-dev ibverbs-utils perftest rdmacm-utils
  # ibstat (infiniband-diags) and Prometheus' node_exporter (its infiniband
  # collector): read the devices from sysfs (uroce-run --sysfs)
  infiniband-diags prometheus-node-exporter
  # rdma-core's own verbs test suite, run over uroce by tests/conformance
  python3-pyverbs
  # middleware over verbs: UCX 1.13 (ucx_info, ucx_perftest; brings libucx0)
  ucx-utils
  # Open MPI over UCX: mpirun, and mpicc for tests/mpi's job
  openmpi-bin libopenmpi-dev
  # qperf -cm1 and libfabric's verbs provider (fi_pingpong), in netdev mode
  qperf libfabric-bin
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev tshark iproute2 procps ethtool iputils-ping
  # the testbed's scenarios: tables, plots, a PFC storm from a raw socket
  gnuplot-nox python3
  # what users would use instead, for the side-by-side benchmarks
  # (dpdk-dev has dpdk-testpmd, the forwarder uroce-switch is measured against)
  iperf3 sockperf dpdk-dev
  # instructions per packet (bench/datapath_cost.sh): callgrind, where a
  # virtual machine has no hardware counters for perf
  valgrind
)

apt-get update -q
# Debian's node_exporter package enables and starts a service; the tests
# run it themselves, inside their namespaces. Installed here, it stays off.
had_node_exporter=0
dpkg-query -W -f='${Status}' prometheus-node-exporter 2>/dev/null | grep -q "ok installed" &&
  had_node_exporter=1
apt-get install -y -q --no-install-recommends "${packages[@]}"
if ((!had_node_exporter)) && command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  systemctl disable --now prometheus-node-exporter >/dev/null 2>&1 || true
fi
