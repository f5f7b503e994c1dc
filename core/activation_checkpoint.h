// SPDX-License-Identifier: BSD-3-Clause
// Activation checkpointing (torch.utils.checkpoint): trade one more forward pass
// of a block for not keeping its intermediate tensors until backward.
//
//   Tensor y = checkpoint([&](const std::vector<Tensor>& in) {
//     return std::vector<Tensor>{ff->forward(in[0])};
//   }, {x}, gen)[0];
#pragma once

#include <functional>
#include <vector>

#include "generator.h"
#include "tensor.h"

namespace remora {

/// The block a checkpoint runs: outputs from inputs (and from whatever else it
/// reads, such as a module's parameters).
using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Runs fn(inputs) without recording history, so that backward keeps only the
/// inputs of the block, none of its intermediate tensors; backward runs fn again
/// on detached copies of the inputs with recording on and back-propagates the
/// outputs' gradients through that graph. Gradients reach the inputs and every
/// tensor fn reads that requires grad (a module's parameters, accumulated into
/// their .grad as for any leaf).
///
/// fn must compute the same values when it runs again: its random draws must come
/// from `gen` (the default generator when null), which the recomputation rewinds
/// to its state at this call and restores afterwards, and the recomputation runs
/// under this call's autocast precision. fn and everything it reads must outlive
/// the backward pass. Without grad mode, or when no input requires grad (then
/// nothing would carry the parameters' gradients), this is fn(inputs) recorded as
/// usual. The outputs' second-order gradients are not supported.
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               Generator* gen = nullptr);

}  // namespace remora
