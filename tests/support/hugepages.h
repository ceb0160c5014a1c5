/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Hugepages for a test (net_memif, a device with `hugepages`): at least
// `pages` 2 MiB pages allocated and hugetlbfs mounted on /dev/hugepages
// for the test's lifetime, the machine's settings given back afterwards.

#include <fstream>
#include <string>

#include "support/child.h"

namespace uroce::test {

class Hugepages {
 public:
  explicit Hugepages(int pages) {
    std::ifstream f("/proc/sys/vm/nr_hugepages");
    f >> before_;
    if (before_ < pages) sh("echo " + std::to_string(pages) + " > /proc/sys/vm/nr_hugepages");
    if (sh("mountpoint -q /dev/hugepages") != 0) {
      sh("mkdir -p /dev/hugepages");
      mounted_ = sh("mount -t hugetlbfs nodev /dev/hugepages") == 0;
    }
    std::ifstream g("/proc/sys/vm/nr_hugepages");
    g >> now_;
  }
  ~Hugepages() {
    if (mounted_) sh("umount /dev/hugepages");
    if (now_ != before_) sh("echo " + std::to_string(before_) + " > /proc/sys/vm/nr_hugepages");
  }
  Hugepages(const Hugepages&) = delete;
  Hugepages& operator=(const Hugepages&) = delete;

  /// The pages the machine has now.
  int pages() const { return now_; }

 private:
  int before_ = 0;
  int now_ = 0;
  bool mounted_ = false;
};

}  // namespace uroce::test
