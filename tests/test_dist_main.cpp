// SPDX-License-Identifier: BSD-3-Clause
// main() of remora_dist_tests: dist::init, the Catch2 session, and one exit code
// for the whole job (a failure on any rank fails every rank).
#include <iostream>

#include "../distributed/dist.h"
#include "catch_session.h"

int main(int argc, char** argv) {
  using namespace remora;
  try {
    dist::init(&argc, &argv);
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  const int rc = remora_test::run_catch(argc, argv);
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
