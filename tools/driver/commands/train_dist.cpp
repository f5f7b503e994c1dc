#include "train_dist.h"

#include <cstring>

#include "../../../dist/dist.h"

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

namespace {

// The rows [first, first + rows) of a [B, ...] tensor's bytes, placed in a
// zeroed buffer of the whole batch, as 64-bit words: the ranks' byte ranges
// are disjoint, so an integer sum over ranks is a bitwise OR of them (no
// carries) and returns every rank's rows bit for bit.
Tensor gather_rows(const Tensor& local, int64_t first, int64_t global_batch) {
  Tensor t = local.to(Device::cpu()).contiguous();
  Shape shape = t.shape();
  const size_t row_bytes = size_t(t.numel() / std::max<int64_t>(1, t.size(0))) * dtype_size(t.dtype());
  const size_t total = row_bytes * size_t(global_batch);
  Tensor words = Tensor::zeros({int64_t((total + 7) / 8)}, DType::i64);
  std::memcpy(words.data_ptr<char>() + size_t(first) * row_bytes, t.data_ptr<char>(), row_bytes * size_t(t.size(0)));
  dist::all_reduce(words, dist::ReduceOp::sum);
  shape[0] = global_batch;
  Tensor out = Tensor::empty(shape, t.dtype());
  std::memcpy(out.data_ptr<char>(), words.data_ptr<char>(), total);
  return out.to(local.device());
}

std::vector<Tensor> gather_all(const std::vector<Tensor>& ts, const DataShard& s, int64_t B) {
  // Every rank has the same number of tensors (same model, same segment).
  dist::check_same("the number of carried state tensors", uint64_t(ts.size()));
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(gather_rows(t, s.first_row(B), B));
  return out;
}

std::vector<Tensor> shard_all(const std::vector<Tensor>& ts, const DataShard& s, int64_t B, const char* what) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) {
    if (t.dim() < 1 || t.size(0) != B)
      throw InputError(std::string("checkpoint: carried state ") + what + " has " +
                       std::to_string(t.dim() < 1 ? 0 : t.size(0)) + " rows, expected the global batch " +
                       std::to_string(B));
    out.push_back(t.narrow(0, s.first_row(B), s.rows(B)).contiguous());
  }
  return out;
}

}  // namespace

State gather_state(const State& mine, const DataShard& shard, int64_t global_batch) {
  if (shard.world == 1) return mine;
  State g;
  g.mems = gather_all(mine.mems, shard, global_batch);
  g.rem_states = gather_all(mine.rem_states, shard, global_batch);
  g.cells = gather_all(mine.cells, shard, global_batch);
  return g;
}

State shard_state(const State& global, const DataShard& shard, int64_t global_batch) {
  if (shard.world == 1) return global;
  State s;
  s.mems = shard_all(global.mems, shard, global_batch, "mems");
  s.rem_states = shard_all(global.rem_states, shard, global_batch, "rem");
  s.cells = shard_all(global.cells, shard, global_batch, "cells");
  return s;
}

std::vector<int64_t> gather_data_positions(int64_t mine) {
  dist::check_same("the data positions", uint64_t(mine));
  std::vector<int64_t> out;
  for (uint64_t p : dist::all_gather(uint64_t(mine))) out.push_back(int64_t(p));
  return out;
}

}  // namespace driver
}  // namespace remora
