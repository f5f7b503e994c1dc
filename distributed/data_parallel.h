// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// DataParallel: makes any nn::Module data-parallel over remora::dist (the design
/// of PyTorch's DistributedDataParallel). Each rank runs the same model on its
/// own shard of the batch; gradients are averaged over ranks before the step.
///
/// \code
///   dist::init(&argc, &argv);
///   auto model = std::make_shared<MyModel>(...);        // same seed or not:
///   dist::DataParallel dp(model);                         // rank 0's weights win
///   AdamW opt(model->parameters(), 1e-3);
///   for (...) {
///     model->zero_grad();
///     Tensor loss = loss_on_my_shard(*model);             // mean over the local shard
///     loss.backward();                                    // buckets start during backward
///     dp.sync_gradients();                                // grads = mean over ranks
///     opt.step();
///   }
/// \endcode
///
/// With the global batch split in equal shards and a mean loss, the averaged
/// gradient is the whole batch's gradient, so the run matches one process on
/// the whole batch (up to float summation order).
///
/// Construction (collective): checks that every rank has the same parameter
/// names, shapes and dtypes, broadcasts parameters and buffers from rank 0, and
/// verifies them identical by hash.
///
/// Buckets: parameters are grouped, in reverse registration order (roughly the
/// order backward produces their gradients), into buckets of about bucket_bytes
/// of one dtype and device. At sync each bucket's gradients are flattened into
/// one buffer and reduced with one all-reduce. With overlap on, a gradient-ready
/// hook (core/grad_hooks.h) starts a bucket's non-blocking all-reduce during
/// backward as soon as all its gradients are in; buckets always start in index
/// order (every rank must issue collectives in the same order), and
/// sync_gradients() starts the rest and waits. Overlapped and synchronous runs
/// reduce the same buffers in the same order: the results are identical.
///
/// A parameter without a gradient on some rank counts as zeros there; one
/// without a gradient on every rank keeps no gradient (an optimizer skips it),
/// as in a single process. Carried state (XL memories, recurrent cells) is the
/// caller's and stays per rank.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "../core/grad_hooks.h"
#include "../nn/module.h"
#include "dist.h"

namespace remora {
namespace dist {

/// Settings of a DataParallel (the Trainer sets them from DistributedOptions).
struct DataParallelOptions {
  /// Target size of one gradient bucket (a bucket holds at least one parameter).
  size_t bucket_bytes = size_t(1) << 20;
  /// Start a bucket's all-reduce during backward as soon as its gradients are ready.
  bool overlap = true;
  /// Hash-check the parameters every N sync_gradients() calls (0: only at construction).
  int check_every = 0;
};

/// Makes a module data-parallel: this file's description gives the design.
class DataParallel {
 public:
  /// Wraps \p module (collective: see the construction rules above; calls
  /// dist::init() first when it has not run). Only parameters that require a
  /// gradient are synchronised. An Error when the module is null, bucket_bytes
  /// is 0, check_every < 0, or the ranks' parameters differ in names, shapes or
  /// dtypes.
  explicit DataParallel(std::shared_ptr<nn::Module> module, DataParallelOptions opt = {});
  ~DataParallel();  ///< Removes the gradient hooks (waits for unfinished buckets).
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  nn::Module& module() { return *module_; }  ///< The wrapped module.
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }  ///< The wrapped module, shared.
  const DataParallelOptions& options() const { return opt_; }  ///< The options, as given.

  /// Averages every parameter's gradient over the ranks (collective): starts the
  /// buckets not started during backward, waits for all. Call after backward,
  /// before the optimizer step.
  void sync_gradients();
  /// loss.backward() then sync_gradients().
  void backward(const Tensor& loss);
  /// Gradient accumulation: while off, backward starts no all-reduce and
  /// sync_gradients() is an Error; turn it back on for the last micro-batch
  /// (its hooks then reduce the accumulated gradients).
  void set_grad_sync(bool on);
  bool grad_sync() const { return sync_on_; }  ///< Whether gradient sync is on (the default).

  /// Parameters and buffers identical on every rank (collective; an Error
  /// naming the ranks otherwise).
  void check_parameters() const;
  /// Broadcasts parameters and buffers from root (collective).
  void broadcast_parameters(int root = 0);

  /// \name Introspection (tests, benchmarks)
  /// @{

  int num_buckets() const { return int(buckets_.size()); }  ///< The number of gradient buckets.
  /// Parameter indices (into module().parameters()) of bucket b.
  std::vector<size_t> bucket_params(int b) const;
  /// Buckets started during the last backward, before sync_gradients().
  int buckets_started_in_backward() const { return started_in_backward_last_; }
  /// @}

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;
    int64_t numel = 0;           // gradient values (a count per parameter follows)
    Tensor buffer;               // [numel + params.size()]
    Work work;
    int ready = 0;
    bool started = false;
  };
  void on_grad_ready(size_t param);
  void start_ready_buckets();
  void start(Bucket& b);
  void reset_round();

  std::shared_ptr<nn::Module> module_;
  DataParallelOptions opt_;
  std::vector<Tensor> params_;
  std::vector<int> bucket_of_;        // param index -> bucket
  std::vector<char> param_ready_;
  std::vector<Bucket> buckets_;
  std::vector<GradHookHandle> hooks_;
  size_t next_to_start_ = 0;
  int started_in_backward_ = 0;
  int started_in_backward_last_ = 0;
  bool sync_on_ = true;
  bool in_sync_ = false;
  int64_t syncs_ = 0;
};

}  // namespace dist
}  // namespace remora
