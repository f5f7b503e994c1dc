// SPDX-License-Identifier: BSD-3-Clause
#include "dist_state.h"

#include <algorithm>
#include <cstring>

#include "../distributed/dist.h"

namespace remora {
namespace train {
namespace {

// The rows [first, first + rows) of a [B, ...] tensor's bytes, placed in a
// zeroed buffer of the whole batch, as 64-bit words: the ranks' byte ranges are
// disjoint, so an integer sum over ranks is a bitwise OR of them (no carries)
// and returns every rank's rows bit for bit.
Tensor gather_rows(const Tensor& local, int64_t rank, int64_t world) {
  Tensor t = local.to(Device::cpu()).contiguous();
  Shape shape = t.shape();
  const int64_t rows = t.size(0), global_batch = rows * world;
  const size_t row_bytes = size_t(t.numel() / std::max<int64_t>(1, rows)) * dtype_size(t.dtype());
  const size_t total = row_bytes * size_t(global_batch);
  Tensor words = Tensor::zeros({int64_t((total + 7) / 8)}, DType::i64);
  std::memcpy(words.data_ptr<char>() + size_t(rank * rows) * row_bytes, t.data_ptr<char>(), row_bytes * size_t(rows));
  dist::all_reduce(words, dist::ReduceOp::sum);
  shape[0] = global_batch;
  Tensor out = Tensor::empty(shape, t.dtype());
  std::memcpy(out.data_ptr<char>(), words.data_ptr<char>(), total);
  return out.to(local.device());
}

std::vector<Tensor> gather_all(const std::vector<Tensor>& ts, int64_t rank, int64_t world) {
  // Every rank has the same number of tensors (same model, same segment).
  dist::check_same("the number of carried state tensors", uint64_t(ts.size()));
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(gather_rows(t, rank, world));
  return out;
}

std::vector<Tensor> shard_all(const std::vector<Tensor>& ts, int64_t rank, int64_t world, const char* what) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) {
    if (t.dim() < 1 || t.size(0) % world != 0)
      throw Error(std::string("checkpoint: carried state ") + what + " has " +
                  std::to_string(t.dim() < 1 ? 0 : t.size(0)) + " rows, which do not divide among " +
                  std::to_string(world) + " ranks");
    const int64_t rows = t.size(0) / world;
    out.push_back(t.narrow(0, rank * rows, rows).contiguous());
  }
  return out;
}

}  // namespace

models::SequenceState gather_state(const models::SequenceState& mine, int64_t rank, int64_t world) {
  if (world == 1) return mine;
  models::SequenceState g;
  g.mems = gather_all(mine.mems, rank, world);
  g.rem_states = gather_all(mine.rem_states, rank, world);
  g.cells = gather_all(mine.cells, rank, world);
  return g;
}

models::SequenceState shard_state(const models::SequenceState& global, int64_t rank, int64_t world) {
  if (world == 1) return global;
  models::SequenceState s;
  s.mems = shard_all(global.mems, rank, world, "mems");
  s.rem_states = shard_all(global.rem_states, rank, world, "rem");
  s.cells = shard_all(global.cells, rank, world, "cells");
  return s;
}

std::vector<int64_t> gather_data_positions(int64_t mine) {
  dist::check_same("the data positions", uint64_t(mine));
  std::vector<int64_t> out;
  for (uint64_t p : dist::all_gather(uint64_t(mine))) out.push_back(int64_t(p));
  return out;
}

}  // namespace train
}  // namespace remora
