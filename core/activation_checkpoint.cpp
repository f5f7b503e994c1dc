// SPDX-License-Identifier: BSD-3-Clause
// Activation checkpointing (core/activation_checkpoint.h).
#include "activation_checkpoint.h"

#include "autocast.h"
#include "autograd.h"
#include "error.h"

namespace remora {

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               Generator* gen) {
  REMORA_CHECK(fn, "checkpoint: no function given");
  if (!any_requires_grad(inputs)) return fn(inputs);
  Generator& g = gen ? *gen : default_generator();
  const uint64_t seed = g.seed(), offset = g.offset();
  const Precision prec = autocast_precision();
  std::vector<Tensor> outs;
  {
    NoGradGuard ng;
    outs = fn(inputs);
  }
  // Fresh handles: an output may be an input itself (the node must not mark the input).
  for (size_t k = 0; k < outs.size(); ++k) {
    REMORA_CHECK(outs[k].defined(), "checkpoint: output " << k << " of the block is undefined");
    outs[k] = outs[k].detach();
  }
  std::vector<Tensor> saved;
  for (const Tensor& t : inputs) saved.push_back(t.defined() ? t.detach() : Tensor());
  std::vector<bool> wants;
  for (const Tensor& t : inputs) wants.push_back(t.defined() && t.requires_grad());
  return record_optional_grads(
      "checkpoint", inputs, outs, [fn, gen, seed, offset, prec, saved, wants](std::vector<Tensor>& gr) {
        Generator& gg = gen ? *gen : default_generator();
        // The generator as it was before the recomputation, also when the block throws.
        struct Restore {
          Generator& g;
          uint64_t seed, offset;
          ~Restore() { g.set_state(seed, offset); }
        } restore{gg, gg.seed(), gg.offset()};
        std::vector<Tensor> xs;
        for (size_t i = 0; i < saved.size(); ++i) {
          Tensor x = saved[i].defined() ? saved[i].detach() : Tensor();
          if (wants[i]) x.requires_grad_();
          xs.push_back(x);
        }
        std::vector<Tensor> again;
        {
          AutoGradMode on(true);
          AutocastGuard ac(prec);
          gg.set_state(seed, offset);
          again = fn(xs);
        }
        REMORA_CHECK(again.size() == gr.size(),
                     "checkpoint: the block returned " << again.size() << " outputs when run again, "
                                                       << gr.size() << " the first time");
        std::vector<Tensor> roots, grads;
        for (size_t k = 0; k < again.size(); ++k)
          if (gr[k].defined() && again[k].defined() && again[k].requires_grad()) {
            REMORA_CHECK(again[k].shape() == gr[k].shape(),
                         "checkpoint: output " << k << " has another shape when run again");
            roots.push_back(again[k]);
            grads.push_back(gr[k]);
          }
        if (!roots.empty()) backward(roots, grads);
        std::vector<Tensor> dx;
        for (size_t i = 0; i < xs.size(); ++i) dx.push_back(wants[i] ? xs[i].grad() : Tensor());
        return dx;
      });
}

}  // namespace remora
