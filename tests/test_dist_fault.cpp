// Fault helper for tests/test_dist_fault.sh (launched with mpirun -np 2):
//   exit:   rank 1 calls exit(1) in the middle while rank 0 keeps all-reducing
//   abort:  rank 1 calls abort()
//   error:  rank 1 hits a remora::Error and returns 2 from main (the driver's path)
//   kill:   rank 1 is killed by SIGKILL (as by the OOM killer)
//   stall:  rank 1 stays alive but stops calling collectives; rank 0's 3 s
//           collective timeout turns its wait into an Error
//   config: the ranks disagree on their configuration: init() fails on every rank
//   nompi:  (no launcher; build without MPI) init() with OMPI_COMM_WORLD_SIZE=2 set
// A surviving rank that is not stopped prints "SURVIVED" and exits 0, which the
// script counts as a failure.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <remora/remora.h>
#include "../dist/dist.h"

using namespace remora;

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    dist::InitOptions opt;
    if (mode == "config") {  // rank 1 (as the launcher numbers it) got another learning rate
      const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
      opt.consistency_key = std::string("{\"lr\": ") + (r && std::string(r) == "1" ? "0.1" : "0.01") + "}";
    }
    if (mode == "stall") opt.timeout_s = 3;
    dist::init(&argc, &argv, opt);
    if (mode == "nompi") {
      std::cerr << "SURVIVED: init accepted a launcher's 2 ranks without MPI\n";
      return 0;
    }
    Tensor t = Tensor::ones({1000});
    auto start = std::chrono::steady_clock::now();
    for (int step = 0;; ++step) {
      if (step == 50 && dist::rank() == 1) {
        std::cerr << "fault helper: " << dist::where() << ": failing now (" << mode << ")\n";
        if (mode == "exit") std::exit(1);
        if (mode == "abort") std::abort();
        if (mode == "kill") std::raise(SIGKILL);
        if (mode == "stall") std::this_thread::sleep_for(std::chrono::seconds(600));
        if (mode == "error") throw Error("dist fault helper: rank 1 hit an error at step 50");
      }
      dist::all_reduce(t, dist::ReduceOp::avg);
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(120)) break;
      if (step > 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::cerr << "SURVIVED: " << dist::where() << " was not stopped\n";
    dist::finalize();
    return 0;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
