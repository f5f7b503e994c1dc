// SPDX-License-Identifier: BSD-3-Clause
// The driver's data-parallel pieces that need no mpirun: the train.distributed
// config keys and the row split of DataShard. The mpirun runs themselves are
// tests/test_driver_dist.sh (ctest driver_dist_*).
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "../distributed/dist.h"
#include "cli/config.h"
#include "cli/task.h"

using namespace remora;

namespace {
driver::Config load(const std::vector<std::string>& sets) {
  return driver::load_config(std::string(REMORA_SOURCE_DIR) + "/configs/default.json", sets);
}
std::string config_error(const std::vector<std::string>& sets) {
  try {
    load(sets);
  } catch (const driver::ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("driver: train.distributed keys have defaults, resolve and are validated", "[driver][dist]") {
  driver::Config c = load({});
  CHECK(c.train.trainer.distributed.bucket_mb == 1.0);
  CHECK(c.train.distributed.backend == "auto");
  CHECK(c.train.trainer.distributed.check_every == 100);
  CHECK(c.train.distributed.timeout_s == 300);
  CHECK(c.train.trainer.distributed.eval_timeout_s == -1);  // derived from timeout_s
  CHECK(c.resolved["train"]["distributed"]["eval_timeout_s"] == -1);
  CHECK(c.resolved["train"]["distributed"]["backend"] == "auto");
  CHECK(c.resolved["train"]["distributed"]["check_every"] == 100);

  driver::Config d = load({"train.distributed.bucket_mb=0.25", "train.distributed.backend=nccl",
                           "train.distributed.check_every=7", "train.distributed.timeout_s=12.5",
                           "train.distributed.eval_timeout_s=90"});
  CHECK(d.train.trainer.distributed.bucket_mb == 0.25);
  CHECK(d.train.distributed.backend == "nccl");
  CHECK(d.train.trainer.distributed.check_every == 7);
  CHECK(d.train.distributed.timeout_s == 12.5);
  CHECK(d.train.trainer.distributed.eval_timeout_s == 90);
  CHECK(d.resolved["train"]["distributed"]["bucket_mb"] == 0.25);

  std::string e = config_error({"train.distributed.backend=gloo"});
  CHECK(e.find("train.distributed.backend") != std::string::npos);
  e = config_error({"train.distributed.bucket=4"});
  CHECK(e.find("train.distributed.bucket") != std::string::npos);
  CHECK(e.find("unknown key") != std::string::npos);
  CHECK(config_error({"train.distributed.bucket_mb=0"}).find("train.distributed.bucket_mb") != std::string::npos);
  CHECK(config_error({"train.distributed.check_every=-1"}).find("train.distributed.check_every") != std::string::npos);
  CHECK(config_error({"train.distributed.eval_timeout_s=-2"}).find("train.distributed.eval_timeout_s") !=
        std::string::npos);  // -1 is the derived bound
  CHECK(config_error({"train.distributed.timeout_s=\"soon\""}).find("train.distributed.timeout_s") !=
        std::string::npos);
}

TEST_CASE("driver: DataShard rows split the global batch into disjoint equal blocks", "[driver][dist]") {
  const int64_t B = 12;
  for (int64_t world : {1, 2, 3, 4, 6, 12}) {
    int64_t next = 0;
    for (int64_t r = 0; r < world; ++r) {
      driver::DataShard s{r, world};
      CHECK(s.first_row(B) == next);  // contiguous, in rank order, no gap or overlap
      CHECK(s.rows(B) == B / world);
      next += s.rows(B);
    }
    CHECK(next == B);
  }
}

// MPI is a plugin (distributed/dist_internal.h) that only a launched run loads: a
// plain process (this one, like `remora train` without mpirun) goes through
// init, collectives and finalize as a world of one without mapping OpenMPI.
TEST_CASE("dist: a world of one never maps MPI", "[driver][dist]") {
  REQUIRE_FALSE(dist::launched_by_mpi());
  dist::init(nullptr, nullptr);
  CHECK(dist::world_size() == 1);
  Tensor t = Tensor::ones({5});
  dist::all_reduce(t, dist::ReduceOp::avg);
  dist::broadcast(t, 0);
  dist::barrier();
  CHECK(t.sum().item() == 5.0);
  dist::finalize();
  std::ifstream maps("/proc/self/maps");
  REQUIRE(maps.good());
  bool mapped = false;
  for (std::string line; std::getline(maps, line);)
    mapped = mapped || line.find("libmpi") != std::string::npos ||
             line.find("libopen-pal") != std::string::npos || line.find("libremora_mpi") != std::string::npos;
  CHECK_FALSE(mapped);
}
