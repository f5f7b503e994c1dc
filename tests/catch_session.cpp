// SPDX-License-Identifier: BSD-3-Clause
// Catch2's implementation (CATCH_CONFIG_RUNNER), compiled once for every test
// program, and run_catch: a Catch::Session over the command line, for each main().
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.h"

int remora_test::run_catch(int argc, char** argv) { return Catch::Session().run(argc, argv); }
