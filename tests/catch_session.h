// SPDX-License-Identifier: BSD-3-Clause
// The test programs' Catch2 runner: Catch's implementation is compiled once, in
// catch_session.cpp (remora_catch), and each program's main() calls run_catch.
#pragma once

namespace remora_test {

/// Runs the Catch2 session over the program's command line (test names, tags,
/// reporters, as any Catch2 program); returns its exit code.
int run_catch(int argc, char** argv);

}  // namespace remora_test
