/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Running programs from tests: a shell command to its end, or in the
// background with its output in a file.

#include <sys/types.h>

#include <chrono>
#include <string>

namespace uroce::test {

/// Runs `cmd` through /bin/sh; its exit status, or -1.
int sh(const std::string& cmd);

/// The contents of a file ("" if it cannot be read).
std::string slurp(const std::string& path);

/// A command run through /bin/sh in the background, its output in a file.
class Child {
 public:
  Child(const std::string& cmd, const std::string& log);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  /// The exit status, or -1 if it had not ended within `limit` (then it
  /// is killed).
  int wait(std::chrono::seconds limit);
  /// Whether it ended within `limit`; unlike wait(), it lives on if not
  /// (then wait() for it, or look at it first).
  bool exited_within(std::chrono::seconds limit);
  void interrupt();
  /// Sends `sig` (SIGKILL: the program dies where it stands).
  void signal(int sig);
  pid_t pid() const { return pid_; }
  std::string output() const { return slurp(log_); }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string log_;
};

}  // namespace uroce::test
