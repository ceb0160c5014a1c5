/* SPDX-License-Identifier: BSD-3-Clause */
// uroce: manages the device daemon's devices, as `rdma link` manages the
// kernel's RDMA links (`rdma link add rxe0 type rxe netdev eth0`):
//
//   uroce [--socket PATH] link add NAME netdev IFACE [port af_packet|af_xdp|packet]
//   uroce [--socket PATH] link show [NAME]
//   uroce [--socket PATH] link delete NAME
//
// It speaks to uroced on [daemon] socket (or PATH; protocol.h). `add`
// gives the running daemon a netdev device on IFACE, read in the daemon's
// network namespace; programs that start from then on find it. `delete`
// removes one that no program is attached to. `show` prints each device
// as `rdma link show` does, with its port, MTU, attached programs and
// GIDs (docs/netdev-mode.md).

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/protocol.h"
#include "uroce/config.h"

namespace {

namespace daemon = uroce::daemon;

constexpr char kUsage[] =
    "usage: uroce [--socket PATH] link add NAME netdev IFACE [port af_packet|af_xdp|packet]\n"
    "       uroce [--socket PATH] link show [NAME]\n"
    "       uroce [--socket PATH] link delete NAME\n";

// A TOML string: the name and the interface are a user's words.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// One request to the daemon; its reply, or a message on stderr and false.
bool ask(const std::string& socket, daemon::Op op, const std::string& text,
         daemon::Message* reply) {
  const int fd = daemon::connect_daemon(socket);
  if (fd < 0) {
    std::fprintf(stderr, "uroce: no uroced on %s: %s\n", socket.c_str(), std::strerror(errno));
    return false;
  }
  daemon::Message request;
  request.op = op;
  request.text = text;
  const bool ok = daemon::call(fd, request, reply);
  close(fd);
  if (!ok) {
    std::fprintf(stderr, "uroce: uroced on %s: %s\n", socket.c_str(), std::strerror(errno));
    return false;
  }
  if (reply->op == daemon::Op::kError) {
    std::fprintf(stderr, "uroce: %s (%s)\n", reply->text.c_str(),
                 std::strerror(static_cast<int>(reply->value)));
    return false;
  }
  return true;
}

// "uroce0 state=up netdev=eth0 port=... mtu=1500 programs=0 gids=a,b" as
// rdma link show prints a link, and the rest on a second line.
void print_link(const std::string& line) {
  std::istringstream in(line);
  std::string name, field;
  in >> name;
  std::string state, netdev, port, mtu, programs, gids;
  while (in >> field) {
    const auto eq = field.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "state") state = value == "up" ? "ACTIVE" : "DOWN";
    if (key == "netdev") netdev = value;
    if (key == "port") port = value;
    if (key == "mtu") mtu = value;
    if (key == "programs") programs = value;
    if (key == "gids") gids = value;
  }
  std::printf("link %s/1 state %s physical_state %s", name.c_str(), state.c_str(),
              state == "ACTIVE" ? "LINK_UP" : "DISABLED");
  if (!netdev.empty()) std::printf(" netdev %s", netdev.c_str());
  std::printf("\n    port %s mtu %s programs %s\n", port.c_str(), mtu.c_str(), programs.c_str());
  if (!gids.empty()) std::printf("    gids %s\n", gids.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string socket;
  if (args.size() >= 2 && args[0] == "--socket") {
    socket = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.size() < 2 || args[0] != "link") {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (socket.empty()) {
    const uroce::ConfigResult r = uroce::load_config();
    if (!r.config) {
      std::fprintf(stderr, "uroce: %s\n", r.error.c_str());
      return 2;
    }
    socket = r.config->daemon_socket;
  }
  const std::string& verb = args[1];
  daemon::Message reply;
  if (verb == "add") {
    // NAME netdev IFACE [port PORT], in any order after NAME, as rdma's.
    if (args.size() < 5 || (args.size() - 3) % 2 != 0) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    std::string table = "[[device]]\nname = " + quoted(args[2]) + "\n";
    bool netdev = false;
    for (std::size_t i = 3; i + 1 < args.size(); i += 2) {
      if (args[i] == "netdev") {
        netdev = true;
      } else if (args[i] != "port") {
        std::fprintf(stderr, "uroce: link add: unknown '%s' (netdev, port)\n", args[i].c_str());
        return 2;
      }
      table += args[i] + " = " + quoted(args[i + 1]) + "\n";
    }
    if (!netdev) {
      std::fputs("uroce: link add: netdev IFACE is required\n", stderr);
      return 2;
    }
    if (!ask(socket, daemon::Op::kLinkAdd, table, &reply)) return 1;
    return 0;
  }
  if (verb == "delete" || verb == "del") {
    if (args.size() != 3) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    return ask(socket, daemon::Op::kLinkDelete, args[2], &reply) ? 0 : 1;
  }
  if (verb == "show" || verb == "list") {
    if (args.size() > 3) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    if (!ask(socket, daemon::Op::kLinkShow, "", &reply)) return 1;
    bool found = false;
    std::istringstream lines(reply.text);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      if (args.size() == 3 && line.substr(0, line.find(' ')) != args[2]) continue;
      print_link(line);
      found = true;
    }
    if (args.size() == 3 && !found) {
      std::fprintf(stderr, "uroce: no device %s\n", args[2].c_str());
      return 1;
    }
    return 0;
  }
  std::fputs(kUsage, stderr);
  return 2;
}
