/* SPDX-License-Identifier: BSD-3-Clause */
#include "support/child.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace uroce::test {

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Child::Child(const std::string& cmd, const std::string& log) : log_(log) {
  const std::string line = "exec " + cmd + " >" + log + " 2>&1";
  const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
  if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
    pid_ = -1;
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool Child::exited_within(std::chrono::seconds limit) {
  if (reaped_) return true;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (waitpid(pid_, &status_, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  reaped_ = true;
  return true;
}

int Child::wait(std::chrono::seconds limit) {
  if (!exited_within(limit)) {
    // A program that hangs says where: every thread's stack, after
    // what it printed (its own buffered output dies with it).
    sh("command -v gdb >/dev/null && timeout 60 gdb -batch -nx -p " + std::to_string(pid_) +
       " -ex 'echo \\n--- hung; its threads:\\n' -ex 'thread apply all bt' >>" + log_ + " 2>&1");
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    reaped_ = true;
    return -1;
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
}

void Child::interrupt() { signal(SIGINT); }

void Child::signal(int sig) {
  if (pid_ > 0 && !reaped_) kill(pid_, sig);
}

}  // namespace uroce::test
