// SPDX-License-Identifier: BSD-3-Clause
// main() of remora_dist_tests: dist::init, the Catch2 session, and one exit code
// for the whole job (a failure on any rank fails every rank).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>

#include "../distributed/dist.h"

int main(int argc, char** argv) {
  using namespace remora;
  try {
    dist::init(&argc, &argv);
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  if (rc == 0) rc = session.run();
  // Every rank learns whether any rank failed.
  int any = 0;
  try {
    for (uint64_t v : dist::all_gather(uint64_t(rc != 0))) any |= int(v);
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  if (dist::world_size() > 1)
    std::cout << "dist tests: " << dist::where() << ": " << (rc ? "FAILED" : "passed")
              << (any && !rc ? " (another rank failed)" : "") << "\n";
  dist::finalize();
  return any ? 1 : 0;
}
