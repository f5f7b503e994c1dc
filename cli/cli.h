// SPDX-License-Identifier: BSD-3-Clause
// The `remora` command line (see `remora --help`).
#pragma once

namespace remora {
namespace driver {

// Runs one command; returns the exit code (0 ok, 2 usage/config/input, 1 run failure).
int run_cli(int argc, char** argv);

}  // namespace driver
}  // namespace remora
