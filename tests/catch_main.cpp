// SPDX-License-Identifier: BSD-3-Clause
// The test runner: fills the gradcheck registry (cases/, explicit
// registration) before Catch runs any test.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "../cases/cases.h"

int main(int argc, char* argv[]) {
  remora::cases::register_all_cases();
  return Catch::Session().run(argc, argv);
}
