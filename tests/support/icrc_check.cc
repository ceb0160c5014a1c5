/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/icrc_check.h"

#include <sys/wait.h>

#include <cstdio>
#include <sstream>

namespace uroce::test {

IcrcCheck independent_icrc_check(const std::string& path) {
  IcrcCheck r;
  // Debian's interpreter, the one its python3 packages serve: a python3
  // earlier on PATH (a version manager's shim) may cost a third of a
  // second a start, and a test checks two captures.
  const std::string cmd = "/usr/bin/python3 '" UROCE_ICRC_CHECK "' '" + path + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) r.output.append(buf, n);
  const int rc = pclose(p);
  r.status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  // The last line: "icrc_check: N RoCEv2 frames, M bad ICRC, K other frames".
  const auto at = r.output.rfind("icrc_check: ");
  if (at != std::string::npos) {
    std::istringstream in(r.output.substr(at + 12));
    std::string word;
    in >> r.roce >> word >> word >> r.bad >> word >> word >> r.other;
  }
  return r;
}

}  // namespace uroce::test
