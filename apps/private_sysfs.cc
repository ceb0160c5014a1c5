/* SPDX-License-Identifier: BSD-3-Clause */
#include "private_sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace uroce::run {

namespace {

constexpr const char* kClass = "/sys/class";
constexpr const char* kTree = "/sys/class/infiniband";

std::string failed(const std::string& what, std::string* error) {
  *error = what + ": " + std::strerror(errno);
  return "";
}

// The names in directory `fd` (not . and ..).
std::vector<std::string> entries(int fd) {
  std::vector<std::string> out;
  const int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = dup_fd >= 0 ? fdopendir(dup_fd) : nullptr;
  if (!d) return out;
  while (const dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      out.emplace_back(e->d_name);
  }
  closedir(d);
  return out;
}

bool write_file(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// A user namespace in which the caller is who it was (its uid and gid
// mapped to themselves, so getuid() and file ownership read as before,
// and Open MPI does not find itself root) and holds the capabilities the
// mounts need; the program executed afterwards has none (execve drops a
// non-root user's). Supplementary groups cannot be mapped by an
// unprivileged user: they stay the caller's for access checks but read
// as the overflow group.
bool own_user_namespace(std::string* error) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    failed(
        "a user and mount namespace of its own (are unprivileged user namespaces off? "
        "kernel.unprivileged_userns_clone, user.max_user_namespaces)",
        error);
    return false;
  }
  // The kernel takes a gid map from an unprivileged writer only once it
  // may no longer drop groups with setgroups(2).
  if (!write_file("/proc/self/setgroups", "deny") ||
      !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
      !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1")) {
    failed("mapping the user into its namespace", error);
    return false;
  }
  return true;
}

}  // namespace

std::string private_sysfs(std::string* error) {
  // Root (CAP_SYS_ADMIN) takes a mount namespace alone; anyone else a user
  // namespace with it, where the mounts are allowed.
  if (unshare(CLONE_NEWNS) != 0) {
    if (errno != EPERM) return failed("a mount namespace of its own", error);
    if (!own_user_namespace(error)) return "";
  }
  // Nothing mounted here may reach the host's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return failed("making / private", error);
  // sysfs takes no new directory: /sys/class becomes a tmpfs with each
  // class of the real one bound back (their entries' relative links into
  // /sys/devices resolve as before), and infiniband a directory of the
  // tmpfs, holding the kernel's own RDMA devices' links if it has any.
  const int real = open(kClass, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (real < 0) return failed(kClass, error);
  const std::vector<std::string> classes = entries(real);
  const int real_ib = openat(real, "infiniband", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  std::vector<std::pair<std::string, std::string>> ib_links;
  if (real_ib >= 0) {
    for (const std::string& e : entries(real_ib)) {
      char target[4096];
      const ssize_t n = readlinkat(real_ib, e.c_str(), target, sizeof target - 1);
      if (n > 0) ib_links.emplace_back(e, std::string(target, static_cast<std::size_t>(n)));
    }
    close(real_ib);
  }
  if (mount("uroce-sysfs", kClass, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755") != 0) {
    close(real);
    return failed(std::string("a tmpfs on ") + kClass, error);
  }
  for (const std::string& c : classes) {
    if (c == "infiniband") continue;
    const std::string to = std::string(kClass) + "/" + c;
    const std::string from = "/proc/self/fd/" + std::to_string(real) + "/" + c;
    if (mkdir(to.c_str(), 0755) != 0 ||
        mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      close(real);
      return failed("binding " + to + " back", error);
    }
  }
  close(real);
  if (mkdir(kTree, 0755) != 0) return failed(kTree, error);
  // The kernel's links are relative to /sys/class/infiniband, as before.
  for (const auto& [name, target] : ib_links)
    if (symlinkat(target.c_str(), AT_FDCWD, (std::string(kTree) + "/" + name).c_str()) != 0)
      return failed(std::string(kTree) + "/" + name, error);
  return kTree;
}

}  // namespace uroce::run
