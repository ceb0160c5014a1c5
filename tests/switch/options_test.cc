/* SPDX-License-Identifier: BSD-3-Clause */
// uroce-switch's command line and file: rates, times, what each option
// sets, and errors that name the option or key.

#include "switch/options.h"

#include <gtest/gtest.h>

#include <vector>

namespace uroce::sw {
namespace {

std::string parse(std::vector<const char*> args, SwitchOptions* o) {
  args.insert(args.begin(), "uroce-switch");
  return parse_switch_options(static_cast<int>(args.size()), args.data(), o);
}

TEST(SwitchOptions, RatesAndTimes) {
  EXPECT_EQ(parse_rate("300mbit"), 300'000'000u);
  EXPECT_EQ(parse_rate("10gbit"), 10'000'000'000u);
  EXPECT_EQ(parse_rate("1.5gbit"), 1'500'000'000u);
  EXPECT_EQ(parse_rate("64kbit"), 64'000u);
  EXPECT_EQ(parse_rate("2000000"), 2'000'000u);
  EXPECT_FALSE(parse_rate("fast"));
  EXPECT_FALSE(parse_rate("10gbps"));
  EXPECT_FALSE(parse_rate("-1mbit"));
  EXPECT_FALSE(parse_rate("10"));  // below 1 kbit/s: surely a mistake
  EXPECT_EQ(parse_time_ns("100us"), 100'000u);
  EXPECT_EQ(parse_time_ns("2ms"), 2'000'000u);
  EXPECT_EQ(parse_time_ns("1.5s"), 1'500'000'000u);
  EXPECT_EQ(parse_time_ns("500ns"), 500u);
  EXPECT_FALSE(parse_time_ns("100"));
  EXPECT_FALSE(parse_time_ns("5min"));
}

TEST(SwitchOptions, TheCommandLineSetsTheCommonCases) {
  SwitchOptions o;
  ASSERT_EQ(parse({"--port", "net_af_packet0,iface=p1", "--port", "net_af_packet1,iface=p2",
                   "--port", "net_af_packet2,iface=p3", "--rate", "2=300mbit", "--ecn",
                   "kmin=5000,kmax=200000,pmax=0.05", "--pfc", "--loss", "0.01", "--delay",
                   "1ms+100us", "--seed", "9", "--scheduling", "strict"},
                  &o),
            "");
  ASSERT_EQ(o.ports.size(), 3u);
  ASSERT_EQ(o.cfg.ports.size(), 3u);
  EXPECT_EQ(o.cfg.ports[2].rate_bps, 300'000'000u);
  EXPECT_EQ(o.cfg.ports[0].rate_bps, 0u);
  EXPECT_TRUE(o.cfg.queues[3].ecn.enabled);
  EXPECT_EQ(o.cfg.queues[3].ecn.kmin_bytes, 5000u);
  EXPECT_EQ(o.cfg.queues[3].ecn.kmax_bytes, 200000u);
  EXPECT_DOUBLE_EQ(o.cfg.queues[3].ecn.pmax, 0.05);
  EXPECT_TRUE(o.cfg.pfc.enabled);
  for (const PortConfig& p : o.cfg.ports) {
    EXPECT_DOUBLE_EQ(p.tx.drop, 0.01);
    EXPECT_EQ(p.tx.delay_ns, 1'000'000u);
    EXPECT_EQ(p.tx.jitter_ns, 100'000u);
    EXPECT_FALSE(p.rx.any());
  }
  EXPECT_EQ(o.cfg.seed, 9u);
  EXPECT_EQ(o.cfg.scheduling, Scheduling::kStrict);
}

TEST(SwitchOptions, ErrorsNameTheOption) {
  const struct {
    std::vector<const char*> args;
    const char* expect;
  } cases[] = {
      {{"--port", "a"}, "--port: a switch needs two ports or more"},
      {{"--port", "a", "--port", "b", "--rate", "5=1gbit"}, "--rate: port 5 does not exist"},
      {{"--port", "a", "--port", "b", "--rate", "1=fast"}, "--rate: 'fast' is not a rate"},
      {{"--port", "a", "--port", "b", "--rate", "1gbit"}, "--rate: expected PORT=RATE"},
      {{"--port", "a", "--port", "b", "--loss", "2"}, "--loss: '2' is not a probability"},
      {{"--port", "a", "--port", "b", "--ecn", "kmin=10,kmax=5"}, "--ecn: kmax must be above kmin"},
      {{"--port", "a", "--port", "b", "--ecn", "kmid=1"}, "--ecn: unknown 'kmid'"},
      {{"--port", "a", "--port", "b", "--delay", "soon"}, "--delay: 'soon' is not a time"},
      {{"--port", "a", "--port", "b", "--frobnicate"}, "unknown option --frobnicate"},
      {{"--port", "a", "--port", "b", "--scheduling", "fifo"}, "--scheduling: 'fifo'"},
      {{"--port", "a", "--port", "b", "--seed", " -1"}, "--seed: ' -1' is not a number"},
      {{"--port", "a", "--port", "b", "--seed", "+5"}, "--seed: '+5' is not a number"},
      {{"--port", "a", "--port", "b", "--buffer-kb", "18014398509481984"}, "KiB"},
      {{"--port", "a", "--port", "b", "--seed", "99999999999999999999999"}, "is not a number"},
  };
  for (const auto& c : cases) {
    SwitchOptions o;
    const std::string err = parse(c.args, &o);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "got: " << err;
  }
}

TEST(SwitchOptions, TheFileSetsTheRest) {
  SwitchOptions o;
  ASSERT_EQ(apply_switch_toml(R"(
    [switch]
    buffer_kb = 8192
    scheduling = "strict"
    [ecn]
    kmin_kb = 10
    kmax_kb = 100
    pmax = 0.2
    queues = [3, 4]
    [pfc]
    priorities = [3, 4]
    xoff_kb = 64
    headroom_kb = 256
    watchdog_ms = 0
    [priority]
    trust = "pcp"
    dscp = { "46" = 5 }
    [[queue]]
    priority = 3
    limit_kb = 512
    weight = 4
    [[queue]]
    priority = 6
    ecn = true
    kmin_kb = 1
    kmax_kb = 8
    pmax = 1.0
    [[port]]
    device = "net_af_packet0,iface=p1"
    rate = "10gbit"
    tx = { loss = 0.001, delay = "50us", jitter = "10us" }
    [[port]]
    device = "net_af_packet1,iface=p2"
    rx = { corrupt = 0.5 }
    [stats]
    file = "s.jsonl"
    format = "json"
    interval_ms = 50
  )",
                              "sw.toml", &o),
            "");
  EXPECT_EQ(o.cfg.buffer_bytes, 8192u * 1024);
  EXPECT_EQ(o.cfg.scheduling, Scheduling::kStrict);
  EXPECT_TRUE(o.cfg.queues[4].ecn.enabled);
  EXPECT_FALSE(o.cfg.queues[0].ecn.enabled);
  EXPECT_EQ(o.cfg.queues[3].ecn.kmax_bytes, 100u * 1024);
  EXPECT_TRUE(o.cfg.pfc.enabled);
  EXPECT_EQ(o.cfg.pfc.lossless, 0x18);
  EXPECT_EQ(o.cfg.pfc.xoff_bytes, 64u * 1024);
  EXPECT_EQ(o.cfg.pfc.xon_bytes, 32u * 1024);
  EXPECT_EQ(o.cfg.pfc.headroom_bytes, 256u * 1024);
  EXPECT_EQ(o.cfg.pfc.watchdog.detection_ns, 0u);
  EXPECT_TRUE(o.cfg.priority_map.trust_pcp);
  EXPECT_EQ(o.cfg.priority_map.dscp[46], 5);
  EXPECT_EQ(o.cfg.priority_map.dscp[26], 3);
  EXPECT_EQ(o.cfg.queues[3].limit_bytes, 512u * 1024);
  EXPECT_EQ(o.cfg.queues[3].weight, 4u);
  EXPECT_TRUE(o.cfg.queues[6].ecn.enabled);
  EXPECT_EQ(o.cfg.queues[6].ecn.kmax_bytes, 8u * 1024);
  EXPECT_DOUBLE_EQ(o.cfg.queues[6].ecn.pmax, 1.0);
  EXPECT_EQ(o.cfg.queues[4].ecn.kmax_bytes, 100u * 1024) << "from [ecn]";
  ASSERT_EQ(o.ports.size(), 2u);
  EXPECT_EQ(o.ports[1], "net_af_packet1,iface=p2");
  EXPECT_EQ(o.cfg.ports[0].rate_bps, 10'000'000'000u);
  EXPECT_EQ(o.cfg.ports[0].tx.delay_ns, 50'000u);
  EXPECT_DOUBLE_EQ(o.cfg.ports[1].rx.corrupt, 0.5);
  EXPECT_EQ(o.stats_format, "json");
  EXPECT_EQ(o.stats_interval_ms, 50u);
}

TEST(SwitchOptions, FileErrorsNameTheKey) {
  const struct {
    const char* text;
    const char* expect;
  } cases[] = {
      {"[pfc]\nxoff_kb = 64\nxon_kb = 64", "sw.toml: pfc.xon_kb: must be below xoff_kb"},
      {"[pfc]\npriorities = [9]", "sw.toml: pfc.priorities: priorities are 0 to 7"},
      {"[switch]\nscheduling = \"fifo\"", "sw.toml: switch.scheduling: 'fifo' is not strict"},
      {"[[port]]\nrate = \"1gbit\"", "sw.toml: port[0].device: is required"},
      {"[[port]]\ndevice = \"x\"\nrate = \"fast\"", "sw.toml: port[0].rate: 'fast' is not a rate"},
      {"[[port]]\ndevice = \"x\"\ntx = { loss = 3 }", "port[0].tx.loss: must be between 0 and 1"},
      {"[[port]]\ndevice = \"x\"\ntx = { drop = 0.1 }", "port[0].tx.drop: unknown key"},
      {"[priority]\ndscp = { \"70\" = 1 }", "priority.dscp.70: DSCP is 0 to 63"},
      {"[[queue]]\nweight = 2", "queue[0].priority: required"},
      {"[wat]\nx = 1", "sw.toml: wat: unknown key"},
      {"[ecn]\npmax = nan", "sw.toml: ecn.pmax: expected a number"},
      {"[ecn]\nkmin_kb = -5", "sw.toml: ecn.kmin_kb: must be between 0"},
      {"[switch]\nduration_s = -1", "sw.toml: switch.duration_s: must be 0 or more"},
      {"[switch]\nbuffer_kb = 18014398509481984", "switch.buffer_kb: must be between"},
      {"[switch\n", "sw.toml:1:"},
  };
  for (const auto& c : cases) {
    SwitchOptions o;
    const std::string err = apply_switch_toml(c.text, "sw.toml", &o);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.text << "\ngot: " << err;
  }
}

}  // namespace
}  // namespace uroce::sw
