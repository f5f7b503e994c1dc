// SPDX-License-Identifier: BSD-3-Clause
#include "train_dist.h"

#include "../../distributed/dist.h"

namespace remora {
namespace driver {

DataShard start_distributed(const Config& cfg, const std::string& consistency) {
  if (!dist::launched_by_mpi()) return DataShard{};
  dist::InitOptions io;
  io.gpu_backend = cfg.train.distributed.backend;
  io.consistency_key = consistency;
  io.timeout_s = cfg.train.distributed.timeout_s;
  // init names the ranks whose build or consistency key differs, on every rank.
  dist::init(nullptr, nullptr, io);
  return DataShard{dist::rank(), dist::world_size()};
}

}  // namespace driver
}  // namespace remora
