/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Protection domains (IBA 10.2.3), thread domains and parent domains.
//
// A thread domain is the program's promise that one thread uses the
// objects tied to it; uroce takes the promise and needs nothing from it
// (its queues are single-producer rings already). A parent domain is a PD
// the program allocates on top of another (ibv_alloc_parent_domain):
// objects created with it are protected as the other's, whose id it
// carries. An imported PD (ibv_import_pd) stands for a PD of another
// context of the same device, which stays while it is imported.

#include <cstdint>
#include <memory>

#include "verbs/context.h"
#include "verbs/mr_table.h"
#include "verbs/use_count.h"

namespace uroce::verbs {

class Td {
 public:
  static std::unique_ptr<Td> create(Context& ctx);
  /// EBUSY while a parent domain uses it.
  static int destroy(std::unique_ptr<Td>& td);
  ~Td();

  Context& context() const { return ctx_; }
  UseCount& users() { return users_; }

 private:
  explicit Td(Context& ctx) : ctx_(ctx) {}
  Context& ctx_;
  UseCount users_;
};

class Pd {
 public:
  /// A new protection domain, with a device-wide id.
  static std::unique_ptr<Pd> create(Context& ctx);
  /// A parent domain over `pd` (a protection domain of the same context,
  /// not itself a parent domain), with thread domain `td` if not null (of
  /// the same context). EINVAL otherwise.
  static int create_parent(Context& ctx, Pd& pd, Td* td, std::unique_ptr<Pd>* out);
  /// A PD in `ctx` standing for `orig`, a PD of a context of the same
  /// device (EINVAL otherwise).
  static int import(Context& ctx, Pd& orig, std::unique_ptr<Pd>* out);
  /// EBUSY while regions, windows, QPs, SRQs, AHs or parent domains use
  /// it or an import stands for it.
  static int destroy(std::unique_ptr<Pd>& pd);
  /// Ends an import (ibv_unimport_pd) whatever uses it: objects made in
  /// it may outlive the handle, as with the kernel, and the PD then goes
  /// with the last of them.
  static void unimport(std::unique_ptr<Pd>& pd);
  ~Pd();
  Pd(const Pd&) = delete;
  Pd& operator=(const Pd&) = delete;

  Context& context() const { return ctx_; }
  Device& device() const { return ctx_.device(); }
  /// The protection domain its objects are checked against: a parent
  /// domain's and an import's are those of the PD they stand for.
  PdId id() const { return id_; }
  bool is_parent_domain() const { return parent_ != nullptr; }
  bool imported() const { return original_ != nullptr; }
  UseCount& users() { return users_; }

 private:
  Pd(Context& ctx, PdId id) : ctx_(ctx), id_(id) {}
  Context& ctx_;
  const PdId id_;
  Pd* parent_ = nullptr;    ///< a parent domain's PD
  Td* td_ = nullptr;        ///< a parent domain's thread domain, if any
  Pd* original_ = nullptr;  ///< what an import stands for
  UseCount users_;
};

}  // namespace uroce::verbs
