/* SPDX-License-Identifier: BSD-3-Clause */
#include "stats/prometheus.h"

// Boost 1.74 asio uses std::exchange without including <utility> in C++20.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on
#include <charconv>
#include <thread>
#include <unordered_map>
#include <vector>

#include "log/log.h"

namespace uroce::stats {

namespace asio = boost::asio;
using Tcp = asio::ip::tcp;

namespace {

// A request's head larger than this is not a scrape.
constexpr std::size_t kMaxRequest = 8192;

// Counters that go down as well as up (docs/counters.md says "gauge").
bool is_gauge(std::string_view counter) { return counter == "qps" || counter == "listeners"; }

// Metric names are [a-zA-Z_:][a-zA-Z0-9_:]*; the CM's "cm_tx_msgs/req" is
// uroce_cm_tx_msgs_req.
std::string metric_name(std::string_view counter) {
  std::string out = "uroce_";
  for (char c : counter) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == ':';
    out += ok ? c : '_';
  }
  return out;
}

void append_label(std::string& out, std::string_view name, std::string_view value) {
  if (out.back() != '{') out += ',';
  out.append(name).append("=\"");
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
}

// The next space-separated word of `line`, consumed.
std::string_view word(std::string_view& line) {
  const std::size_t start = line.find_first_not_of(' ');
  if (start == std::string_view::npos) return line = {};
  line.remove_prefix(start);
  const std::size_t end = std::min(line.find(' '), line.size());
  const std::string_view w = line.substr(0, end);
  line.remove_prefix(end);
  return w;
}

}  // namespace

std::string prometheus_text(std::string_view snapshot) {
  // A family's samples together, families in the order first seen.
  std::vector<std::pair<std::string, std::string>> families;
  std::unordered_map<std::string, std::size_t> index;
  while (!snapshot.empty()) {
    const std::size_t nl = std::min(snapshot.find('\n'), snapshot.size());
    std::string_view line = snapshot.substr(0, nl);
    snapshot.remove_prefix(std::min(nl + 1, snapshot.size()));
    const std::string_view device = word(line), scope = word(line), counter = word(line),
                           value = word(line);
    std::uint64_t v = 0;
    if (value.empty() ||
        std::from_chars(value.data(), value.data() + value.size(), v).ec != std::errc())
      continue;
    std::string name = metric_name(counter);
    auto [it, added] = index.try_emplace(name, families.size());
    if (added) {
      families.emplace_back(name,
                            "# TYPE " + name + (is_gauge(counter) ? " gauge\n" : " counter\n"));
    }
    std::string& out = families[it->second].second;
    out += name;
    out += '{';
    append_label(out, "device", device);
    if (scope.starts_with("qp:")) {
      append_label(out, "scope", "qp");
      append_label(out, "qpn", scope.substr(3));
    } else if (scope.starts_with("process:")) {
      append_label(out, "scope", "process");
      append_label(out, "pid", scope.substr(8));
    } else {
      append_label(out, "scope", scope);
    }
    out.append("} ").append(std::to_string(v)).append("\n");
  }
  std::string text;
  for (const auto& f : families) text += f.second;
  return text;
}

bool parse_listen_address(std::string_view text, std::string* host, std::uint16_t* port) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return false;
  std::string_view h = text.substr(0, colon);
  const std::string_view p = text.substr(colon + 1);
  if (h.front() == '[') {
    if (h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string_view::npos) {
    return false;  // IPv6 wants its brackets
  }
  unsigned value = 0;
  const auto r = std::from_chars(p.data(), p.data() + p.size(), value);
  if (r.ec != std::errc() || r.ptr != p.data() + p.size() || value > 65535) return false;
  boost::system::error_code ec;
  asio::ip::make_address(std::string(h), ec);
  if (ec) return false;
  *host = h;
  *port = static_cast<std::uint16_t>(value);
  return true;
}

struct PrometheusServer::Impl {
  asio::io_context io;
  Tcp::acceptor acceptor{io};
  Snapshot snapshot;
  std::thread thread;

  void accept();
  void serve(std::shared_ptr<Tcp::socket> s);
};

void PrometheusServer::Impl::accept() {
  acceptor.async_accept([this](boost::system::error_code e, Tcp::socket sock) {
    if (e == asio::error::operation_aborted) return;
    if (!e) serve(std::make_shared<Tcp::socket>(std::move(sock)));
    accept();
  });
}

// One request per connection, then close: a scrape needs no more.
void PrometheusServer::Impl::serve(std::shared_ptr<Tcp::socket> s) {
  auto head = std::make_shared<asio::streambuf>(kMaxRequest);
  asio::async_read_until(
      *s, *head, "\r\n\r\n", [this, s, head](boost::system::error_code e, std::size_t) {
        if (e) return;  // gone, or a head too long to be a scrape
        std::string request(asio::buffers_begin(head->data()), asio::buffers_end(head->data()));
        request.resize(request.find("\r\n"));
        std::string status = "200 OK", body;
        if (request.rfind("GET ", 0) != 0) {
          status = "405 Method Not Allowed";
        } else if (const std::string target = request.substr(4, request.find(' ', 4) - 4);
                   target != "/metrics" && target.rfind("/metrics?", 0) != 0) {
          status = "404 Not Found";
        } else {
          body = prometheus_text(snapshot());
        }
        auto reply = std::make_shared<std::string>(
            "HTTP/1.1 " + status +
            "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
        asio::async_write(*s, asio::buffer(*reply),
                          [s, reply](boost::system::error_code, std::size_t) {
                            boost::system::error_code ignored;
                            s->shutdown(Tcp::socket::shutdown_both, ignored);
                          });
      });
}

std::unique_ptr<PrometheusServer> PrometheusServer::start(const std::string& address,
                                                          Snapshot snapshot, std::string* error) {
  std::string host;
  std::uint16_t port = 0;
  if (!parse_listen_address(address, &host, &port)) {
    *error = "'" + address + "' is not an address and port like 127.0.0.1:9464";
    return nullptr;
  }
  std::unique_ptr<PrometheusServer> s(new PrometheusServer());
  s->impl_ = std::make_unique<Impl>();
  Impl& impl = *s->impl_;
  impl.snapshot = std::move(snapshot);
  const Tcp::endpoint at(asio::ip::make_address(host), port);
  boost::system::error_code ec;
  impl.acceptor.open(at.protocol(), ec);
  if (!ec) impl.acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl.acceptor.bind(at, ec);
  if (!ec) impl.acceptor.listen(16, ec);
  if (ec) {
    *error = "cannot listen on " + address + ": " + ec.message();
    return nullptr;
  }
  s->port_ = impl.acceptor.local_endpoint(ec).port();
  impl.accept();
  impl.thread = std::thread([&impl] { impl.io.run(); });
  const bool v6 = host.find(':') != std::string::npos;
  log::get().info("prometheus metrics at http://{}{}{}:{}/metrics", v6 ? "[" : "", host,
                  v6 ? "]" : "", s->port_);
  return s;
}

PrometheusServer::~PrometheusServer() {
  if (!impl_) return;
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace uroce::stats
