// SPDX-License-Identifier: BSD-3-Clause
// DataParallel (data_parallel.h): bucketed gradient averaging over remora::dist,
// started from the autograd engine's gradient-ready hook when overlap is on.
#include "data_parallel.h"

#include <algorithm>

#include "../core/autograd.h"
#include "../core/error.h"

namespace remora {
namespace dist {

DataParallel::DataParallel(std::shared_ptr<nn::Module> module, DataParallelOptions opt)
    : module_(std::move(module)), opt_(opt) {
  REMORA_CHECK(module_ != nullptr, "DataParallel: the module is null");
  REMORA_CHECK(opt_.bucket_bytes > 0, "DataParallel: bucket_bytes must be > 0");
  REMORA_CHECK(opt_.check_every >= 0, "DataParallel: check_every must be >= 0, got " << opt_.check_every);
  if (!initialized()) init();
  for (const Tensor& p : module_->parameters())
    if (p.requires_grad()) params_.push_back(p);

  // Same model everywhere, then rank 0's values everywhere, verified.
  check_same_structure(*module_);
  broadcast_parameters(0);
  check_parameters();

  // Buckets over the parameters in reverse order, split at dtype/device changes.
  bucket_of_.assign(params_.size(), -1);
  param_ready_.assign(params_.size(), 0);
  size_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    size_t pb = size_t(p.numel()) * dtype_size(p.dtype());
    bool fresh = buckets_.empty();
    if (!fresh) {
      const Tensor& first = params_[buckets_.back().params.front()];
      fresh = first.dtype() != p.dtype() || first.device() != p.device() ||
              bytes + pb > opt_.bucket_bytes;
    }
    if (fresh) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
    bytes += pb;
    bucket_of_[k] = int(buckets_.size()) - 1;
  }
  for (Bucket& b : buckets_) {
    const Tensor& first = params_[b.params.front()];
    b.buffer = Tensor::zeros({b.numel + int64_t(b.params.size())}, first.dtype(), first.device());
  }
  if (world_size() > 1 && opt_.overlap)
    for (size_t k = 0; k < params_.size(); ++k)
      hooks_.push_back(on_grad_accumulated(params_[k], [this, k](const Tensor&) { on_grad_ready(k); }));
}

DataParallel::~DataParallel() {
  hooks_.clear();  // no hook may run into a dead object
  for (Bucket& b : buckets_)
    if (b.work.pending()) try { b.work.wait(); } catch (...) {}
}

std::vector<size_t> DataParallel::bucket_params(int b) const {
  REMORA_CHECK(b >= 0 && b < num_buckets(), "DataParallel: no bucket " << b << " (" << num_buckets() << " buckets)");
  return buckets_[size_t(b)].params;
}

void DataParallel::set_grad_sync(bool on) {
  REMORA_CHECK(next_to_start_ == 0 || on,
               "DataParallel: set_grad_sync(false) while buckets of a backward are in flight; "
               "call sync_gradients() first");
  sync_on_ = on;
}

void DataParallel::on_grad_ready(size_t k) {
  if (!sync_on_ || in_sync_) return;
  REMORA_CHECK(!param_ready_[k],
               "DataParallel (" << where() << "): a second backward reached parameter " << k
                                << " before sync_gradients(); for gradient accumulation over "
                                   "micro-batches call set_grad_sync(false) on all but the last");
  param_ready_[k] = 1;
  Bucket& b = buckets_[size_t(bucket_of_[k])];
  ++b.ready;
  if (b.ready == int(b.params.size())) start_ready_buckets();
  // Let MPI progress the buckets already in flight (no progress thread by default).
  for (size_t i = 0; i < next_to_start_; ++i)
    if (buckets_[i].work.pending()) buckets_[i].work.test();
}

void DataParallel::start_ready_buckets() {
  // In index order only: every rank must issue its collectives in the same order.
  while (next_to_start_ < buckets_.size() &&
         buckets_[next_to_start_].ready == int(buckets_[next_to_start_].params.size())) {
    start(buckets_[next_to_start_]);
    ++next_to_start_;
    ++started_in_backward_;
  }
}

void DataParallel::start(Bucket& b) {
  NoGradGuard ng;
  std::vector<double> counts(b.params.size(), 0.0);
  for (size_t i = 0; i < b.params.size(); ++i) {
    const Tensor& g = params_[b.params[i]].grad();
    int64_t n = params_[b.params[i]].numel();
    Tensor slot = b.buffer.narrow(0, b.offsets[i], n);
    if (g.defined()) {
      slot.copy_(g.reshape({n}));
      counts[i] = 1;
    } else {
      slot.zero_();
    }
  }
  // One trailing slot per parameter: how many ranks had a gradient for it.
  b.buffer.narrow(0, b.numel, int64_t(b.params.size()))
      .copy_(Tensor::from_vector(counts, {int64_t(counts.size())}, b.buffer.dtype(), b.buffer.device()));
  b.work = all_reduce_async(b.buffer, ReduceOp::sum);
  b.started = true;
}

void DataParallel::sync_gradients() {
  REMORA_CHECK(sync_on_, "DataParallel: sync_gradients() while gradient sync is off "
                         "(set_grad_sync(true) before the last micro-batch's backward)");
  ++syncs_;
  if (world_size() > 1) {
    in_sync_ = true;
    try {
      for (; next_to_start_ < buckets_.size(); ++next_to_start_) start(buckets_[next_to_start_]);
      NoGradGuard ng;
      double inv = 1.0 / world_size();
      for (Bucket& b : buckets_) {
        b.work.wait();
        std::vector<double> counts = b.buffer.narrow(0, b.numel, int64_t(b.params.size())).to_vector();
        Tensor grads = b.buffer.narrow(0, 0, b.numel);
        grads.mul_(inv);
        for (size_t i = 0; i < b.params.size(); ++i) {
          Tensor& p = params_[b.params[i]];
          if (counts[i] == 0) continue;  // no rank had a gradient: keep none
          p.set_grad(grads.narrow(0, b.offsets[i], p.numel()).reshape(p.shape()).clone());
        }
      }
      reset_round();
    } catch (...) {
      in_sync_ = false;
      throw;
    }
    in_sync_ = false;
  }
  if (opt_.check_every > 0 && syncs_ % opt_.check_every == 0) check_parameters();
  started_in_backward_last_ = started_in_backward_;
  started_in_backward_ = 0;
}

void DataParallel::reset_round() {
  std::fill(param_ready_.begin(), param_ready_.end(), 0);
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.started = false;
  }
  next_to_start_ = 0;
}

void DataParallel::backward(const Tensor& loss) {
  loss.backward();
  sync_gradients();
}

void DataParallel::check_parameters() const {
  check_same_parameters(*module_, "parameters (DataParallel: parameters and buffers after the broadcast "
                                  "from rank 0 or the last step)");
}

void DataParallel::broadcast_parameters(int root) {
  NoGradGuard ng;
  auto bcast = [&](Tensor t) {
    if (t.is_contiguous()) {
      broadcast(t, root);
    } else {
      Tensor c = t.contiguous();
      broadcast(c, root);
      t.copy_(c);
    }
  };
  for (const Tensor& p : module_->parameters()) bcast(p);
  for (const auto& kv : module_->named_buffers()) bcast(kv.second);
}

}  // namespace dist
}  // namespace remora
