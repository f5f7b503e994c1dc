#include <unistd.h>

#include <cstdlib>

#include "driver/cli.h"

int main(int argc, char** argv) {
  // With OpenMP's default wait policy, idle worker threads spin after every
  // parallel region; on a loaded machine they steal the core the main thread
  // needs and a 2-thread training step ran ~9x slower than a 1-thread one
  // (374 vs 3296 tokens/s measured with OMP_WAIT_POLICY=passive). libgomp reads
  // the variable once, when it is loaded before main, so the driver sets it
  // and re-executes itself. A user's own setting is kept; if exec fails the
  // run simply goes on with the default policy.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);
  }
  return remora::driver::run_cli(argc, argv);
}
