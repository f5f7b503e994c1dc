// SPDX-License-Identifier: BSD-3-Clause
// The test runner: fills the gradcheck registry (cases/, explicit
// registration) before Catch runs any test.
#include "catch_session.h"

#include "../cases/cases.h"

int main(int argc, char* argv[]) {
  remora::cases::register_all_cases();
  return remora_test::run_catch(argc, argv);
}
