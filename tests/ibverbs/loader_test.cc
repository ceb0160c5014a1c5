/* SPDX-License-Identifier: BSD-3-Clause */
// liburoce-ibverbs.so in place of libibverbs for a program that loads its
// verbs library itself (NCCL: dlopen, then dlvsym of each entry point on
// that handle), where the preload cannot reach: every entry point
// libibverbs.so.1 has is there under its version, a uroce device moves
// bytes through them, and the entry points that touch no device answer
// as libibverbs 44 does.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>

#include "support/child.h"

namespace uroce {
namespace {

using namespace std::chrono_literals;
using test::Child;

// The path of the libibverbs.so.1 the loader finds.
std::string real_libibverbs() {
  void* h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) return "";
  link_map* map = nullptr;
  std::string path;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map) path = map->l_name;
  dlclose(h);
  return path;
}

// The default versions (name@@VERSION) of the public symbols a shared
// library defines, as nm lists them.
std::set<std::string> public_symbols(const std::string& lib) {
  std::set<std::string> out;
  std::FILE* p = popen(("nm -D --defined-only " + lib).c_str(), "r");
  if (!p) return out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    std::istringstream w(line);
    std::string addr, type, sym;
    if (!(w >> addr >> type >> sym)) continue;
    if (sym.find("@@IBVERBS_1.") != std::string::npos) out.insert(sym);
  }
  pclose(p);
  return out;
}

std::string run(const std::string& cmd, const std::string& log, int* rc) {
  Child c(cmd, log);
  *rc = c.wait(120s);
  return c.output();
}

TEST(Loader, EveryPublicEntryPointOfLibibverbsIsThereUnderItsVersion) {
  const std::string real = real_libibverbs();
  ASSERT_FALSE(real.empty()) << "no libibverbs.so.1";
  const auto theirs = public_symbols(real);
  const auto ours = public_symbols(UROCE_IBVERBS_LIBRARY);
  ASSERT_GT(theirs.size(), 50u) << real;  // 75 in libibverbs 44
  for (const std::string& s : theirs) EXPECT_TRUE(ours.count(s)) << s << " is missing";
}

TEST(Loader, AProgramThatLoadsTheLibraryByNameMovesBytesOverAUroceDevice) {
  int rc = 0;
  const std::string out =
      run("env UROCE_DEVICE0_NAME=uroce0 UROCE_DEVICE0_PORT=net_null0 "
          "UROCE_DEVICE0_IP=10.90.0.1/24 " UROCE_LOADER " " UROCE_IBVERBS_LIBRARY " uroce0",
          testing::TempDir() + "/loader.log", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ok\n"), std::string::npos) << out;
}

TEST(Loader, EnumNamesAndRatesAreLibibverbssWithoutIt) {
  // Alone in the loader's process (no libibverbs to hand the calls to),
  // the library answers from its own tables.
  int rc = 0;
  const std::string ours = run(std::string(UROCE_LOADER " " UROCE_IBVERBS_LIBRARY " --names"),
                               testing::TempDir() + "/names-ours.log", &rc);
  ASSERT_EQ(rc, 0) << ours;
  const std::string theirs = run(std::string(UROCE_LOADER " ") + real_libibverbs() + " --names",
                                 testing::TempDir() + "/names-theirs.log", &rc);
  ASSERT_EQ(rc, 0) << theirs;
  EXPECT_GT(ours.size(), 1000u);
  EXPECT_EQ(ours, theirs);
}

}  // namespace
}  // namespace uroce
