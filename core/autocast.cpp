// SPDX-License-Identifier: BSD-3-Clause
// The thread-local autocast precision (core/autocast.h).
#include "autocast.h"

#include "error.h"

namespace remora {

namespace {
thread_local Precision g_autocast = Precision::f32;
}  // namespace

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "f32"; }

Precision parse_precision(const std::string& s) {
  if (s == "f32") return Precision::f32;
  if (s == "bf16") return Precision::bf16;
  REMORA_FAIL("unknown precision \"" << s << "\"; expected one of: f32, bf16");
}

Precision autocast_precision() { return g_autocast; }
void set_autocast_precision(Precision p) { g_autocast = p; }

}  // namespace remora
