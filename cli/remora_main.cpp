// SPDX-License-Identifier: BSD-3-Clause
#include "cli/cli.h"

// CPU threads are Remora's own pool (core/parallel.h): how its idle workers
// wait (spin briefly, then yield, then sleep) is set there, so the driver
// needs no OpenMP environment of its own.
int main(int argc, char** argv) { return remora::driver::run_cli(argc, argv); }
