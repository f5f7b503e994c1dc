// SPDX-License-Identifier: BSD-3-Clause
// Whether this build runs under AddressSanitizer (tools/scripts/test.sh
// --sanitize; header only, not a test file).
#pragma once

namespace remora_test {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace remora_test
