// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Carried sequence state in a data-parallel run: each rank holds the rows of
/// the global batch it trains on; a checkpoint holds the whole batch's state,
/// so a run resumes under any world size that divides the batch.
#pragma once
#include <cstdint>
#include <vector>

#include "../models/sequence_model.h"

namespace remora {
namespace train {

/// The global batch's state from every rank's rows (collective: every rank
/// calls it; every rank gets the whole). Rows are moved bit for bit, so a
/// checkpoint holds exactly the state a one-process run would hold.
models::SequenceState gather_state(const models::SequenceState& mine, int64_t rank, int64_t world);
/// This rank's rows of a global-batch state. An Error when a tensor's first
/// dimension does not divide among the ranks.
models::SequenceState shard_state(const models::SequenceState& global, int64_t rank, int64_t world);
/// Every rank's data position, indexed by rank (collective). They must be equal
/// (every rank draws the global batch): an Error naming the ranks otherwise.
std::vector<int64_t> gather_data_positions(int64_t mine);

}  // namespace train
}  // namespace remora
