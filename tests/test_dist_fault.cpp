// SPDX-License-Identifier: BSD-3-Clause
// Fault helper for tests/test_dist_chaos.sh (launched with mpirun -np 2).
// A small data-parallel loop shaped like `remora train`: an all-reduce every
// step and, every 20 steps, an evaluation: rank 0 evaluates (0.3 s) while the
// other ranks wait in dist::wait_for_rank(0, eval timeout, "evaluation and
// checkpoint"); rank 0 then waits for them at most the collective timeout.
// Collective timeout 4 s (REMORA_DIST_TIMEOUT overrides it), evaluation
// timeout 6 s.
//
//   remora_dist_fault run            faults come from REMORA_TEST_FAULT
//                                    (dist.h: fault_point): its points here are
//                                    "init", "step" (step 50), "evaluation"
//                                    (each evaluation, every rank) and "barrier"
//   remora_dist_fault abort [RANK]   RANK (default 1) calls abort() at step 50
//   remora_dist_fault error [RANK]   RANK hits a remora::Error at step 50 and
//                                    returns 2 from main (the driver's path)
//   remora_dist_fault config         rank 1 has another configuration: init()
//                                    fails on every rank naming rank 1
//   remora_dist_fault nompi          (no launcher; build without MPI) init()
//                                    with OMPI_COMM_WORLD_SIZE=2 set
// A rank that is not stopped within 40 s prints "SURVIVED" and exits 0, which
// the script counts as a failure.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <remora/remora.h>
#include "../distributed/dist.h"

using namespace remora;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "run";
  const int fault_rank = argc > 2 ? std::atoi(argv[2]) : 1;
  const double eval_timeout_s = 6;
  try {
    dist::InitOptions opt;
    opt.timeout_s = 4;
    if (mode == "config") {  // rank 1 (as the launcher numbers it) got another learning rate
      const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
      opt.consistency_key = std::string("{\"lr\": ") + (r && std::string(r) == "1" ? "0.1" : "0.01") + "}";
    }
    dist::init(&argc, &argv, opt);
    if (mode == "nompi") {
      std::cerr << "SURVIVED: init accepted a launcher's 2 ranks without MPI\n";
      return 0;
    }
    Tensor t = Tensor::ones({1000});
    auto start = std::chrono::steady_clock::now();
    for (int step = 1;; ++step) {
      if (step == 50) {
        if (dist::rank() == fault_rank && (mode == "abort" || mode == "error")) {
          std::cerr << "fault helper: " << dist::where() << ": failing now (" << mode << ")\n";
          if (mode == "abort") std::abort();
          throw Error("dist fault helper: rank " + std::to_string(fault_rank) + " hit an error at step 50");
        }
        dist::fault_point("step");
      }
      dist::all_reduce(t, dist::ReduceOp::avg);
      if (step % 20 == 0) {
        dist::fault_point("evaluation");
        if (dist::is_main()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        dist::wait_for_rank(0, eval_timeout_s, "evaluation and checkpoint");
      }
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(40)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::cerr << "SURVIVED: " << dist::where() << " was not stopped\n";
    dist::finalize();
    return 0;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
