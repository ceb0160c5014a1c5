/* SPDX-License-Identifier: BSD-3-Clause */
// Device, port and GID queries. uroce reports its own identity (no IEEE
// vendor ID, part 0) and the limits of verbs/limits.h.

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ibverbs/forward.h"
#include "ibverbs/provider.h"
#include "verbs/limits.h"
#include "verbs/odp.h"

#undef ibv_query_port

namespace uroce::ibverbs {

namespace {

// enum ibv_gid_type_sysfs (rdma-core's driver.h, private to providers).
constexpr int kGidTypeSysfsRoceV2 = 1;

void fill_device_attr(const verbs::Device& dev, ibv_device_attr* a) {
  const verbs::DeviceAttr& d = dev.attr();
  std::memset(a, 0, sizeof(*a));
  std::snprintf(a->fw_ver, sizeof(a->fw_ver), "uroce %s", UROCE_VERSION);
  a->node_guid = htobe64(d.node_guid);
  a->sys_image_guid = htobe64(d.node_guid);
  a->max_mr_size = d.max_mr_size;
  a->page_size_cap = 0xFFFFF000;  // any multiple of 4 KiB: MRs are plain memory
  a->vendor_id = d.vendor_id;
  a->vendor_part_id = d.vendor_part_id;
  a->max_qp = static_cast<int>(d.max_qp);
  a->max_qp_wr = static_cast<int>(d.max_qp_wr);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                        IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_XRC |
                        // Windows of type 1 and of type 2 bound to a QP and a PD (2B).
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  a->max_sge = static_cast<int>(d.max_sge);
  a->max_sge_rd = static_cast<int>(d.max_sge);
  a->max_cq = static_cast<int>(d.max_qp);
  a->max_cqe = static_cast<int>(d.max_cqe);
  a->max_mr = static_cast<int>(d.max_mr);
  a->max_mw = static_cast<int>(d.max_mr);  // windows share the regions' table
  a->max_pd = static_cast<int>(d.max_qp);
  a->max_qp_rd_atom = static_cast<int>(d.max_qp_rd_atom);
  a->max_res_rd_atom = static_cast<int>(d.max_qp_rd_atom * d.max_qp);
  a->max_qp_init_rd_atom = static_cast<int>(d.max_qp_init_rd_atom);
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ah = static_cast<int>(d.max_qp);
  a->max_srq = static_cast<int>(d.max_qp);
  a->max_srq_wr = static_cast<int>(d.max_qp_wr);
  a->max_srq_sge = static_cast<int>(d.max_sge);
  a->max_mcast_grp = static_cast<int>(d.max_mcast_grp);
  a->max_mcast_qp_attach = static_cast<int>(d.max_mcast_qp_attach);
  a->max_total_mcast_qp_attach = static_cast<int>(d.max_total_mcast_qp_attach);
  a->max_pkeys = static_cast<std::uint16_t>(verbs::kMaxPkeys);
  a->local_ca_ack_delay = verbs::kLocalCaAckDelay;
  a->phys_port_cnt = 1;
}

// IB width and speed codes that multiply out to the link's rate.
void width_speed(std::uint32_t mbps, std::uint8_t* width, std::uint8_t* speed) {
  struct Rate {
    std::uint32_t mbps;
    std::uint8_t width, speed;
  };
  static constexpr Rate kRates[] = {
      {400000, 2, 128},  // 4X NDR
      {200000, 2, 64},   // 4X HDR
      {100000, 2, 32},   // 4X EDR
      {50000, 1, 64},    // 1X HDR
      {40000, 2, 4},     // 4X QDR
      {25000, 1, 32},    // 1X EDR
      {10000, 1, 4},     // 1X QDR
      {0, 1, 1},         // 1X SDR
  };
  for (const Rate& r : kRates) {
    if (mbps >= r.mbps) {
      *width = r.width;
      *speed = r.speed;
      return;
    }
  }
}

}  // namespace

void fill_port_attr(const verbs::Device& dev, ibv_port_attr* a) {
  const verbs::PortAttr p = dev.port_attr();
  std::memset(a, 0, sizeof(*a));
  a->state = p.state == verbs::PortState::kActive ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a->max_mtu = static_cast<ibv_mtu>(p.max_mtu);
  a->active_mtu = static_cast<ibv_mtu>(p.active_mtu);
  a->gid_tbl_len = static_cast<int>(p.gid_tbl_len);
  a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  a->max_msg_sz = verbs::kMaxMessageSize;
  a->pkey_tbl_len = 1;
  a->max_vl_num = 1;
  a->subnet_timeout = 18;
  width_speed(p.speed_mbps, &a->active_width, &a->active_speed);
  a->phys_state = p.state == verbs::PortState::kActive ? 5 : 3;  // LinkUp : Disabled
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

int query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len) {
  UContext* c = ours(ctx);
  if (!c || !attr) return EINVAL;
  if (port != 1) return EINVAL;
  ibv_port_attr a;
  fill_port_attr(*c->dev, &a);
  std::memcpy(attr, &a, std::min(len, sizeof(a)));
  return 0;
}

int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t len) {
  UContext* c = ours(ctx);
  if (!c || !attr) return EINVAL;
  if (input && input->comp_mask != 0) return EINVAL;
  ibv_device_attr_ex a;
  std::memset(&a, 0, sizeof(a));
  fill_device_attr(*c->dev, &a.orig_attr);
  a.max_dm_size = c->dev->attr().max_dm_size;
  a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
  if (verbs::odp::available()) {
    // Every region may be on demand: the engine checks an ODP range against
    // the process's mappings at each access (verbs/odp.h), whatever
    // carries it. Each transport lists the operations it has; UD has
    // SEND and RECV only, and an SRQ serves RC and UC QPs here as well.
    a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    a.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                                IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
    a.odp_caps.per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
    a.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
    // XRC is RC's requester and responder; its receives are an SRQ's.
    a.xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                     IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  }
  std::memcpy(attr, &a, std::min(len, sizeof(a)));
  return 0;
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;

extern "C" {

int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_query_device, "IBVERBS_1.1", ENOSYS, context, device_attr);
  if (!device_attr) return EINVAL;
  fill_device_attr(*c->dev, device_attr);
  return 0;
}

// The exported entry point takes the older attribute struct, which ends
// before port_cap_flags2 (programs built against current headers reach
// query_port above through the context instead).
int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
  if (!ours(context))
    UROCE_FORWARD(ibv_query_port, "IBVERBS_1.1", ENOSYS, context, port_num, port_attr);
  return query_port(context, port_num, reinterpret_cast<ibv_port_attr*>(port_attr),
                    offsetof(ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_query_gid, "IBVERBS_1.1", ENOSYS, context, port_num, index, gid);
  const auto gids = c->dev->gids();
  if (port_num != 1 || index < 0 || !gid) return EINVAL;
  // An empty entry, and the table past the last address, is the zero GID,
  // as a kernel device reports its unused entries.
  std::memset(gid->raw, 0, sizeof(gid->raw));
  if (static_cast<std::size_t>(index) < gids.size())
    std::memcpy(gid->raw, gids[static_cast<std::size_t>(index)].bytes.data(), 16);
  return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  UContext* c = ours(context);
  if (!c)
    UROCE_FORWARD(_ibv_query_gid_ex, "IBVERBS_1.11", ENOSYS, context, port_num, gid_index, entry,
                  flags, entry_size);
  const auto gids = c->dev->gids();
  if (port_num != 1 || flags != 0 || !entry) return EINVAL;
  if (gid_index >= gids.size() || gids[gid_index] == uroce::wire::IpAddr{}) return ENODATA;
  ibv_gid_entry e{};
  std::memcpy(e.gid.raw, gids[gid_index].bytes.data(), 16);
  e.gid_index = gid_index;
  e.port_num = port_num;
  e.gid_type = IBV_GID_TYPE_ROCE_V2;
  e.ndev_ifindex = 0;  // no kernel interface behind a DPDK port
  std::memcpy(entry, &e, std::min(entry_size, sizeof(e)));
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  UContext* c = ours(context);
  if (!c)
    UROCE_FORWARD(_ibv_query_gid_table, "IBVERBS_1.11", -ENOSYS, context, entries, max_entries,
                  flags, entry_size);
  if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  // The entries in use, as the kernel's table query returns them, from
  // one copy of the table (a netdev device's may change meanwhile).
  const auto gids = c->dev->gids();
  const auto used = static_cast<std::size_t>(std::count_if(
      gids.begin(), gids.end(), [](const auto& g) { return g != uroce::wire::IpAddr{}; }));
  if (max_entries < used) return -EINVAL;
  auto* out = reinterpret_cast<char*>(entries);
  std::size_t n = 0;
  for (std::size_t i = 0; i < gids.size(); ++i) {
    if (gids[i] == uroce::wire::IpAddr{}) continue;
    ibv_gid_entry e{};
    std::memcpy(e.gid.raw, gids[i].bytes.data(), 16);
    e.gid_index = static_cast<uint32_t>(i);
    e.port_num = 1;
    e.gid_type = IBV_GID_TYPE_ROCE_V2;
    e.ndev_ifindex = 0;  // no kernel interface behind a DPDK port
    std::memcpy(out + n++ * entry_size, &e, sizeof(e));
  }
  return static_cast<ssize_t>(n);
}

// Private to rdma-core's own tools (ibv_devinfo -v imports it): the GID
// type as sysfs would give it.
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  UContext* c = ours(context);
  if (!c)
    UROCE_FORWARD(ibv_query_gid_type, "IBVERBS_PRIVATE_34", ENOSYS, context, port_num, index, type);
  const auto gids = c->dev->gids();
  if (port_num != 1 || index >= gids.size() || gids[index] == uroce::wire::IpAddr{} || !type)
    return EINVAL;
  *type = kGidTypeSysfsRoceV2;
  return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (!ours(context))
    UROCE_FORWARD(ibv_query_pkey, "IBVERBS_1.1", ENOSYS, context, port_num, index, pkey);
  if (port_num != 1 || index != 0 || !pkey) return EINVAL;
  *pkey = htobe16(0xFFFF);  // the default partition, full membership
  return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (!ours(context)) UROCE_FORWARD(ibv_get_pkey_index, "IBVERBS_1.5", -1, context, port_num, pkey);
  if (port_num == 1 && (be16toh(pkey) & 0x7FFF) == 0x7FFF) return 0;
  errno = ENOENT;
  return -1;
}

}  // extern "C"
