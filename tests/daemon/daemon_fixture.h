/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The daemon tests' fixture: a device daemon (Server) on a device whose
// port is one end of an in-process pipe, its loop on a thread of its own;
// programs attached to it (verbs devices through AttachedPort, each with
// its own engine, as separate processes would have); and the host at the
// pipe's other end.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon/discovery.h"
#include "daemon/server.h"
#include "support/pipe_driver.h"
#include "verbs_host.h"

namespace uroce::daemon {

using test::Counters;
using test::Host;

class Daemon : public ::testing::Test {
 protected:
  void SetUp() override {
    test::register_pipe_driver();
    char tmpl[] = "/tmp/uroced-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << std::strerror(errno);
    dir_ = tmpl;
    // Unique across processes run side by side, and across the runs of
    // one process (--gtest_repeat): a pipe's first end waits in the
    // driver for its second.
    static int runs = 0;
    pipe_ = "pipe:daemon-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()) + "-" + std::to_string(++runs);
    config_.daemon_socket = dir_ + "/uroced.sock";
    DeviceConfig dc;
    dc.name = "uroce0";
    dc.port = pipe_;
    dc.ip = {IpPrefix{"10.0.0.1", 24}};
    config_.devices = {dc};
    std::string err;
    server_ = Server::open(config_, &err);
    ASSERT_TRUE(server_) << err;
    thread_ = std::thread([this] { server_->run(stop_); });
  }

  void TearDown() override {
    // The loop first, then the remote end of the pipe, then the daemon's
    // port: neither end of a pipe may send into one destroyed.
    stop_loop();
    remote_.reset();
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void stop_loop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // A program attached to uroce0, on the device the daemon lists.
  std::unique_ptr<Host> attach() {
    const std::vector<DeviceConfig> devs = daemon_devices(config_);
    if (devs.size() != 1) {
      ADD_FAILURE() << "the daemon lists " << devs.size() << " devices";
      return nullptr;
    }
    auto h = std::make_unique<Host>(devs[0], config_);
    return h->dev ? std::move(h) : nullptr;
  }

  // The host at the other end of the pipe.
  Host& remote() {
    if (!remote_) {
      DeviceConfig dc;
      dc.name = "remote";
      dc.port = pipe_;
      dc.ip = {IpPrefix{"10.0.0.2", 24}};
      remote_ = std::make_unique<Host>(dc, Config{});
    }
    return *remote_;
  }

  HostSwitch& sw() { return server_->device(0); }
  // The programs attached, read holding the engine as attach and detach
  // change them.
  std::size_t program_count() {
    return sw().engine().locked([&] { return sw().programs().size(); });
  }
  // Each attached program's counters ("process:<pid>"), in the order they
  // attached: the programs of this process share a pid, and each one's
  // counters start with its "qps".
  std::vector<Counters> program_counters() {
    std::vector<Counters> out;
    sw().for_each_counter([&](std::string_view scope, std::string_view name, std::uint64_t v) {
      if (!scope.starts_with("process:")) return;
      if (name == "qps") out.emplace_back();
      out.back()[std::string(name)] = v;
    });
    return out;
  }
  Counters daemon_counters() {
    Counters out;
    sw().for_each_counter([&](std::string_view scope, std::string_view name, std::uint64_t v) {
      if (!scope.starts_with("process:")) out[std::string(scope) + "." + std::string(name)] = v;
    });
    return out;
  }

  std::string dir_;
  std::string pipe_;
  Config config_;
  std::unique_ptr<Server> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::unique_ptr<Host> remote_;
};

}  // namespace uroce::daemon
