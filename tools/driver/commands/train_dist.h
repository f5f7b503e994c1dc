// The data-parallel side of `remora train` (docs/distributed.md): starting
// remora::dist under mpirun, moving carried state between this rank's rows
// and the global batch (for checkpoints), and the checks every rank must agree on.
//
// In a plain run (no mpirun) none of this touches MPI: a world of one, and
// train.cpp takes none of these paths, so a plain run is bit-identical to the
// driver without them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../experiment.h"

namespace remora {
namespace driver {

// Starts remora::dist when launched by mpirun / srun (train.distributed:
// backend, timeout_s; `consistency` is what every rank must agree on: the
// resolved config and the command line). Returns this rank's shard.
DataShard start_distributed(const Config& cfg, const std::string& consistency);

// The carried state of the global batch from every rank's rows (collective:
// every rank calls it with its own state; every rank gets the whole). The
// rows are moved bit for bit, so a checkpoint holds exactly the state a one-
// process run would hold.
State gather_state(const State& mine, const DataShard& shard, int64_t global_batch);
// This rank's rows of a global-batch state (a checkpoint's), on `dev`.
// An InputError when a tensor's first dimension is not the global batch.
State shard_state(const State& global, const DataShard& shard, int64_t global_batch);

// Every rank's data position, indexed by rank (collective). They must be
// equal (every rank draws the global batch): an error naming the ranks otherwise.
std::vector<int64_t> gather_data_positions(int64_t mine);

}  // namespace driver
}  // namespace remora
