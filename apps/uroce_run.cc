/* SPDX-License-Identifier: BSD-3-Clause */
// uroce-run: runs a program over uroce. It preloads liburoce-ibverbs.so
// (which serves libibverbs for uroce devices) and hands the program its
// configuration, then executes it in place:
//
//   uroce-run [--config FILE] [--port DPDK_DEVICE --ip CIDR[,CIDR...] |
//              --netdev IFACE [--port af_packet|af_xdp|packet]]
//             [--mtu N] [--hugepages] [--name NAME] [--sysfs] -- PROGRAM [ARGS...]
//
// --port and --ip describe one device (uroce0 unless --name says
// otherwise) without a configuration file; with --config they replace
// that file's first device. --netdev IFACE describes instead a device on
// a kernel interface, with the interface's addresses (netdev mode); its
// --port is then af_packet (the default), af_xdp, packet (uroce's own
// packet port, drivers/packet), or a DPDK device on the interface. --sysfs runs the program in a
// mount namespace of its own where /sys/class/infiniband lists the uroce devices (private_sysfs.h).

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "private_sysfs.h"

namespace {

void usage(FILE* out) {
  std::fprintf(
      out,
      "usage: uroce-run [--config FILE] [--port DPDK_DEVICE --ip CIDR[,CIDR...] | --netdev IFACE]\n"
      "                 [--mtu N] [--hugepages] [--lcores N] [--name NAME] [--sysfs]\n"
      "                 -- PROGRAM [ARGS...]\n"
      "\n"
      "Runs PROGRAM with uroce serving libibverbs for uroce devices, e.g.\n"
      "  uroce-run --port net_af_packet0,iface=veth1 --ip 10.0.1.1/24 -- \\\n"
      "      ib_write_bw -d uroce0\n"
      "  uroce-run --netdev eth0 -- ib_write_bw -d uroce0   (eth0's own addresses)\n"
      "  uroce-run --netdev eth0 --port af_xdp -- ...       (the port on AF_XDP)\n"
      "  uroce-run --port packet:veth1 --ip 10.0.1.1/24 -- ...  (uroce's packet port, UDP GSO)\n"
      "--lcores: the device's engine on N lcores, each on a queue of the port\n"
      "--sysfs: the devices in /sys/class/infiniband too (ibstat, UCX's GID types,\n"
      "Open MPI's device match), in a mount namespace of the program's own (for a\n"
      "user other than root, with a user namespace around it)\n");
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The binding beside this executable: ../lib in a build tree, the
// install's library directory otherwise; UROCE_LIBRARY overrides both.
std::string find_library() {
  if (const char* p = std::getenv("UROCE_LIBRARY"); p && *p) return p;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return {};
  self[n] = '\0';
  const std::string bin = dir_of(self);
  for (const char* rel : {"/../lib/", "/../" UROCE_INSTALL_LIBDIR "/"}) {
    const std::string candidate = bin + rel + "liburoce-ibverbs.so";
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return {};
}

// LD_PRELOAD with the binding ahead of what was preloaded already, so
// that its verbs win; a sanitizer's runtime stays first of all, where
// the runtime insists on being (ASan refuses to start otherwise), which
// is how the sanitizer builds run programs over an instrumented binding.
std::string preload_list(const std::string& lib, const char* old) {
  std::string first, rest;
  const std::string list = old ? old : "";
  std::size_t at = 0;
  while (at < list.size()) {
    const std::size_t end = std::min(list.find_first_of(": ", at), list.size());
    const std::string entry = list.substr(at, end - at);
    at = end + 1;
    if (entry.empty()) continue;
    const std::string name = entry.substr(entry.rfind('/') + 1);
    const bool runtime = name.rfind("libasan", 0) == 0 || name.rfind("libtsan", 0) == 0 ||
                         name.rfind("libubsan", 0) == 0 || name.rfind("libclang_rt.", 0) == 0;
    std::string& to = runtime ? first : rest;
    to += (to.empty() ? "" : ":") + entry;
  }
  return (first.empty() ? "" : first + ":") + lib + (rest.empty() ? "" : ":" + rest);
}

}  // namespace

int main(int argc, char** argv) {
  std::string config, port, ip, netdev, mtu, lcores, name = "uroce0";
  bool hugepages = false, sysfs = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "uroce-run: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      *out = argv[++i];
    };
    if (a == "--") {
      ++i;
      break;
    } else if (a == "--config") {
      value(&config);
    } else if (a == "--port") {
      value(&port);
    } else if (a == "--ip") {
      value(&ip);
    } else if (a == "--netdev") {
      value(&netdev);
    } else if (a == "--mtu") {
      value(&mtu);
    } else if (a == "--lcores") {
      value(&lcores);
    } else if (a == "--name") {
      value(&name);
    } else if (a == "--hugepages") {
      hugepages = true;
    } else if (a == "--sysfs") {
      sysfs = true;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "uroce-run: unknown option %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (i >= argc) {
    usage(stderr);
    return 2;
  }
  if (port.empty() != ip.empty() && netdev.empty()) {
    std::fprintf(stderr, "uroce-run: --port and --ip go together\n");
    return 2;
  }
  if (!netdev.empty() && !ip.empty()) {
    std::fprintf(stderr, "uroce-run: --netdev takes the interface's addresses, not --ip\n");
    return 2;
  }
  const std::string lib = find_library();
  if (lib.empty()) {
    std::fprintf(stderr, "uroce-run: cannot find liburoce-ibverbs.so (set UROCE_LIBRARY)\n");
    return 1;
  }

  if (!config.empty()) setenv("UROCE_CONFIG", config.c_str(), 1);
  if (!port.empty() || !netdev.empty()) {
    setenv("UROCE_DEVICE0_NAME", name.c_str(), 1);
    if (!port.empty()) setenv("UROCE_DEVICE0_PORT", port.c_str(), 1);
    if (!ip.empty()) setenv("UROCE_DEVICE0_IP", ip.c_str(), 1);
    if (!netdev.empty()) setenv("UROCE_DEVICE0_NETDEV", netdev.c_str(), 1);
    if (!mtu.empty()) setenv("UROCE_DEVICE0_MTU", mtu.c_str(), 1);
    if (hugepages) setenv("UROCE_DEVICE0_HUGEPAGES", "true", 1);
    if (!lcores.empty()) setenv("UROCE_DEVICE0_LCORES", lcores.c_str(), 1);
  }
  if (sysfs) {
    std::string error;
    const std::string tree = uroce::run::private_sysfs(&error);
    if (tree.empty()) {
      std::fprintf(stderr, "uroce-run: --sysfs: %s\n", error.c_str());
      return 1;
    }
    setenv("UROCE_SYSFS_TREE", tree.c_str(), 1);
  }
  setenv("LD_PRELOAD", preload_list(lib, std::getenv("LD_PRELOAD")).c_str(), 1);
  execvp(argv[i], argv + i);
  std::fprintf(stderr, "uroce-run: %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}
