/* SPDX-License-Identifier: BSD-3-Clause */
// Device discovery and opening: ibv_get_device_list lists the configured
// uroce devices ahead of the real ones; ibv_open_device opens the port
// (through its driver), engine and poll thread behind a uroce device.

#include <fcntl.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "daemon/discovery.h"
#include "ibverbs/forward.h"
#include "ibverbs/provider.h"
#include "ibverbs/sysfs_tree.h"
#include "log/log.h"
#include "verbs/port_driver.h"

#undef ibv_get_device_list

namespace uroce::ibverbs {

namespace {

std::vector<UDevice*> load_devices() {
  std::vector<UDevice*> out;
  ConfigResult r = load_config();
  if (!r.config) {
    // A bad configuration is the user's to fix: say so once, and offer no
    // uroce device rather than a half-configured one.
    std::fprintf(stderr, "uroce: %s\n", r.error.c_str());
    return out;
  }
  log::set_level(r.config->log_level);
  // A program given no device of its own uses the host's, through the
  // device daemon when one runs (lib/daemon).
  if (r.config->devices.empty()) r.config->devices = daemon::daemon_devices(*r.config);
  for (const DeviceConfig& dc : r.config->devices) {
    auto* u = new UDevice();
    u->cfg = dc;
    u->config = *r.config;
    u->ibv.node_type = IBV_NODE_CA;
    u->ibv.transport_type = IBV_TRANSPORT_IB;  // RoCE devices report the IB transport
    std::snprintf(u->ibv.name, sizeof(u->ibv.name), "%s", dc.name.c_str());
    std::snprintf(u->ibv.dev_name, sizeof(u->ibv.dev_name), "uverbs-%s", dc.name.c_str());
    // Where its sysfs tree is, when it has one (UCX and ibv_devinfo look).
    if (!sysfs_root().empty())
      std::snprintf(u->ibv.ibdev_path, sizeof(u->ibv.ibdev_path), "%s/%s", sysfs_root().c_str(),
                    dc.name.c_str());
    out.push_back(u);
  }
  return out;
}

// Lists handed out, each with the real library's list it contains (to
// give back to the real ibv_free_device_list).
std::mutex lists_mu;
std::set<ibv_device**> lists;

// The node GUID of a device not opened yet: the modified EUI-64 of its
// port's MAC, as verbs::Device derives it once the port is open, when the
// port's driver can tell the MAC beforehand.
std::uint64_t guid_before_open(const DeviceConfig& dc) {
  const auto m = mac_before_open(dc);
  if (!m) return 0;
  const std::uint8_t id[8] = {static_cast<std::uint8_t>(m->bytes[0] ^ 2),
                              m->bytes[1],
                              m->bytes[2],
                              0xFF,
                              0xFE,
                              m->bytes[3],
                              m->bytes[4],
                              m->bytes[5]};
  std::uint64_t g = 0;
  for (std::uint8_t b : id) g = g << 8 | b;
  return g;
}

// At exit, stop the poll threads before the process's static objects
// (the logger among them) go away, and write the counters out. The
// devices themselves stay: the thread calling exit() need not be the
// program's last (Device::end_of_process); the kernel closes the ports.
void close_all() {
  for (UDevice* u : devices()) {
    std::lock_guard lock(u->mu);
    if (u->dev && !u->parents) u->dev->end_of_process();
  }
}

// In a child of fork(), a device attached to uroced is the parent's: its
// rings, its daemon connection and (not in the child) its poll thread.
// The child forgets it (leaked: it is the parent's to end) and attaches
// anew on first use, as a program of its own. An in-process device is
// the parent's for good: its port cannot be opened twice, and the child
// is refused it rather than left to wait on its engine.
void forget_in_child() {
  for (UDevice* u : devices()) {
    new (&u->mu) std::mutex();
    if (!u->dev) continue;
    if (daemon::is_daemon_device(u->cfg)) {
      (void)u->dev.release();
      u->opens = 0;
      forget_sysfs_counters(u->cfg.name);
    } else {
      u->parents = true;
    }
  }
}

}  // namespace

std::optional<wire::MacAddr> mac_before_open(const DeviceConfig& dc) {
  const verbs::PortDriver* driver = verbs::find_port_driver(dc);
  return driver && driver->mac ? driver->mac(dc) : std::nullopt;
}

const std::vector<UDevice*>& devices() {
  // Immortal: a program may use its device pointers until it exits,
  // static destructors included.
  static const auto* all = [] {
    auto* list = new std::vector<UDevice*>(load_devices());
    for (UDevice* u : *list) write_sysfs_device(*u);
    return list;
  }();
  return *all;
}

// Under `uroce-run --sysfs` the tree is there from the start, for the
// programs that read sysfs and never call libibverbs (ibstat).
__attribute__((constructor)) void list_devices_in_sysfs() {
  if (!sysfs_root().empty()) devices();
}

UDevice* our_device(ibv_device* d) {
  for (UDevice* u : devices())
    if (&u->ibv == d) return u;
  return nullptr;
}

verbs::Device* open_device(UDevice* u) {
  std::lock_guard lock(u->mu);
  if (u->parents) {
    std::fprintf(stderr,
                 "uroce: %s is the parent process's: a forked child cannot use an in-process "
                 "device (attach both to uroced to share one)\n",
                 u->cfg.name.c_str());
    return nullptr;
  }
  if (!u->dev) {
    std::string err;
    u->dev = verbs::Device::open(u->cfg, u->config, &err);
    if (!u->dev) {
      std::fprintf(stderr, "uroce: %s\n", err.c_str());
      return nullptr;
    }
    if (!sysfs_root().empty()) {
      // The tree's port as the live one: its state and rate now, and on
      // every change of the link.
      verbs::Device* d = u->dev.get();
      auto show = [d] {
        ibv_port_attr a;
        fill_port_attr(*d, &a);
        update_sysfs_port(d->name(), a.state == IBV_PORT_ACTIVE, a.active_width, a.active_speed);
      };
      show();
      d->add_link_listener([show, d](verbs::Device::PortEvent ev) {
        if (ev == verbs::Device::PortEvent::kGidChange) {
          update_sysfs_gids(*d);
        } else {
          show();
        }
      });
      // The counters, about once a second, and when a context closes.
      update_sysfs_counters(*d);
      d->set_housekeeping_hook([d, n = std::make_shared<unsigned>(0)] {
        if (++*n % 10 == 0) update_sysfs_counters(*d);
      });
    }
    static std::once_flag at_exit;
    std::call_once(at_exit, [] {
      std::atexit(close_all);
      pthread_atfork(nullptr, nullptr, forget_in_child);
    });
  }
  return u->dev.get();
}

}  // namespace uroce::ibverbs

using namespace uroce::ibverbs;

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  static const auto real =
      real_fn<decltype(&ibv_get_device_list)>("ibv_get_device_list", "IBVERBS_1.1");
  int n_real = 0;
  ibv_device** real_list = nullptr;
  if (real) {
    const int saved = errno;
    real_list = real(&n_real);
    if (!real_list) n_real = 0;
    errno = saved;
  }
  const auto& ours_list = devices();
  // Slot 0 keeps the real list; the program gets the rest.
  auto** list = static_cast<ibv_device**>(
      std::calloc(ours_list.size() + static_cast<std::size_t>(n_real) + 2, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  list[0] = reinterpret_cast<ibv_device*>(real_list);
  std::size_t i = 1;
  for (UDevice* u : ours_list) list[i++] = &u->ibv;
  for (int k = 0; k < n_real; ++k) list[i++] = real_list[k];
  if (num_devices) *num_devices = static_cast<int>(i - 1);
  std::lock_guard lock(lists_mu);
  lists.insert(list + 1);
  return list + 1;
}

void ibv_free_device_list(ibv_device** list) {
  {
    std::lock_guard lock(lists_mu);
    if (lists.erase(list) == 1) {
      auto* real_list = reinterpret_cast<ibv_device**>(list[-1]);
      std::free(list - 1);
      list = real_list;
      if (!list) return;
    }
  }
  static const auto real =
      real_fn<decltype(&ibv_free_device_list)>("ibv_free_device_list", "IBVERBS_1.1");
  if (real) real(list);
}

const char* ibv_get_device_name(ibv_device* device) {
  if (our_device(device)) return device->name;
  UROCE_FORWARD(ibv_get_device_name, "IBVERBS_1.1", nullptr, device);
}

__be64 ibv_get_device_guid(ibv_device* device) {
  if (UDevice* u = our_device(device)) {
    std::lock_guard lock(u->mu);
    const std::uint64_t g = u->dev ? u->dev->attr().node_guid : guid_before_open(u->cfg);
    return htobe64(g);
  }
  UROCE_FORWARD(ibv_get_device_guid, "IBVERBS_1.1", 0, device);
}

int ibv_get_device_index(ibv_device* device) {
  const auto& all = devices();
  for (std::size_t i = 0; i < all.size(); ++i)
    if (&all[i]->ibv == device) return -1;  // no kernel index: not a kernel device
  UROCE_FORWARD(ibv_get_device_index, "IBVERBS_1.9", -1, device);
}

ibv_context* ibv_open_device(ibv_device* device) {
  UDevice* u = our_device(device);
  if (!u) UROCE_FORWARD(ibv_open_device, "IBVERBS_1.1", nullptr, device);

  uroce::verbs::Device* dev = open_device(u);
  if (!dev) {
    errno = ENODEV;
    return nullptr;
  }
  std::lock_guard lock(u->mu);
  auto* c = new UContext();
  c->udev = u;
  c->dev = dev;
  c->ctx = std::make_unique<uroce::verbs::Context>(*c->dev, &c->events);
  ibv_context& ctx = c->vctx.context;
  ctx.device = device;
  // No kernel command channel: a memfd of a recognisable name stands for
  // it, so that a program may dup or stat it, and ibv_import_device can
  // tell a uroce context's descriptor from a kernel one.
  ctx.cmd_fd = memfd_create(kContextFdName, MFD_CLOEXEC);
  if (ctx.cmd_fd >= 0) remember_context_fd(ctx.cmd_fd, u);
  // Async events arrive on this descriptor (ibv_get_async_event).
  ctx.async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ctx.async_fd < 0) {
    const int err = errno;
    delete c;
    errno = err;
    return nullptr;
  }
  ctx.num_comp_vectors = uroce::verbs::kNumCompVectors;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx.ops.poll_cq = poll_cq;
  ctx.ops.req_notify_cq = req_notify_cq;
  ctx.ops.post_send = post_send;
  ctx.ops.post_recv = post_recv;
  ctx.ops.post_srq_recv = post_srq_recv;
  ctx.ops.alloc_mw = alloc_mw;
  ctx.ops.bind_mw = bind_mw;
  ctx.ops.dealloc_mw = dealloc_mw;
  verbs_context& v = c->vctx;
  v.sz = sizeof(verbs_context);
  v.query_port = query_port;
  v.query_device_ex = query_device_ex;
  v.advise_mr = advise_mr;
  v.create_qp_ex = create_qp_ex;
  v.create_cq_ex = create_cq_ex;
  v.create_srq_ex = create_srq_ex;
  v.get_srq_num = get_srq_num;
  v.open_xrcd = open_xrcd;
  v.close_xrcd = close_xrcd;
  v.open_qp = open_qp;
  v.alloc_td = alloc_td;
  v.dealloc_td = dealloc_td;
  v.alloc_parent_domain = alloc_parent_domain;
  v.alloc_dm = alloc_dm;
  v.free_dm = free_dm;
  v.reg_dm_mr = reg_dm_mr;
  // The port's link going up or down is an asynchronous event; so are a
  // change of the GID table and the loss of the device (a shared device's
  // daemon exited).
  c->link_listener = c->dev->add_link_listener([c](uroce::verbs::Device::PortEvent ev) {
    ibv_async_event e{};
    e.element.port_num = 1;
    switch (ev) {
      case uroce::verbs::Device::PortEvent::kActive:
        e.event_type = IBV_EVENT_PORT_ACTIVE;
        break;
      case uroce::verbs::Device::PortEvent::kDown:
        e.event_type = IBV_EVENT_PORT_ERR;
        break;
      case uroce::verbs::Device::PortEvent::kGidChange:
        e.event_type = IBV_EVENT_GID_CHANGE;
        break;
      case uroce::verbs::Device::PortEvent::kFatal:
        e.event_type = IBV_EVENT_DEVICE_FATAL;
        e.element.port_num = 0;  // a device event names no port
        break;
    }
    post_async_event(c, e);
  });
  ++u->opens;
  return &ctx;
}

int ibv_close_device(ibv_context* context) {
  UContext* c = ours(context);
  if (!c) UROCE_FORWARD(ibv_close_device, "IBVERBS_1.1", ENOSYS, context);
  UDevice* u = c->udev;
  // A context the parent opened, in its child: the parent's to close.
  if (u->parents) return 0;
  c->dev->remove_link_listener(c->link_listener);
  if (c->ctx->busy()) {
    // Objects of this context still exist (the program did not destroy
    // them) and the engine may still report events to it: the context
    // stays allocated, as their memory does, until the process ends.
    uroce::log::get().warn("{}: context closed with objects still alive", u->cfg.name);
  } else {
    close(context->async_fd);
    if (context->cmd_fd >= 0) {
      forget_context_fd(context->cmd_fd);
      close(context->cmd_fd);
    }
    pthread_mutex_destroy(&context->mutex);
    delete c;
  }
  update_sysfs_counters(*u->dev);
  std::lock_guard lock(u->mu);
  // The device stays open until the process ends: DPDK cannot probe a
  // port again once it is closed, and a program may open it again.
  --u->opens;
  return 0;
}

}  // extern "C"
