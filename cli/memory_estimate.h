// SPDX-License-Identifier: BSD-3-Clause
// How much memory a config will need, computed from the config alone before
// anything is allocated, and the refusal of a config that cannot fit.
//
// Every command that builds an experiment (train, eval, generate, infer, info)
// checks it first (Experiment's constructor calls check_memory), so a config
// that would need a terabyte is an exit-2 config error naming its biggest term
// and the keys behind it, not a process the kernel's OOM killer ends later.
//
// The estimate is deliberately on the low side (the terms that scale with the
// config: parameters, gradients, optimizer state, the activations kept for
// backward, the data set): a refused config cannot fit; one that passes may
// still need somewhat more than the estimate.
#pragma once
#include <string>
#include <vector>

#include "config.h"

namespace remora {
namespace driver {

struct MemoryTerm {
  std::string name;  // "parameters", "activations kept for backward", "copy-task test sets", ...
  std::string keys;  // the config keys that set it ("model.n_layer, model.d_model, model.d_inner")
  double bytes = 0;
};

struct MemoryEstimate {
  std::vector<MemoryTerm> terms;
  void add(const std::string& name, const std::string& keys, double bytes) { terms.push_back({name, keys, bytes}); }
  double total() const;
  const MemoryTerm* biggest() const;  // nullptr when there is no term
  // "parameters 1.2 MiB, activations 3.4 MiB, ... (total 4.6 MiB)"
  std::string summary() const;
};

// What the memory is needed for: training (parameters, gradients, optimizer
// state, activations kept for backward) or inference (parameters and one
// layer's activations at a time).
enum class MemoryUse { train, inference };

// The bytes of one f32 parameter set of `n` parameters for `use`: weights,
// and for training gradients and the optimizer's state (adam, adamw, radam: two
// moments; sgd with momentum, rmsprop: one or two buffers).
void add_parameter_terms(MemoryEstimate& e, const Config& cfg, MemoryUse use, double n, const std::string& keys);
// The output layer's activations of a language model: its logits, or with the
// adaptive softmax the head's and tail clusters' logits (training) or every
// log-probability (inference).
void add_output_term(MemoryEstimate& e, MemoryUse use, bool adaptive, double bytes);

// Parameters, optimizer state, activations and data of cfg (its model type and
// task estimate their own terms: Model::estimate_memory, TaskEntry::estimate).
MemoryEstimate estimate_memory(const Config& cfg, MemoryUse use);

// The bytes this process may use: train.max_memory when the config sets it,
// else available_memory() (core/file_io.h: MemAvailable, cgroup, rlimits).
// `source` names which.
double memory_budget(const Config& cfg, std::string* source);

// A ConfigError (exit 2) when the estimate exceeds memory_budget: the message
// gives both sizes, the biggest term and the keys behind it, and how to
// override (train.max_memory). `what` names the command's purpose.
void check_memory(const Config& cfg, MemoryUse use);
// The same check for an estimate made elsewhere (a HuggingFace config).
void check_estimate(const MemoryEstimate& e, double budget, const std::string& source, const std::string& what);

}  // namespace driver
}  // namespace remora
