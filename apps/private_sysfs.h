/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

#include <string>

namespace uroce::run {

/// Gives this process (and what it executes) a mount namespace of its own
/// in which /sys/class/infiniband is an empty tmpfs the binding may fill
/// (drivers/ibverbs/sysfs_tree.h), every other class of /sys/class as it
/// was, and the RDMA devices the kernel has, if any, still listed. Nothing
/// outside the namespace changes. Without CAP_SYS_ADMIN the namespace
/// comes with a user namespace of its own in which the caller keeps its
/// uid and gid (unprivileged user namespaces must be allowed, as Debian's
/// kernels do). Returns the directory to fill, or "" with *error.
std::string private_sysfs(std::string* error);

}  // namespace uroce::run
