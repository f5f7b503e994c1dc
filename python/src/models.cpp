// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora._C.nn, continued: the reference models beside Transformer-XL (BERT
/// and its Hugging Face loader, SRU++, StarSaber, the recurrent language
/// models) and the RNN / LSTM layers with torch.nn's call conventions.
#include "common.h"

namespace remora {
namespace python {
namespace {

using nn::Module;

models::SequenceState state_or_empty(const py::object& state) {
  return state.is_none() ? models::SequenceState{} : state.cast<models::SequenceState>();
}

Generator* generator_or_null(const py::object& g) { return g.is_none() ? nullptr : g.cast<Generator*>(); }

// The keyword constructor and validate() every config class has.
template <typename C>
py::class_<C> config_class(py::module_& m, const char* name, const char* doc) {
  py::class_<C> c(m, name, doc);
  c.def(py::init([](const py::kwargs& kw) { return config_from_kwargs<C>(kw); }))
      .def("validate", &C::validate, "Raises remora.Error naming the first field outside its range.")
      .def("parameter_count", &C::parameter_count, "The number of parameters the config builds (from the sizes).");
  return c;
}

void bind_bert(py::module_& m) {
  using C = models::BertConfig;
  auto c = config_class<C>(
      m, "BertConfig",
      "BERT's configuration (models/bert.h): Hugging Face's BertConfig keys (defaults: bert-base) and Remora's "
      "extras (attention='rsa' with rem, gate, rem_init; num_classes > 0 adds a sequence classifier). Keyword "
      "arguments set fields: BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, ...).");
#define REMORA_FIELD(f) c.def_readwrite(#f, &C::f);
  REMORA_FIELD(vocab_size) REMORA_FIELD(hidden_size) REMORA_FIELD(num_hidden_layers)
  REMORA_FIELD(num_attention_heads) REMORA_FIELD(intermediate_size) REMORA_FIELD(hidden_act)
  REMORA_FIELD(hidden_dropout_prob) REMORA_FIELD(attention_probs_dropout_prob)
  REMORA_FIELD(max_position_embeddings) REMORA_FIELD(type_vocab_size) REMORA_FIELD(layer_norm_eps)
  REMORA_FIELD(pad_token_id) REMORA_FIELD(initializer_range) REMORA_FIELD(attention) REMORA_FIELD(rem)
  REMORA_FIELD(gate) REMORA_FIELD(rem_init) REMORA_FIELD(num_classes)
#undef REMORA_FIELD
  c.def_static("from_hf_config", &C::from_hf_config, py::arg("json_text"), py::arg("what") = "config.json",
               "A config from the text of a Hugging Face config.json (unknown keys are an error; `what` names "
               "the source in errors).")
      .def("to_hf_config", &C::to_hf_config, "The Hugging Face config.json text (RSA settings under \"remora\").");

  using M = models::BertForMaskedLM;
  py::class_<M::Output>(m, "BertOutput", "What BertForMaskedLM.forward returns.")
      .def_readonly("mlm_logits", &M::Output::mlm_logits, "[B, L, V], the decoder tied to the word embeddings.")
      .def_readonly("nsp_logits", &M::Output::nsp_logits, "[B, 2], next-sentence logits (0 = is next).")
      .def_readonly("pooled", &M::Output::pooled, "[B, d], tanh(W h[:, 0] + b).")
      .def_property_readonly("class_logits", [](const M::Output& o) { return tensor_or_none(o.class_logits); },
                             "[B, num_classes], or None when built without classes.")
      .def_readonly("hidden_states", &M::Output::hidden_states,
                    "num_hidden_layers + 1 tensors [B, L, d]: the embeddings, then each layer's output.");

  py::class_<models::EncoderModel, Module, std::shared_ptr<models::EncoderModel>>(
      m, "EncoderModel",
      "A bidirectional encoder with per-token logits and, when built with classes, per-sequence logits "
      "(models/sequence_model.h): BertForMaskedLM, StarSaber.")
      .def("token_logits", [](const models::EncoderModel& e, const Tensor& ids, const py::object& mask) {
             return e.token_logits(ids, optional_tensor(mask));
           }, py::arg("input_ids"), py::arg("attention_mask") = py::none(),
           "ids int64 [B, L], attention_mask [B, L] (1 = real token, 0 = padding; None = all real) -> [B, L, V].")
      .def("class_logits", [](const models::EncoderModel& e, const Tensor& ids, const py::object& mask) {
             return e.class_logits(ids, optional_tensor(mask));
           }, py::arg("input_ids"), py::arg("attention_mask") = py::none(),
           "[B, num_classes] logits of each sequence; remora.Error when built without classes.");

  auto forward = [](const M& model, const Tensor& ids, const py::object& mask, const py::object& types) {
    return model.forward(ids, optional_tensor(mask), optional_tensor(types));
  };
  const char* forward_doc =
      "input_ids int64 [B, L]; attention_mask [B, L] (1 = real token, 0 = padding; None = all real); "
      "token_type_ids int64 [B, L] (None = 0) -> BertOutput. Dropout in training mode only.";
  py::class_<M, models::EncoderModel, std::shared_ptr<M>>(
      m, "BertForMaskedLM",
      "BERT with Hugging Face's BertForPreTraining parameter names (masked-LM and next-sentence heads; with "
      "config.num_classes > 0 also BertForSequenceClassification's classifier), and RSA-BERT with "
      "config.attention='rsa' (models/bert.h). from_pretrained reads a Hugging Face directory.")
      .def(py::init<const C&, DType, Generator*>(), py::arg("config"), py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 4>())
      .def("forward", forward, py::arg("input_ids"), py::arg("attention_mask") = py::none(),
           py::arg("token_type_ids") = py::none(), forward_doc)
      .def("__call__", forward, py::arg("input_ids"), py::arg("attention_mask") = py::none(),
           py::arg("token_type_ids") = py::none())
      .def("class_logits", [](const M& model, const Tensor& ids, const py::object& mask, const py::object& types) {
             return model.class_logits(ids, optional_tensor(mask), optional_tensor(types));
           }, py::arg("input_ids"), py::arg("attention_mask") = py::none(), py::arg("token_type_ids") = py::none(),
           "[B, num_classes]: the sequence classifier on the pooled output, without the masked-LM and "
           "next-sentence heads; remora.Error when built without classes.")
      .def_static("mlm_loss", &M::mlm_loss, py::arg("logits"), py::arg("labels"),
                  "Mean cross-entropy of logits [B, L, V] against labels int64 [B, L], -100 ignored.")
      .def_static("nsp_loss", &M::nsp_loss, py::arg("nsp_logits"), py::arg("labels"),
                  "Mean cross-entropy of nsp_logits [B, 2] against labels int64 [B] (0 = is next).")
      .def("reset_parameters", [](M& model, const py::object& g) { model.reset_parameters(generator_or_null(g)); },
           py::arg("generator") = py::none(),
           "Hugging Face's initialisation: N(0, initializer_range) weights, zero biases, unit layer norms.")
      .def("load_hf_state", [](M& model, const py::object& state, const std::string& what) {
             models::load_hf_state(model, named_from_mapping(state), what);
           }, py::arg("state_dict"), py::arg("what") = "state",
           "Copies a Hugging Face state dict (BertForPreTraining, BertForMaskedLM or BertModel names; "
           "LayerNorm gamma/beta accepted) into the model; unknown keys and shape mismatches are errors.")
      .def_static("from_pretrained", &models::load_hf_directory, py::arg("directory"), py::arg("dtype") = DType::f32,
                  "The model of a Hugging Face directory: DIR/config.json and DIR/model.safetensors, as "
                  "save_pretrained writes them.")
      .def("save_pretrained", [](const M& model, const std::string& dir) { models::save_hf_directory(model, dir); },
           py::arg("directory"),
           "Writes DIR/config.json and DIR/model.safetensors (Hugging Face names, the model's dtype).")
      .def_readonly("config", &M::cfg, "The BertConfig, as built.");

  m.def("load_hf_bert", &models::load_hf_directory, py::arg("directory"), py::arg("dtype") = DType::f32,
        "BertForMaskedLM.from_pretrained: a Hugging Face BERT directory (config.json, model.safetensors).");
  m.def("canonical_hf_name", &models::canonical_hf_name, py::arg("name"),
        "A Hugging Face BERT checkpoint name mapped onto Remora's (\"\" for names that are ignored).");
  m.def("mlm_mask", [](const Tensor& ids, int64_t vocab_size, int64_t mask_id, const py::object& special,
                       Generator* gen) {
          return models::mlm_mask(ids, optional_tensor(special), vocab_size, mask_id, gen ? *gen : default_generator());
        }, py::arg("ids"), py::arg("vocab_size"), py::arg("mask_token_id"), py::arg("special_mask") = py::none(),
        py::arg("generator") = nullptr,
        "BERT's masking (Hugging Face's DataCollatorForLanguageModeling): each token with special_mask 0 is "
        "chosen with p 0.15 and becomes mask_token_id (p 0.8), a random id (p 0.1) or stays. Returns "
        "(masked_ids, labels), labels -100 where not chosen.");
}

void bind_srupp(py::module_& m) {
  using C = models::SRUppConfig;
  auto c = config_class<C>(
      m, "SRUppConfig",
      "SRU++'s configuration (models/srupp.h); keyword arguments set fields: SRUppConfig(n_token=256, "
      "d_model=128, d_attn=32, n_layer=2, ...). cutoffs or d_embed select the adaptive input and softmax.");
#define REMORA_FIELD(f) c.def_readwrite(#f, &C::f);
  REMORA_FIELD(n_token) REMORA_FIELD(d_model) REMORA_FIELD(d_attn) REMORA_FIELD(n_layer) REMORA_FIELD(attn_every)
  REMORA_FIELD(dropout) REMORA_FIELD(attn_dropout) REMORA_FIELD(mem_len) REMORA_FIELD(highway_bias)
  REMORA_FIELD(layer_norm) REMORA_FIELD(same_length) REMORA_FIELD(cutoffs) REMORA_FIELD(d_embed)
  REMORA_FIELD(div_val) REMORA_FIELD(emb_dropout) REMORA_FIELD(n_out) REMORA_FIELD(n_in)
#undef REMORA_FIELD
  c.def("adaptive", &C::adaptive, "Whether the input and output layers are the adaptive ones.");

  using M = models::SRUppLM;
  py::class_<M::Output>(m, "SRUppOutput", "What SRUppLM.forward returns.")
      .def_property_readonly("logits", [](const M::Output& o) { return tensor_or_none(o.logits); },
                             "[B, L, V] (or [B, L, n_out]); None with the adaptive softmax and targets.")
      .def_property_readonly("nll", [](const M::Output& o) { return tensor_or_none(o.nll); },
                             "[B, L] -log p(target) (adaptive softmax with targets), else None.")
      .def_readonly("hidden", &M::Output::hidden, "[B, L, d], the last layer's output.")
      .def_readonly("state", &M::Output::state, "Memories and cells for the next segment.");
  auto forward = [](const M& model, const Tensor& ids, const py::object& state, const py::object& targets) {
    return model.forward(ids, state_or_empty(state), optional_tensor(targets));
  };
  py::class_<M, models::SequenceModel, std::shared_ptr<M>>(
      m, "SRUppLM",
      "The SRU++ language model (or sequence labeller) with the official asappresearch/sru parameter names "
      "(models/srupp.h).")
      .def(py::init<const C&, DType, Generator*>(), py::arg("config"), py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 4>())
      .def("forward", forward, py::arg("ids"), py::arg("state") = py::none(), py::arg("targets") = py::none(),
           "ids int64 [B, L] (or features [B, L, n_in]) and the previous segment's state -> SRUppOutput; "
           "targets matter with the adaptive softmax only (nll in place of logits).")
      .def("__call__", forward, py::arg("ids"), py::arg("state") = py::none(), py::arg("targets") = py::none())
      .def_static("loss", &M::loss, py::arg("logits"), py::arg("targets"),
                  "Mean cross-entropy of [B, L, V] logits against int64 [B, L] targets (-100 ignored).")
      .def("reset_parameters", [](M& model, const py::object& g) { model.reset_parameters(generator_or_null(g)); },
           py::arg("generator") = py::none(), "The official initialisation, in place.")
      .def_readonly("config", &M::cfg, "The SRUppConfig, as built.");
}

void bind_starsaber(py::module_& m) {
  using C = models::StarSaberConfig;
  auto c = config_class<C>(
      m, "StarSaberConfig",
      "StarSaber's configuration (models/starsaber.h); keyword arguments set fields: "
      "StarSaberConfig(vocab_size=67, d_model=64, n_layer=3, gated=False, causal=False, ...).");
#define REMORA_FIELD(f) c.def_readwrite(#f, &C::f);
  REMORA_FIELD(vocab_size) REMORA_FIELD(d_model) REMORA_FIELD(n_layer) REMORA_FIELD(gated) REMORA_FIELD(causal)
  REMORA_FIELD(dropout) REMORA_FIELD(num_classes) REMORA_FIELD(pad_token_id) REMORA_FIELD(scale_scores)
  REMORA_FIELD(init) REMORA_FIELD(init_range)
#undef REMORA_FIELD

  using M = models::StarSaber;
  py::class_<M::Output>(m, "StarSaberOutput", "What StarSaber.forward returns.")
      .def_readonly("token_logits", &M::Output::token_logits, "[B, L, V], the masked-LM head.")
      .def_readonly("pooled", &M::Output::pooled, "[B, d], the mean of the last layer over real tokens.")
      .def_property_readonly("class_logits", [](const M::Output& o) { return tensor_or_none(o.class_logits); },
                             "[B, num_classes], or None when built without classes.")
      .def_readonly("hidden_states", &M::Output::hidden_states, "n_layer + 1 tensors [B, L, d]: x, h^1, ..., h^L.")
      .def_readonly("relations", &M::Output::relations, "n_layer relation graphs A^l [B, L, L].");
  auto forward = [](const M& model, const Tensor& ids, const py::object& mask) {
    return model.forward(ids, optional_tensor(mask));
  };
  py::class_<M, models::EncoderModel, std::shared_ptr<M>>(
      m, "StarSaber",
      "The StarSaber encoder (a bidirectional RNN's fixed-point equation, one set of weights per iteration) "
      "with a masked-LM head and, with num_classes > 0, a mean-pooled classifier (models/starsaber.h).")
      .def(py::init<const C&, DType, Generator*>(), py::arg("config"), py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 4>())
      .def("forward", forward, py::arg("input_ids"), py::arg("attention_mask") = py::none(),
           "ids int64 [B, L], attention_mask [B, L] (1 = real, 0 = padding; None = all real) -> StarSaberOutput.")
      .def("__call__", forward, py::arg("input_ids"), py::arg("attention_mask") = py::none())
      .def("encode", [](const M& model, const Tensor& ids, const py::object& mask) {
             return model.encode(ids, optional_tensor(mask));
           }, py::arg("input_ids"), py::arg("attention_mask") = py::none(), "The last layer h^L [B, L, d] (no heads).")
      .def_static("mlm_loss", &M::mlm_loss, py::arg("logits"), py::arg("labels"),
                  "Mean cross-entropy of logits [B, L, V] against labels int64 [B, L], -100 ignored.")
      .def_static("class_loss", &M::class_loss, py::arg("logits"), py::arg("labels"),
                  "Mean cross-entropy of logits [B, C] against labels int64 [B], -100 ignored.")
      .def("reset_parameters", [](M& model, const py::object& g) { model.reset_parameters(generator_or_null(g)); },
           py::arg("generator") = py::none(), "Re-draws the initialisation (config.init), in place.")
      .def_readonly("config", &M::cfg, "The StarSaberConfig, as built.");

  using LM = models::StarSaberLM;
  auto lm_forward = [](const LM& model, const Tensor& ids, const py::object& state) {
    return model.run(ids, state_or_empty(state));
  };
  py::class_<LM, models::SequenceModel, std::shared_ptr<LM>>(
      m, "StarSaberLM",
      "Causal StarSaber as a language model (config.causal must be True): position t relates to earlier "
      "positions only. No state crosses segments.")
      .def(py::init<const C&, DType, Generator*>(), py::arg("config"), py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 4>())
      .def("forward", lm_forward, py::arg("ids"), py::arg("state") = py::none(),
           "ids int64 [B, L] -> SequenceOutput (logits [B, L, V], an empty state); state is ignored.")
      .def("__call__", lm_forward, py::arg("ids"), py::arg("state") = py::none())
      .def_static("loss", &M::mlm_loss, py::arg("logits"), py::arg("targets"),
                  "Mean cross-entropy of [B, L, V] logits against int64 [B, L] targets (-100 ignored).")
      .def_readonly("model", &LM::model, "The wrapped StarSaber (its modules are this one's children).");
}

void bind_recurrent(py::module_& m) {
  using C = models::RecurrentConfig;
  auto c = config_class<C>(
      m, "RecurrentConfig",
      "The recurrent language models' configuration (models/relrnn.h): type 'rnn', 'lstm', 'relrnn' or "
      "'rellstm'; keyword arguments set fields: RecurrentConfig(type='lstm', n_token=256, d_model=128, ...).");
#define REMORA_FIELD(f) c.def_readwrite(#f, &C::f);
  REMORA_FIELD(type) REMORA_FIELD(n_token) REMORA_FIELD(d_model) REMORA_FIELD(n_layer) REMORA_FIELD(short_term)
  REMORA_FIELD(relevant) REMORA_FIELD(dropout) REMORA_FIELD(n_out) REMORA_FIELD(input) REMORA_FIELD(init)
  REMORA_FIELD(recurrent_init) REMORA_FIELD(input_init)
#undef REMORA_FIELD
  c.def("resolved_init", &C::resolved_init, "init, or the type's default when init is empty.")
      .def("out_width", &C::out_width, "The head's width: n_out, or n_token when n_out is 0.");

  using M = models::RecurrentLM;
  py::class_<M::Output>(m, "RecurrentOutput", "What RecurrentLM.forward returns.")
      .def_readonly("logits", &M::Output::logits, "[B, L, n_out].")
      .def_readonly("hidden", &M::Output::hidden, "[B, L, H], the top layer's h_t.")
      .def_readonly("state", &M::Output::state, "The detached cells for the next segment.");
  auto forward = [](const M& model, const Tensor& ids, const py::object& state) {
    return model.forward(ids, state_or_empty(state));
  };
  py::class_<M, models::SequenceModel, std::shared_ptr<M>>(
      m, "RecurrentLM",
      "Embedding -> recurrent core (RNN, LSTM, RelRNN or RelLSTM) -> linear head, with torch's "
      "word_language_model names (encoder, rnn, decoder; models/relrnn.h).")
      .def(py::init<const C&, DType, Generator*>(), py::arg("config"), py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 4>())
      .def("forward", forward, py::arg("ids"), py::arg("state") = py::none(),
           "ids int64 [B, L] and the previous segment's state (None: zeros) -> RecurrentOutput.")
      .def("__call__", forward, py::arg("ids"), py::arg("state") = py::none())
      .def_static("loss", &M::loss, py::arg("logits"), py::arg("targets"),
                  "Mean cross-entropy of [B, L, C] logits against int64 [B, L] targets (-100 ignored).")
      .def_readonly("config", &M::cfg, "The RecurrentConfig, as built.");
}

void bind_rnn_layers(py::module_& m) {
  auto rnn_forward = [](const nn::RNN& l, const Tensor& x, const py::object& h0) {
    nn::RNN::Output o = l.forward(x, optional_tensor(h0));
    return py::make_tuple(o.output, o.h_n);
  };
  py::class_<nn::RNN, Module, std::shared_ptr<nn::RNN>>(
      m, "RNN",
      "torch.nn.RNN (Elman, batch_first=True, one direction): the same parameter names "
      "(weight_ih_l0, ...), initialisation and numbers.")
      .def(py::init<int64_t, int64_t, int64_t, const std::string&, bool, double, DType, Generator*>(),
           py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1,
           py::arg("nonlinearity") = "tanh", py::arg("bias") = true, py::arg("dropout") = 0.0,
           py::arg("dtype") = DType::f32, py::arg("generator") = nullptr, py::keep_alive<1, 9>())
      .def("forward", rnn_forward, py::arg("input"), py::arg("hx") = py::none(),
           "input [B, L, I], hx [num_layers, B, H] (None: zeros) -> (output [B, L, H], h_n [num_layers, B, H]).")
      .def("__call__", rnn_forward, py::arg("input"), py::arg("hx") = py::none())
      .def("reset_parameters", [](nn::RNN& l, const py::object& g) { l.reset_parameters(generator_or_null(g)); },
           py::arg("generator") = py::none(), "Re-draws every parameter from U(-1/sqrt(H), 1/sqrt(H)).")
      .def_readonly("input_size", &nn::RNN::input_size)
      .def_readonly("hidden_size", &nn::RNN::hidden_size)
      .def_readonly("num_layers", &nn::RNN::num_layers)
      .def_readonly("nonlinearity", &nn::RNN::nonlinearity)
      .def_readonly("dropout", &nn::RNN::dropout);

  auto lstm_forward = [](const nn::LSTM& l, const Tensor& x, const py::object& hx) {
    Tensor h0, c0;
    if (!hx.is_none()) {
      py::tuple t = hx.cast<py::tuple>();
      if (t.size() != 2) throw py::value_error("LSTM: hx must be a pair (h_0, c_0)");
      h0 = t[0].cast<Tensor>();
      c0 = t[1].cast<Tensor>();
    }
    nn::LSTM::Output o = l.forward(x, h0, c0);
    return py::make_tuple(o.output, py::make_tuple(o.h_n, o.c_n));
  };
  py::class_<nn::LSTM, Module, std::shared_ptr<nn::LSTM>>(
      m, "LSTM",
      "torch.nn.LSTM (batch_first=True, one direction, no proj_size): the same parameter names, gate order "
      "(i, f, g, o), initialisation and numbers.")
      .def(py::init<int64_t, int64_t, int64_t, bool, double, DType, Generator*>(), py::arg("input_size"),
           py::arg("hidden_size"), py::arg("num_layers") = 1, py::arg("bias") = true, py::arg("dropout") = 0.0,
           py::arg("dtype") = DType::f32, py::arg("generator") = nullptr, py::keep_alive<1, 8>())
      .def("forward", lstm_forward, py::arg("input"), py::arg("hx") = py::none(),
           "input [B, L, I], hx (h_0, c_0) each [num_layers, B, H] (None: zeros) -> "
           "(output [B, L, H], (h_n, c_n)).")
      .def("__call__", lstm_forward, py::arg("input"), py::arg("hx") = py::none())
      .def("reset_parameters", [](nn::LSTM& l, const py::object& g) { l.reset_parameters(generator_or_null(g)); },
           py::arg("generator") = py::none(), "Re-draws every parameter from U(-1/sqrt(H), 1/sqrt(H)).")
      .def_readonly("input_size", &nn::LSTM::input_size)
      .def_readonly("hidden_size", &nn::LSTM::hidden_size)
      .def_readonly("num_layers", &nn::LSTM::num_layers)
      .def_readonly("dropout", &nn::LSTM::dropout);

  auto relrnn_forward = [](const models::RelRNNCell& l, const Tensor& x, const py::object& h0) {
    models::RelRNNCell::Output o = l.forward(x, optional_tensor(h0));
    return py::make_tuple(o.output, o.h_n);
  };
  py::class_<models::RelRNNCell, Module, std::shared_ptr<models::RelRNNCell>>(
      m, "RelRNNCell",
      "The relevancy-screening RNN (Kerg et al. 2020; the official RelMemRNN) run over a sequence "
      "(models/relrnn.h).")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, DType, Generator*>(), py::arg("input_size"),
           py::arg("hidden_size"), py::arg("short_term"), py::arg("relevant"), py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 7>())
      .def("forward", relrnn_forward, py::arg("input"), py::arg("h0") = py::none(),
           "input [B, L, I], h0 [B, H] (None: zeros) -> (output [B, L, H], h_n [B, H]).")
      .def("__call__", relrnn_forward, py::arg("input"), py::arg("h0") = py::none());

  auto rellstm_forward = [](const models::RelLSTMCell& l, const Tensor& x, const py::object& hx) {
    Tensor h0, c0;
    if (!hx.is_none()) {
      py::tuple t = hx.cast<py::tuple>();
      if (t.size() != 2) throw py::value_error("RelLSTMCell: hx must be a pair (h_0, c_0)");
      h0 = t[0].cast<Tensor>();
      c0 = t[1].cast<Tensor>();
    }
    models::RelLSTMCell::Output o = l.forward(x, h0, c0);
    return py::make_tuple(o.output, py::make_tuple(o.h_n, o.c_n));
  };
  py::class_<models::RelLSTMCell, Module, std::shared_ptr<models::RelLSTMCell>>(
      m, "RelLSTMCell", "The relevancy-screening LSTM (the official RelLSTM) run over a sequence (models/relrnn.h).")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, DType, Generator*>(), py::arg("input_size"),
           py::arg("hidden_size"), py::arg("short_term"), py::arg("relevant"), py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 7>())
      .def("forward", rellstm_forward, py::arg("input"), py::arg("hx") = py::none(),
           "input [B, L, I], hx (h_0, c_0) each [B, H] (None: zeros) -> (output [B, L, H], (h_n, c_n)).")
      .def("__call__", rellstm_forward, py::arg("input"), py::arg("hx") = py::none());
}

}  // namespace

void bind_models(py::module_& top) {
  py::module_ m = top.attr("nn").cast<py::module_>();
  bind_bert(m);
  bind_srupp(m);
  bind_starsaber(m);
  bind_recurrent(m);
  bind_rnn_layers(m);
}

}  // namespace python
}  // namespace remora
