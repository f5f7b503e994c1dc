// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Remora errors. Every user-facing failure is a remora::Error whose message
/// names the op, the offending shapes/dtypes/keys, and how to fix it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace remora {

/// The exception Remora throws for every user-facing failure (a bad shape,
/// dtype, device, argument, key or file); what() says what went wrong and how
/// to fix it.
class Error : public std::runtime_error {
 public:
  /// An error with the message msg.
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/// An allocation the device (host memory or a GPU) refused. Not the input's
/// fault: callers that turn errors into input errors let it pass, and the
/// driver reports it as a failure during the run (exit 1).
class OutOfMemoryError : public Error {
 public:
  /// An out-of-memory error with the message msg.
  explicit OutOfMemoryError(const std::string& msg) : Error(msg) {}
};

}  // namespace remora

/// Throws remora::Error when cond is false; msg is a stream expression, e.g.
/// `REMORA_CHECK(cond, "op: what went wrong " << detail << "; fix: ...")`.
/// cond is evaluated once, msg only when cond is false.
#define REMORA_CHECK(cond, msg)                      \
  do {                                               \
    if (!(cond)) {                                   \
      std::ostringstream remora_check_os_;           \
      remora_check_os_ << msg;                       \
      throw ::remora::Error(remora_check_os_.str()); \
    }                                                \
  } while (0)

/// Throws remora::Error with the stream expression msg (REMORA_CHECK(false, msg)).
#define REMORA_FAIL(msg) REMORA_CHECK(false, msg)
