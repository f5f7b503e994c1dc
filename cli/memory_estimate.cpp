// SPDX-License-Identifier: BSD-3-Clause
// See memory_estimate.h.
#include "memory_estimate.h"

#include <algorithm>
#include <cmath>

#include "../core/file_io.h"
#include "model.h"
#include "task.h"

namespace remora {
namespace driver {

double MemoryEstimate::total() const {
  double t = 0;
  for (const MemoryTerm& m : terms) t += m.bytes;
  return t;
}

const MemoryTerm* MemoryEstimate::biggest() const {
  const MemoryTerm* b = nullptr;
  for (const MemoryTerm& m : terms)
    if (!b || m.bytes > b->bytes) b = &m;
  return b;
}

std::string MemoryEstimate::summary() const {
  std::string s;
  for (const MemoryTerm& m : terms) s += (s.empty() ? "" : ", ") + m.name + " " + human_bytes(m.bytes);
  return s + (s.empty() ? "" : ", ") + "total " + human_bytes(total());
}

void add_output_term(MemoryEstimate& e, MemoryUse use, bool adaptive, double bytes) {
  if (adaptive)
    e.add(use == MemoryUse::train ? "adaptive softmax: head logits and the tail clusters' (Zipf's law)"
                                  : "adaptive softmax: log-probabilities over the vocabulary",
          "data.batch_size, data.seq_len, model.cutoffs and the vocabulary", bytes);
  else
    e.add("output logits", "data.batch_size, data.seq_len and the vocabulary", bytes);
}

void add_parameter_terms(MemoryEstimate& e, const Config& cfg, MemoryUse use, double n, const std::string& keys) {
  const double w = 4.0 * n;  // f32
  e.add("parameters", keys, w);
  if (use != MemoryUse::train) return;
  e.add("gradients", keys, w);
  const OptimizerConfig& o = cfg.train.optimizer;
  double buffers = 0;
  if (o.type == "adam" || o.type == "adamw" || o.type == "radam") buffers = 2;
  else if (o.type == "rmsprop") buffers = o.momentum > 0 ? 2 : 1;
  else if (o.momentum > 0) buffers = 1;
  if (buffers > 0) e.add("optimizer state (" + o.type + ")", keys, buffers * w);
}

namespace {
MemoryEstimate estimate_for(const Config& cfg, MemoryUse use) {
  MemoryEstimate e;
  ModelContext ctx;  // what the task will ask of the model, from the config alone
  ctx.n_token = 256;
  ctx.seq_len = cfg.data.seq_len;
  const TaskEntry& task = task_named(cfg.task);
  if (task.estimate) task.estimate(cfg, ctx, e);
  if (cfg.model.def) cfg.model.def->estimate_memory(cfg, ctx, use, e);
  return e;
}
}  // namespace

MemoryEstimate estimate_memory(const Config& cfg, MemoryUse use) {
  MemoryEstimate e = estimate_for(cfg, use);
  if (use != MemoryUse::train) return e;
  // A training also evaluates, on batches of data.eval_batch_size, while its
  // gradients and optimizer state stay allocated (the Trainer releases the
  // training steps' cached blocks first): its peak is the larger of the two.
  MemoryEstimate ev = estimate_for(cfg, MemoryUse::inference);
  for (const MemoryTerm& m : e.terms)
    if (m.name == "gradients" || m.name.rfind("optimizer state", 0) == 0) ev.terms.push_back(m);
  if (!(ev.total() > e.total())) return e;
  for (MemoryTerm& m : ev.terms)
    if (m.name != "parameters" && m.name != "gradients" && m.name.rfind("optimizer state", 0) != 0 &&
        m.keys.find("data.batch_size") != std::string::npos)
      m.name += " (evaluation, data.eval_batch_size)";
  return ev;
}

double memory_budget(const Config& cfg, std::string* source) {
  if (cfg.train.max_memory > 0) {
    if (source) *source = "train.max_memory";
    return cfg.train.max_memory;
  }
  std::string s;
  const uint64_t room = available_memory(&s);
  if (source) *source = s;
  return room == UINT64_MAX ? INFINITY : double(room);
}

void check_estimate(const MemoryEstimate& e, double budget, const std::string& source, const std::string& what) {
  const double need = e.total();
  if (!(need > budget)) return;
  const MemoryTerm* big = e.biggest();
  std::string msg = what + " needs about " + human_bytes(need) + " of memory but this process may use " +
                    human_bytes(budget) + " (" + source + ")";
  if (big)
    msg += "; the biggest term is " + big->name + ", " + human_bytes(big->bytes) +
           (big->keys.empty() ? "" : " (set by " + big->keys + ")");
  msg += "; estimate: " + e.summary() +
         ". Use smaller values, or set train.max_memory (bytes, or e.g. \"64GiB\") if the estimate is wrong";
  throw ConfigError(msg);
}

void check_memory(const Config& cfg, MemoryUse use) {
  std::string source;
  const double budget = memory_budget(cfg, &source);
  if (std::isinf(budget)) return;
  check_estimate(estimate_memory(cfg, use), budget, source,
                 use == MemoryUse::train ? "training this config" : "running this config");
}

}  // namespace driver
}  // namespace remora
