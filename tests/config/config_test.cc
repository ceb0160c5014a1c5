/* SPDX-License-Identifier: BSD-3-Clause */
#include "uroce/config.h"

#include <gtest/gtest.h>

namespace uroce {
namespace {

ConfigResult parse(const std::string& text, const std::vector<std::string>& env = {}) {
  return parse_config(text, "test.toml", env);
}

TEST(Config, ReadsEveryKey) {
  const auto r = parse(R"(
    [[device]]
    name = "uroce0"
    port = "net_af_packet0,iface=veth1"
    ip = ["10.0.1.1/24", "fd00::1/64"]
    mtu = 9000
    hugepages = true
    dscp = 46
    pcp = 5
    priority_tag = true
    ecn = true
    selective_repeat = true

    [eal]
    args = ["--log-level=debug"]
    memory_mb = 1024

    [log]
    level = "debug"

    [fault]
    rx_drop = 0.01
    tx_corrupt = 0.5
    seed = 42
  )");
  ASSERT_TRUE(r.config) << r.error;
  const Config& c = *r.config;
  ASSERT_EQ(c.devices.size(), 1u);
  const DeviceConfig& d = c.devices[0];
  EXPECT_EQ(d.name, "uroce0");
  EXPECT_EQ(d.port, "net_af_packet0,iface=veth1");
  ASSERT_EQ(d.ip.size(), 2u);
  EXPECT_EQ(d.ip[0].address, "10.0.1.1");
  EXPECT_EQ(d.ip[0].prefix, 24u);
  EXPECT_EQ(d.ip[1].address, "fd00::1");
  EXPECT_EQ(d.ip[1].prefix, 64u);
  EXPECT_EQ(d.mtu, 9000u);
  EXPECT_TRUE(d.hugepages);
  EXPECT_EQ(d.dscp, 46);
  EXPECT_EQ(d.pcp, 5);
  EXPECT_TRUE(d.priority_tag);
  EXPECT_TRUE(d.ecn);
  EXPECT_TRUE(d.selective_repeat);
  EXPECT_EQ(c.eal_args, std::vector<std::string>{"--log-level=debug"});
  EXPECT_EQ(c.eal_memory_mb, 1024u);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_DOUBLE_EQ(c.fault.rx_drop, 0.01);
  EXPECT_DOUBLE_EQ(c.fault.tx_corrupt, 0.5);
  EXPECT_EQ(c.fault.seed, 42u);
}

TEST(Config, FillsDefaults) {
  const auto r = parse("[[device]]\nport = \"net_tap0\"\nip = \"192.168.9.1\"\n");
  ASSERT_TRUE(r.config) << r.error;
  const DeviceConfig& d = r.config->devices.at(0);
  EXPECT_EQ(d.name, "uroce0");
  EXPECT_EQ(d.ip.at(0).prefix, 32u);
  EXPECT_EQ(d.mtu, 0u);
  EXPECT_EQ(d.dscp, 26);
  EXPECT_EQ(d.pcp, 3);
  EXPECT_FALSE(d.priority_tag);
  EXPECT_FALSE(d.ecn);
  EXPECT_FALSE(d.selective_repeat);
  EXPECT_EQ(r.config->log_level, "warn");
  EXPECT_TRUE(parse("").config.has_value()) << "no file, no devices: valid";
}

// Every refusal names the key and says why.
TEST(Config, RefusesBadInputNamingTheKey) {
  const struct {
    const char* text;
    const char* expect;
  } cases[] = {
      {"[[device]]\nprot = \"x\"\nport = \"x\"\nip = \"1.2.3.4\"",
       "test.toml: device[0].prot: unknown key"},
      {"[[device]]\nip = \"1.2.3.4\"", "device[0].port: is required"},
      {"[[device]]\nport = \"x\"", "device[0].ip: is required"},
      {"[[device]]\nport = \"x\"\nip = \"10.0.0.300/24\"",
       "device[0].ip: '10.0.0.300/24' is not an IP address"},
      {"[[device]]\nport = \"x\"\nip = \"10.0.0.1/33\"",
       "device[0].ip: '10.0.0.1/33' has a bad prefix length"},
      {"[[device]]\nport = \"x\"\nip = \"10.0.0.1\"\nmtu = \"big\"",
       "device[0].mtu: expected an integer"},
      {"[[device]]\nport = \"x\"\nip = \"10.0.0.1\"\ndscp = 64",
       "device[0].dscp: must be between 0 and 63"},
      {"[[device]]\nport = \"x\"\nip = \"10.0.0.1\"\n[[device]]\nport = \"y\"\nip = "
       "\"10.0.0.2\"\nname = \"uroce0\"",
       "device[1].name: 'uroce0' is taken"},
      {"[[device]]\nname = \"x,xdp_prog=/e.o\"\nnetdev = \"lo\"",
       "device[0].name: 'x,xdp_prog=/e.o' is not 1 to 63 letters, digits, '_', '-' or '.'"},
      {"[[device]]\nnetdev = \"lo,x=1\"", "device[0].netdev: 'lo,x=1' is no interface name"},
      {"[[device]]\nnetdev = \"nosuch0\"",
       "device[0].netdev: 'nosuch0' is no interface in this network namespace"},
      {"[[device]]\nnetdev = \"lo\"\nip = \"10.0.0.1\"",
       "device[0].ip: comes from the interface with netdev = 'lo'"},
      {"[log]\nlevel = \"loud\"", "log.level: 'loud' is not trace"},
      {"[fault]\nrx_drop = 1.5", "fault.rx_drop: must be between 0 and 1"},
      {"[eal]\nmemory = 5", "eal.memory: unknown key"},
      {"[wat]\nx = 1", "test.toml: wat: unknown key"},
  };
  for (const auto& c : cases) {
    const auto r = parse(c.text);
    EXPECT_FALSE(r.config) << c.text;
    EXPECT_NE(r.error.find(c.expect), std::string::npos) << "got: " << r.error;
  }
}

// Netdev mode: the interface's addresses are the device's, read when the
// configuration is; the port is net_af_packet on it unless one is named.
// The loopback interface is in every network namespace.
TEST(Config, NetdevTakesTheInterfacesAddresses) {
  const auto r = parse("[[device]]\nnetdev = \"lo\"\n");
  ASSERT_TRUE(r.config) << r.error;
  const DeviceConfig& d = r.config->devices.at(0);
  EXPECT_EQ(d.netdev, "lo");
  EXPECT_EQ(d.port, "net_af_packet_uroce0,iface=lo");
  bool v4 = false;
  for (const IpPrefix& p : d.ip) {
    if (p.address == "127.0.0.1") {
      v4 = true;
      EXPECT_EQ(p.prefix, 8u);
    }
    EXPECT_NE(p.address.rfind("fe80:", 0), 0u) << "link-local addresses are GID 0's";
  }
  EXPECT_TRUE(v4) << "127.0.0.1/8 is not among lo's addresses";

  const auto named = parse("[[device]]\nnetdev = \"lo\"\nport = \"net_af_xdp0,iface=lo\"\n");
  ASSERT_TRUE(named.config) << named.error;
  EXPECT_EQ(named.config->devices.at(0).port, "net_af_xdp0,iface=lo");
  // The three ports by their short names.
  for (const auto& [port, vdev] : {std::pair{"af_xdp", "net_af_xdp_uroce0,iface=lo"},
                                   std::pair{"af_packet", "net_af_packet_uroce0,iface=lo"},
                                   std::pair{"packet", "packet:lo"}}) {
    const auto r2 = parse(std::string("[[device]]\nnetdev = \"lo\"\nport = \"") + port + "\"\n");
    ASSERT_TRUE(r2.config) << r2.error;
    EXPECT_EQ(r2.config->devices.at(0).port, vdev);
  }

  const auto env = parse("", {"UROCE_DEVICE0_NETDEV=lo"});
  ASSERT_TRUE(env.config) << env.error;
  EXPECT_EQ(env.config->devices.at(0).netdev, "lo");
}

TEST(Config, PfcTableAndSlowReceiverKnob) {
  auto r = parse(
      "[pfc]\nenabled = true\npriorities = [3, 4]\nxoff_kb = 64\nquanta = 1000\n"
      "watchdog_ms = 0\n[fault]\nrx_rate_mbps = 200\nrx_buffer_kb = 160\n");
  ASSERT_TRUE(r.config) << r.error;
  const Config& c = *r.config;
  EXPECT_TRUE(c.pfc.enabled);
  EXPECT_EQ(c.pfc.priorities, 0x18);
  EXPECT_EQ(c.pfc.xoff_kb, 64u);
  EXPECT_EQ(c.pfc.xon_kb, 32u) << "half of xoff by default";
  EXPECT_EQ(c.pfc.quanta, 1000);
  EXPECT_EQ(c.pfc.watchdog_ms, 0u);
  EXPECT_EQ(c.pfc.restoration_ms, 200u);
  EXPECT_EQ(c.fault.rx_rate_mbps, 200u);
  EXPECT_EQ(c.fault.rx_buffer_kb, 160u);
  r = parse("", {"UROCE_PFC_ENABLED=true", "UROCE_PFC_PRIORITIES=3,5"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(r.config->pfc.enabled);
  EXPECT_EQ(r.config->pfc.priorities, 0x28);
  const struct {
    const char* text;
    const char* expect;
  } bad[] = {
      {"[pfc]\npriorities = [8]", "pfc.priorities: priorities are 0 to 7"},
      {"[pfc]\npriorities = []", "pfc.priorities: expected a list"},
      {"[pfc]\nxoff_kb = 64\nxon_kb = 64", "pfc.xon_kb: must be below pfc.xoff_kb"},
      {"[pfc]\nquanta = 0", "pfc.quanta: must be between 1 and 65535"},
      {"[pfc]\nenable = true", "pfc.enable: unknown key"},
      {"[fault]\nrx_buffer_kb = 256\n[pfc]\nenabled = true\nxoff_kb = 256",
       "pfc.xoff_kb: must be below fault.rx_buffer_kb (256)"},
  };
  for (const auto& b : bad) {
    const auto e = parse(b.text);
    EXPECT_FALSE(e.config) << b.text;
    EXPECT_NE(e.error.find(b.expect), std::string::npos) << "got: " << e.error;
  }
}

TEST(Config, DcqcnTableUnderConnectXNames) {
  auto r = parse(
      "[dcqcn]\nenabled = true\nrp_priorities = [3, 4]\nrpg_time_reset = 600\n"
      "rpg_ai_rate = 10\nclamp_tgt_rate = true\nmin_time_between_cnps = 50\ncnp_dscp = 46\n");
  ASSERT_TRUE(r.config) << r.error;
  const DcqcnSettings& d = r.config->dcqcn;
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.rp_priorities, 0x18);
  EXPECT_EQ(d.np_priorities, 0x08) << "default: priority 3";
  EXPECT_EQ(d.rpg_time_reset_us, 600u);
  EXPECT_EQ(d.rpg_ai_rate_mbps, 10u);
  EXPECT_EQ(d.rpg_hai_rate_mbps, 50u) << "ConnectX's default";
  EXPECT_TRUE(d.clamp_tgt_rate);
  EXPECT_EQ(d.min_time_between_cnps_us, 50u);
  EXPECT_EQ(d.cnp_dscp, 46);
  EXPECT_EQ(d.cnp_802p_prio, 6);
  r = parse("", {"UROCE_DCQCN_ENABLED=true", "UROCE_DCQCN_NP_PRIORITIES=3,5",
                 "UROCE_DCQCN_RPG_BYTE_RESET=65536"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->dcqcn.np_priorities, 0x28);
  EXPECT_EQ(r.config->dcqcn.rpg_byte_reset, 65536u);
  for (const auto& [text, expect] : std::vector<std::pair<const char*, const char*>>{
           {"[dcqcn]\nrpg_gd = 3", "dcqcn.rpg_gd: must be between 10 and 20"},
           {"[dcqcn]\ncnp_802p_prio = 8", "dcqcn.cnp_802p_prio: must be between 0 and 7"},
           {"[dcqcn]\nrpg_time = 1", "dcqcn.rpg_time: unknown key"},
           {"[dcqcn]\nnp_priorities = [9]", "dcqcn.np_priorities: priorities are 0 to 7"}}) {
    const auto e = parse(text);
    EXPECT_FALSE(e.config) << text;
    EXPECT_NE(e.error.find(expect), std::string::npos) << "got: " << e.error;
  }
}

TEST(Config, ReportsSyntaxErrorsWithTheirPosition) {
  const auto r = parse("[[device]]\nport = \"unterminated\n");
  EXPECT_FALSE(r.config);
  EXPECT_EQ(r.error.rfind("test.toml:2:", 0), 0u) << r.error;
}

TEST(Config, EnvironmentOverridesSingleKeys) {
  const auto r = parse(
      "[[device]]\nport = \"net_tap0\"\nip = \"10.0.0.1/24\"\n",
      {"UROCE_DEVICE0_PORT=net_af_packet0,iface=veth9", "UROCE_DEVICE0_MTU=9000",
       "UROCE_DEVICE1_PORT=net_tap1", "UROCE_DEVICE1_IP=10.0.2.1/24,10.0.3.1/24", "UROCE_LOG=debug",
       "UROCE_EAL_ARGS=--a --b", "UROCE_FAULT_TX_DROP=0.25", "UROCE_CONFIG=/ignored", "PATH=/bin"});
  ASSERT_TRUE(r.config) << r.error;
  const Config& c = *r.config;
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(c.devices[0].port, "net_af_packet0,iface=veth9");
  EXPECT_EQ(c.devices[0].mtu, 9000u);
  EXPECT_EQ(c.devices[1].name, "uroce1");
  EXPECT_EQ(c.devices[1].ip.size(), 2u);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.eal_args, (std::vector<std::string>{"--a", "--b"}));
  EXPECT_DOUBLE_EQ(c.fault.tx_drop, 0.25);
}

TEST(Config, EnvironmentErrorsNameTheVariable) {
  auto r = parse("", {"UROCE_DEVICE0_PORT=x", "UROCE_DEVICE0_IP=1.2.3.4", "UROCE_DEVICE0_DSCP=99"});
  EXPECT_FALSE(r.config);
  EXPECT_NE(r.error.find("UROCE_DEVICE0_DSCP (device[0].dscp): must be between 0 and 63"),
            std::string::npos)
      << r.error;
  r = parse("", {"UROCE_DEVICE3_PORT=x"});
  EXPECT_NE(r.error.find("UROCE_DEVICE3_PORT: device 3 does not exist"), std::string::npos)
      << r.error;
  r = parse("", {"UROCE_LOG_COLOUR=1"});
  EXPECT_NE(r.error.find("UROCE_LOG_COLOUR (log.colour): unknown key"), std::string::npos)
      << r.error;
}

TEST(Config, PrometheusIsOffUnlessAnAddressIsGiven) {
  auto r = parse("");
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->stats.prometheus, "");
  r = parse("[stats]\nprometheus = \"127.0.0.1:9464\"\n");
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->stats.prometheus, "127.0.0.1:9464");
  r = parse(
      "", {"UROCE_STATS_PROMETHEUS=[::1]:0", "UROCE_STATS_DIR=/tmp/x", "UROCE_STATS_FILE=/tmp/y"});
  ASSERT_TRUE(r.config) << r.error << ": the stats endpoint's own variables are not keys";
  EXPECT_EQ(r.config->stats.prometheus, "[::1]:0");
  for (const char* bad : {"9464", "localhost:9464", "127.0.0.1:70000", "::1:9464", "1.2.3.4:"}) {
    r = parse(std::string("[stats]\nprometheus = \"") + bad + "\"\n");
    EXPECT_FALSE(r.config) << bad;
    EXPECT_NE(r.error.find("stats.prometheus"), std::string::npos) << r.error;
  }
  r = parse("", {"UROCE_STATS_PROMETHEUS=9464"});
  EXPECT_NE(r.error.find("UROCE_STATS_PROMETHEUS (stats.prometheus)"), std::string::npos)
      << r.error;
}

}  // namespace
}  // namespace uroce
