// The driver's data-parallel pieces that need no mpirun: the train.distributed
// config keys and the row split of DataShard. The mpirun runs themselves are
// tests/test_driver_dist.sh (ctest driver_dist_*).
#include <catch2/catch.hpp>

#include "driver/config.h"
#include "driver/task.h"

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
  CHECK(c.train.distributed.bucket_mb == 1.0);
  CHECK(c.train.distributed.backend == "auto");
  CHECK(c.train.distributed.check_every == 100);
  CHECK(c.train.distributed.timeout_s == 300);
  CHECK(c.resolved["train"]["distributed"]["backend"] == "auto");
  CHECK(c.resolved["train"]["distributed"]["check_every"] == 100);

  driver::Config d = load({"train.distributed.bucket_mb=0.25", "train.distributed.backend=nccl",
                           "train.distributed.check_every=7", "train.distributed.timeout_s=12.5"});
  CHECK(d.train.distributed.bucket_mb == 0.25);
  CHECK(d.train.distributed.backend == "nccl");
  CHECK(d.train.distributed.check_every == 7);
  CHECK(d.train.distributed.timeout_s == 12.5);
  CHECK(d.resolved["train"]["distributed"]["bucket_mb"] == 0.25);

  std::string e = config_error({"train.distributed.backend=gloo"});
  CHECK(e.find("train.distributed.backend") != std::string::npos);
  e = config_error({"train.distributed.bucket=4"});
  CHECK(e.find("train.distributed.bucket") != std::string::npos);
  CHECK(e.find("unknown key") != std::string::npos);
  CHECK(config_error({"train.distributed.bucket_mb=0"}).find("train.distributed.bucket_mb") != std::string::npos);
  CHECK(config_error({"train.distributed.check_every=-1"}).find("train.distributed.check_every") != std::string::npos);
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
