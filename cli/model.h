// SPDX-License-Identifier: BSD-3-Clause
// The driver's model types behind one registry.
//
// A model type is a class derived from driver::Model in its own file under
// cli/models/. It reads and validates its own keys of the config's
// "model" object (a key it does not read is an unknown key, so the keys of
// another type stay errors), writes them back for the resolved config, and
// builds the network for the task at hand (ModelContext). Registering it is
// one line in cli/models/models.def:
//
//   REMORA_MODEL(make_my_model, "my_model")
//
// where `std::unique_ptr<Model> make_my_model(const std::string& type)` is
// defined in the new file. The driver's commands (train, eval, generate,
// infer, info) then reach it with no other edit, and its tiny_configs() put
// it under every check that walks the registry (tests/registry_variants.h:
// f32 / f64 and device parity, train / resume / eval / generate or infer,
// memory estimate against the measured peak, a float64 gradient check).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../models/sequence_model.h"
#include "../nn/module.h"
#include "config.h"
#include "memory_estimate.h"

namespace remora {
namespace driver {

// What the task tells the model it must fit (filled by Task::model_context).
struct ModelContext {
  int64_t n_token = 0;      // input vocabulary (a text encoder's includes [MASK])
  int64_t n_out = 0;        // causal models: outputs per position; 0 = a language model over n_token
  int64_t n_in = 0;         // real-valued inputs per position (timeseries: 1); 0 = token ids
  bool stream = false;      // an LM stream: memory may carry across segments
  int64_t num_classes = 0;  // encoders: sequence classes (0 = token logits only)
  int64_t pad_id = -1;      // the padding id (-1: fixed-length inputs, no padding)
  int64_t max_len = 0;      // encoders: the longest input to position-embed
  int64_t seq_len = 0;      // a typical training length (memory estimates, generation)
  bool generation = false;  // built for `remora generate` (keep a segment of memory)
};

// A built network, seen through the interfaces that tasks and commands use.
struct BuiltModel {
  std::shared_ptr<nn::Module> module;
  std::shared_ptr<models::SequenceModel> seq;  // causal types
  std::shared_ptr<models::EncoderModel> enc;   // encoders
};

// A small but complete config (model, data and train sections: a few steps,
// tiny sizes, data bundled with the sources; a relative data.path is relative
// to the source tree's root), named within its type ("" for a type's only one).
struct TinyConfig {
  std::string name;
  json config;
};

// A tiny config of the model section `model` and the data section `data`
// (batch_size 2 unless `data` sets it): seed, CPU, one thread and a train
// section of 4 steps that evaluates twice on 2 batches.
json tiny_config_with(const json& model, const json& data);
// The tiny config of the text tasks (char LM for a causal model, masked LM for
// an encoder) on tests/data/tiny_corpus.txt (the first 8 KB of
// data/tinyshakespeare.txt), seq_len 8, around `model`.
json tiny_text_config(const json& model);

// What the task needs to know about the model before it is built (config
// validation): set from the parsed keys.
class Model {
 public:
  explicit Model(std::string type) : type_(std::move(type)) {}
  virtual ~Model() = default;
  const std::string& type() const { return type_; }

  // Reads and validates this type's keys of `model` (everything but "type").
  // Errors name the JSON path (Node::fail).
  virtual void read(Node& m) = 0;
  // The keys after defaults, for the resolved config (with "type").
  virtual json resolved() const = 0;
  // This type's keys (all but "type") for `remora config --keys`: the rows of
  // the table that read() and resolved() use.
  virtual std::vector<KeyDoc> keys() const = 0;
  // Masked LM / sequence classification (true) or a causal sequence model.
  virtual bool is_encoder() const = 0;
  // Accepts real-valued inputs (data.type timeseries).
  virtual bool real_valued_inputs() const { return false; }
  // Extra checks against the task (the model node names the key), e.g. a
  // causal StarSaber only as a character LM. `text` = a text corpus task.
  virtual void check_task(Node& m, bool text) const {}
  // "softmax" / "rsa" for the types with an attention choice, else "".
  virtual std::string attention() const { return ""; }

  // Builds the network (errors: remora::Error, reported by the caller).
  virtual BuiltModel build(const ModelContext& ctx) const = 0;

  // `remora generate`: whether each new token re-reads the last seq_len tokens
  // (no state carried across calls) instead of one step on the carried state.
  virtual bool generation_rereads_window() const { return false; }
  // `remora infer --hidden`: whether the type has hidden states per layer,
  // and the logits with them (false when the type has no such output).
  virtual bool has_hidden_states() const { return false; }
  virtual bool forward_hidden(const BuiltModel& m, const Tensor& ids, Tensor* logits,
                              std::vector<Tensor>* hidden) const {
    return false;
  }
  // The memory this type needs for `ctx` (the task's estimate of it, from the
  // config alone: vocabulary at most, sequence length, batch in cfg.data),
  // added to `e` before anything is built (memory_estimate.h): parameters
  // (add_parameter_terms) and activations, each naming the keys behind it.
  virtual void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const {}
  // The tiny configs of this type, one per variant worth checking on its own
  // (an attention choice, causal or encoder): every registered type has at
  // least one (the registry tests fail naming a type without).
  virtual std::vector<TinyConfig> tiny_configs() const { return {}; }
  // model.init_from (cli/init_from.h): a pretrained checkpoint's tensor name as
  // this type names it ("" = not a weight: ignored); default the name itself.
  virtual std::string pretrained_name(const std::string& name) const { return name; }
  // Globs of the parameters a pretrained checkpoint may lack (they keep their
  // initialisation; default the REM parameters, which a softmax model has not)
  // and of the task head, always initialised fresh.
  virtual std::vector<std::string> optional_pretrained() const { return {"*.rem.*"}; }
  virtual std::vector<std::string> task_head() const { return {}; }
  // `remora info`: the summary (default: the resolved keys and every parameter).
  virtual void print_info(const Config& cfg, const ModelContext& ctx, const BuiltModel& m) const;

 private:
  std::string type_;
};

// The batch of a memory estimate for `use`: data.batch_size (training) or
// data.eval_batch_size, the task's sequence length (the models' activation_bytes).
models::ActivationShape activation_shape(const Config& cfg, const ModelContext& ctx, MemoryUse use);

// The keys every type has (n_layer, d_model, dropout) as rows bound to the
// members of its library config S, with S's defaults.
template <class S>
FieldTable<S>& add_common_keys(FieldTable<S>& f, int64_t S::*n_layer, int64_t S::*d_model, double S::*dropout) {
  return f.integer("n_layer", n_layer, 1, 1024, "layers")
      .integer("d_model", d_model, 1, 1 << 16, "model width")
      .number("dropout", dropout, 0, 0.99, "dropout probability");
}

// The attention and feed-forward keys of the transformer types (transformer_xl,
// bert), bound to the library config S (defaults: S's own).
template <class S>
FieldTable<S>& add_transformer_keys(FieldTable<S>& f, int64_t S::*n_head, int64_t S::*d_inner, double S::*dropatt) {
  return f.integer("n_head", n_head, 1, 1024, "attention heads")
      .integer("d_inner", d_inner, 1, 1 << 20, "feed-forward width")
      .number("dropatt", dropatt, 0, 0.99, "dropout on the attention weights");
}

// ---- the registry ----

using ModelFactory = std::function<std::unique_ptr<Model>(const std::string& type)>;
struct ModelEntry {
  std::string type;
  ModelFactory make;
};
// Every registered type, in registration order (models/models.def).
const std::vector<ModelEntry>& model_registry();
std::vector<std::string> model_type_names();
// A fresh, unread model of a registered type (nullptr when unknown).
std::unique_ptr<Model> make_model(const std::string& type);
// The registered type names whose default-read instance satisfies `pred`
// (for error messages: "use transformer_xl or srupp").
std::vector<std::string> model_types_where(const std::function<bool(const Model&)>& pred);

// "a", "a or b", "a, b or c".
std::string join_or(const std::vector<std::string>& v);

}  // namespace driver
}  // namespace remora
