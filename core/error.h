// SPDX-License-Identifier: BSD-3-Clause
// Remora errors. Every user-facing failure is a remora::Error whose message
// names the op, the offending shapes/dtypes/keys, and how to fix it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace remora {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// An allocation the device (host memory or a GPU) refused. Not the input's
// fault: callers that turn errors into input errors let it pass, and the
// driver reports it as a failure during the run (exit 1).
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& msg) : Error(msg) {}
};

}  // namespace remora

// REMORA_CHECK(cond, "op: what went wrong " << detail << "; fix: ...")
#define REMORA_CHECK(cond, msg)                      \
  do {                                               \
    if (!(cond)) {                                   \
      std::ostringstream remora_check_os_;           \
      remora_check_os_ << msg;                       \
      throw ::remora::Error(remora_check_os_.str()); \
    }                                                \
  } while (0)

#define REMORA_FAIL(msg) REMORA_CHECK(false, msg)
