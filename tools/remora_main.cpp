#include <unistd.h>

#include <cstdlib>

#include "driver/cli.h"

int main(int argc, char** argv) {
  // With OpenMP's default wait policy, idle worker threads spin after every
  // parallel region; on a loaded machine they steal the core the main thread
  // needs and a 2-thread training step ran ~9x slower than a 1-thread one
  // (374 vs 3296 tokens/s measured with OMP_WAIT_POLICY=passive). libgomp reads
  // the variable once, when it is loaded before main, so the driver sets it
  // and re-executes itself. A user's own setting is kept (OMP_WAIT_POLICY, or
  // GOMP_SPINCOUNT, which overrides the policy's spin count); if exec fails
  // the run simply goes on with the default policy.
  //
  // The price of passive on a machine nobody else uses: every parallel region
  // starts by waking a sleeping worker. xl.json at 2 threads, idle 2-core VM:
  // 5.5-8.1k tokens/s passive, 10.6-13.6k with GOMP_SPINCOUNT=1000000 (spin a
  // few ms, then sleep); with two CPU hogs beside it, 3.2-6.1k passive against
  // 0.3-3.1k spinning (docs/benchmarks.md). Hence passive by default, and
  // GOMP_SPINCOUNT=1000000 for a dedicated machine (README).
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);
  }
  return remora::driver::run_cli(argc, argv);
}
