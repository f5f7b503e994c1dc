// SPDX-License-Identifier: BSD-3-Clause
// The data-parallel start of `remora train` (docs/distributed.md): remora::dist
// under mpirun; the Trainer (train/) does the rest. In a plain run (no mpirun)
// nothing here touches MPI: a world of one.
#pragma once
#include <string>

#include "../experiment.h"

namespace remora {
namespace driver {

// Starts remora::dist when launched by mpirun / srun (train.distributed:
// backend, timeout_s; `consistency` is what every rank must agree on: the
// resolved config and the command line). Returns this rank's shard.
DataShard start_distributed(const Config& cfg, const std::string& consistency);

}  // namespace driver
}  // namespace remora
