// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora._C.nn (modules: the base, layers, RSA attention, Transformer-XL;
/// the other models are in models.cpp), remora._C.optim (SGD, Adam, AdamW) and safetensors files.
#include <sstream>

#include "common.h"

namespace remora {
namespace python {
namespace {

using nn::Module;
using nn::NamedTensors;

// Lets Python subclasses of remora.nn.Module name themselves.
class PyModule : public Module {
 public:
  using Module::Module;
  std::string type_name() const override { PYBIND11_OVERRIDE(std::string, Module, type_name, ); }
  std::string extra_repr() const override { PYBIND11_OVERRIDE(std::string, Module, extra_repr, ); }
};

py::list pairs(const NamedTensors& nt) {
  py::list l;
  for (const auto& [k, v] : nt) l.append(py::make_tuple(k, v));
  return l;
}

std::string module_repr(const Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

// What every module class has from Python (the C++ methods of Module).
template <typename C>
void module_common(C& c) {
  c.def("__repr__", [](const Module& m) { return module_repr(m); });
}

}  // namespace

NamedTensors named_from_mapping(const py::handle& h) {
  NamedTensors out;
  py::object items = py::hasattr(h, "items") ? h.attr("items")() : py::reinterpret_borrow<py::object>(h);
  for (auto kv : items) {
    py::tuple p = kv.cast<py::tuple>();
    out.emplace_back(p[0].cast<std::string>(), p[1].cast<Tensor>());
  }
  return out;
}

py::object ordered_dict(const NamedTensors& nt) {
  py::object od = py::module_::import("collections").attr("OrderedDict")();
  for (const auto& [k, v] : nt) od[py::str(k)] = v;
  return od;
}

void bind_nn(py::module_& top) {
  py::module_ m = top.def_submodule("nn", "Modules: layers, RSA attention, RNN / LSTM, and the reference models "
                                          "(Transformer-XL, BERT, SRU++, StarSaber, recurrent LMs).");

  py::class_<Module, PyModule, std::shared_ptr<Module>> mod(
      m, "Module",
      "The base of every module: named parameters, buffers and children, state dicts, train/eval. "
      "remora.nn.Module (Python) derives from it for models written in Python.");
  mod.def(py::init<>())
      .def("type_name", &Module::type_name, "The class name used in printing.")
      .def("extra_repr", &Module::extra_repr, "The text in the printed parentheses.")
      .def("register_parameter", &Module::register_parameter, py::arg("name"), py::arg("tensor"),
           py::arg("requires_grad") = true, "Registers a parameter (a leaf, made to require grad) and returns it.")
      .def("register_buffer", &Module::register_buffer, py::arg("name"), py::arg("tensor"),
           "Registers a buffer (saved in state dicts, no gradient) and returns it.")
      .def("register_module",
           [](Module& self, const std::string& name, std::shared_ptr<Module> child) {
             return self.register_module(name, std::move(child));
           }, py::arg("name"), py::arg("module"), "Registers a child module and returns it.")
      .def("parameters", [](const Module& m, bool recurse) { return m.parameters(recurse); },
           py::arg("recurse") = true, "Every parameter, the module's own first, then each child's (torch's order).")
      .def("named_parameters", [](const Module& m, bool recurse) { return pairs(m.named_parameters(recurse)); },
           py::arg("recurse") = true, "(dotted name, parameter) pairs.")
      .def("buffers", [](const Module& m, bool recurse) { return m.buffers(recurse); }, py::arg("recurse") = true,
           "Every buffer.")
      .def("named_buffers", [](const Module& m, bool recurse) { return pairs(m.named_buffers(recurse)); },
           py::arg("recurse") = true, "(dotted name, buffer) pairs.")
      .def("children", &Module::children, "The direct children.")
      .def("named_children", [](const Module& m) {
             py::list l;
             for (const auto& kv : m.named_children()) l.append(py::make_tuple(kv.key(), kv.value()));
             return l;
           }, "(name, child) pairs.")
      .def("num_parameters", &Module::num_parameters, "The number of parameter elements.")
      .def("state_dict", [](const Module& m) { return ordered_dict(m.state_dict()); },
           "An OrderedDict of dotted names (PyTorch's) to parameters and buffers (sharing their memory).")
      .def("load_state_dict", [](Module& m, const py::object& state, bool strict) {
             m.load_state_dict(named_from_mapping(state), strict);
           }, py::arg("state_dict"), py::arg("strict") = true,
           "Copies values into the parameters and buffers by name (strict: the names must match exactly).")
      .def("train", [](Module& m, bool on) { m.train(on); }, py::arg("mode") = true,
           "Training mode (dropout on) for this module and its children.")
      .def("eval", [](Module& m) { m.eval(); }, "Evaluation mode: train(False).")
      .def_property_readonly("training", &Module::is_training, "Whether the module is in training mode.")
      .def("zero_grad", &Module::zero_grad, "Drops every parameter's gradient.")
      .def("to", [](Module& m, DType dt) { m.to_(dt); }, py::arg("dtype"), "Converts parameters and buffers in place.")
      .def("to", [](Module& m, const Device& d) { m.to_(d); }, py::arg("device"),
           "Moves parameters and buffers in place.");
  module_common(mod);

  // Layers.
  py::class_<nn::Linear, Module, std::shared_ptr<nn::Linear>> lin(m, "Linear",
                                                                   "y = x W^T + b (torch.nn.Linear's convention).");
  lin.def(py::init<int64_t, int64_t, bool, DType, Generator*>(), py::arg("in_features"), py::arg("out_features"),
          py::arg("bias") = true, py::arg("dtype") = DType::f32, py::arg("generator") = nullptr,
          py::keep_alive<1, 6>())
      .def("forward", &nn::Linear::forward, py::arg("x"), "x [..., in] -> [..., out].")
      .def("__call__", &nn::Linear::forward, py::arg("x"))
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features)
      .def_property_readonly("weight", [](const nn::Linear& l) { return l.weight; }, "[out, in].")
      .def_property_readonly("bias", [](const nn::Linear& l) { return tensor_or_none(l.bias); },
                             "[out], or None.");

  py::class_<nn::LayerNorm, Module, std::shared_ptr<nn::LayerNorm>>(m, "LayerNorm",
                                                                    "Normalises the last dim, then weight and bias.")
      .def(py::init<int64_t, double, DType>(), py::arg("d"), py::arg("eps") = 1e-5, py::arg("dtype") = DType::f32)
      .def("forward", &nn::LayerNorm::forward, py::arg("x"), "x [..., d] -> [..., d].")
      .def("__call__", &nn::LayerNorm::forward, py::arg("x"))
      .def_readonly("d", &nn::LayerNorm::d)
      .def_readonly("eps", &nn::LayerNorm::eps)
      .def_property_readonly("weight", [](const nn::LayerNorm& l) { return l.weight; }, "[d].")
      .def_property_readonly("bias", [](const nn::LayerNorm& l) { return l.bias; }, "[d].");

  py::class_<nn::Embedding, Module, std::shared_ptr<nn::Embedding>>(m, "Embedding",
                                                                    "A table [V, D] looked up by i64 ids.")
      .def(py::init<int64_t, int64_t, int64_t, DType, Generator*>(), py::arg("num_embeddings"),
           py::arg("embedding_dim"), py::arg("padding_idx") = -1, py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 6>())
      .def("forward", &nn::Embedding::forward, py::arg("ids"), "ids int64 [...] -> [..., D].")
      .def("__call__", &nn::Embedding::forward, py::arg("ids"))
      .def_readonly("num_embeddings", &nn::Embedding::num_embeddings)
      .def_readonly("embedding_dim", &nn::Embedding::embedding_dim)
      .def_property_readonly("weight", [](const nn::Embedding& e) { return e.weight; }, "[V, D].");

  py::class_<nn::Dropout, Module, std::shared_ptr<nn::Dropout>>(m, "Dropout",
                                                                "Inverted dropout in training mode.")
      .def(py::init<double, Generator*>(), py::arg("p") = 0.5, py::arg("generator") = nullptr, py::keep_alive<1, 3>())
      .def("forward", &nn::Dropout::forward, py::arg("x"))
      .def("__call__", &nn::Dropout::forward, py::arg("x"))
      .def_readonly("p", &nn::Dropout::p);

  py::class_<nn::FeedForward, Module, std::shared_ptr<nn::FeedForward>>(
      m, "FeedForward", "fc2(dropout(activation(fc1(x)))): d -> d_inner -> d.")
      .def(py::init<int64_t, int64_t, double, const std::string&, DType, Generator*>(), py::arg("d"),
           py::arg("d_inner"), py::arg("dropout") = 0.0, py::arg("activation") = "relu", py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 7>())
      .def("forward", &nn::FeedForward::forward, py::arg("x"))
      .def("__call__", &nn::FeedForward::forward, py::arg("x"));

  py::class_<nn::RemInit>(m, "RemInit", "How RSA attention's REM parameters are initialised (nn/rsa.h).")
      .def(py::init<>())
      .def_readwrite("eta_range", &nn::RemInit::eta_range)
      .def_readwrite("nu_range", &nn::RemInit::nu_range)
      .def_readwrite("theta", &nn::RemInit::theta)
      .def_readwrite("mu_range", &nn::RemInit::mu_range)
      .def_readwrite("eta", &nn::RemInit::eta)
      .def_readwrite("nu", &nn::RemInit::nu)
      .def_readwrite("thetas", &nn::RemInit::thetas)
      .def_readwrite("mu", &nn::RemInit::mu);

  py::class_<nn::RemParameters, Module, std::shared_ptr<nn::RemParameters>>(
      m, "RemParameters", "The REM parameters of one attention layer: eta, nu, theta and the gate mu.")
      .def_property_readonly("eta", [](const nn::RemParameters& r) { return tensor_or_none(r.eta); })
      .def_property_readonly("nu", [](const nn::RemParameters& r) { return tensor_or_none(r.nu); })
      .def_property_readonly("theta", [](const nn::RemParameters& r) { return tensor_or_none(r.theta); })
      .def_property_readonly("mu", [](const nn::RemParameters& r) { return tensor_or_none(r.mu); })
      .def_readonly("spec", &nn::RemParameters::spec)
      .def_readonly("gate", &nn::RemParameters::gate);

  auto rsa_forward = [](const nn::RSAAttention& a, const Tensor& q, const py::object& k, const py::object& v,
                        const py::object& attn_mask, const py::object& key_padding_mask, bool causal) {
    const Tensor key = k.is_none() ? q : k.cast<Tensor>();
    const Tensor value = v.is_none() ? key : v.cast<Tensor>();
    return a.forward(q, key, value, optional_tensor(attn_mask), optional_tensor(key_padding_mask), causal);
  };
  py::class_<nn::RSAAttention, Module, std::shared_ptr<nn::RSAAttention>>(
      m, "RSAAttention",
      "Multi-head RSA attention with torch.nn.MultiheadAttention's parameters (batch_first): the first "
      "spec.num_heads() heads mix softmax attention with a REM through a learned gate (nn/rsa.h).")
      .def(py::init<int64_t, int64_t, const RemSpec&, const std::string&, double, bool, const nn::RemInit&, DType,
                    Generator*>(),
           py::arg("embed_dim"), py::arg("num_heads"), py::arg("spec"), py::arg("gate") = "head",
           py::arg("dropout") = 0.0, py::arg("bias") = true, py::arg("init") = nn::RemInit{},
           py::arg("dtype") = DType::f32, py::arg("generator") = nullptr, py::keep_alive<1, 10>())
      .def("forward", rsa_forward, py::arg("query"), py::arg("key") = py::none(), py::arg("value") = py::none(),
           py::arg("attn_mask") = py::none(), py::arg("key_padding_mask") = py::none(), py::arg("causal") = false,
           "query [B, Lq, d], key/value [B, Lk, d] (default: query) -> [B, Lq, d].")
      .def("__call__", rsa_forward, py::arg("query"), py::arg("key") = py::none(), py::arg("value") = py::none(),
           py::arg("attn_mask") = py::none(), py::arg("key_padding_mask") = py::none(), py::arg("causal") = false)
      .def_readonly("embed_dim", &nn::RSAAttention::embed_dim)
      .def_readonly("num_heads", &nn::RSAAttention::num_heads)
      .def_readonly("head_dim", &nn::RSAAttention::head_dim)
      .def_property_readonly("in_proj_weight", [](const nn::RSAAttention& a) { return a.in_proj_weight; })
      .def_property_readonly("in_proj_bias", [](const nn::RSAAttention& a) { return tensor_or_none(a.in_proj_bias); })
      .def_readonly("out_proj", &nn::RSAAttention::out_proj)
      .def_readonly("rem", &nn::RSAAttention::rem);

  py::class_<nn::MultiHeadAttention, nn::RSAAttention, std::shared_ptr<nn::MultiHeadAttention>>(
      m, "MultiHeadAttention", "RSAAttention without REM heads: torch.nn.MultiheadAttention(batch_first=True).")
      .def(py::init<int64_t, int64_t, double, bool, DType, Generator*>(), py::arg("embed_dim"), py::arg("num_heads"),
           py::arg("dropout") = 0.0, py::arg("bias") = true, py::arg("dtype") = DType::f32,
           py::arg("generator") = nullptr, py::keep_alive<1, 7>());

  // Models.
  py::class_<models::SequenceState>(m, "SequenceState",
                                    "What a sequence model carries across segments: XL memory, REM states, cells.")
      .def(py::init<>())
      .def_readwrite("mems", &models::SequenceState::mems)
      .def_readwrite("rem_states", &models::SequenceState::rem_states)
      .def_readwrite("cells", &models::SequenceState::cells)
      .def("empty", &models::SequenceState::empty, "Whether nothing is carried.");

  py::class_<models::XLConfig> cfg(m, "XLConfig",
                                   "Transformer-XL / RSA-XL's configuration (models/transformer_xl.h); keyword "
                                   "arguments set fields: XLConfig(n_token=65, n_layer=2, attention='rsa', ...).");
  cfg.def(py::init([](const py::kwargs& kw) {
            auto c = std::make_unique<models::XLConfig>();
            py::object self = py::cast(c.get(), py::return_value_policy::reference);
            for (auto kv : kw) py::setattr(self, kv.first, kv.second);
            return c;
          }))
      .def("validate", &models::XLConfig::validate, "An Error naming the first invalid field.");
#define REMORA_XL_FIELD(f) cfg.def_readwrite(#f, &models::XLConfig::f);
  REMORA_XL_FIELD(n_token) REMORA_XL_FIELD(n_layer) REMORA_XL_FIELD(n_head) REMORA_XL_FIELD(d_model)
  REMORA_XL_FIELD(d_head) REMORA_XL_FIELD(d_inner) REMORA_XL_FIELD(dropout) REMORA_XL_FIELD(dropatt)
  REMORA_XL_FIELD(mem_len) REMORA_XL_FIELD(clamp_len) REMORA_XL_FIELD(same_length) REMORA_XL_FIELD(pre_lnorm)
  REMORA_XL_FIELD(fused_position) REMORA_XL_FIELD(recompute_ff) REMORA_XL_FIELD(attention) REMORA_XL_FIELD(rem)
  REMORA_XL_FIELD(gate) REMORA_XL_FIELD(rem_init) REMORA_XL_FIELD(carry) REMORA_XL_FIELD(init_std)
  REMORA_XL_FIELD(proj_init_std) REMORA_XL_FIELD(cutoffs) REMORA_XL_FIELD(d_embed) REMORA_XL_FIELD(div_val)
  REMORA_XL_FIELD(tie_weight) REMORA_XL_FIELD(n_out) REMORA_XL_FIELD(n_in)
#undef REMORA_XL_FIELD

  using XL = models::TransformerXL;
  py::class_<XL::Output>(m, "XLOutput", "What TransformerXL.forward returns.")
      .def_readonly("logits", &XL::Output::logits, "[B, L, n_token] (None-like undefined with the adaptive softmax).")
      .def_readonly("hidden", &XL::Output::hidden, "[B, L, d], the last layer's output.")
      .def_readonly("state", &XL::Output::state, "The memory for the next segment.")
      .def_property_readonly("nll", [](const XL::Output& o) { return tensor_or_none(o.nll); },
                             "[B, L] -log p(target) (adaptive softmax with targets), else None.");
  py::class_<models::SequenceOutput>(m, "SequenceOutput", "What SequenceModel.run returns: logits and state.")
      .def_property_readonly("logits", [](const models::SequenceOutput& o) { return tensor_or_none(o.logits); },
                             "[B, L, n_out] (None where run_scored scored the targets itself).")
      .def_readonly("state", &models::SequenceOutput::state, "The state for the next segment.");
  py::class_<models::ScoredSequenceOutput, models::SequenceOutput>(
      m, "ScoredSequenceOutput", "What SequenceModel.run_scored returns: run's output and nll.")
      .def_property_readonly("nll", [](const models::ScoredSequenceOutput& o) { return tensor_or_none(o.nll); },
                             "[B, L] -log p(target) where the model scores the targets itself, else None.");
  auto state_or_empty = [](const py::object& state) {
    return state.is_none() ? models::SequenceState{} : state.cast<models::SequenceState>();
  };
  py::class_<models::SequenceModel, Module, std::shared_ptr<models::SequenceModel>>(
      m, "SequenceModel",
      "A causal model over token sequences with a state carried from segment to segment "
      "(models/sequence_model.h): TransformerXL, SRUppLM, RecurrentLM, StarSaberLM.")
      .def("run", [state_or_empty](const models::SequenceModel& model, const Tensor& x, const py::object& state) {
             return model.run(x, state_or_empty(state));
           }, py::arg("x"), py::arg("state") = py::none(),
           "x ids int64 [B, L] (or features [B, L, n_in]) and the previous segment's state (None: the start "
           "of a stream) -> SequenceOutput; the call the driver's tasks make.")
      .def("run_scored", [state_or_empty](const models::SequenceModel& model, const Tensor& x, const Tensor& y,
                                          const py::object& state) {
             return model.run_scored(x, y, state_or_empty(state));
           }, py::arg("x"), py::arg("targets"), py::arg("state") = py::none(),
           "run with the targets int64 [B, L] known -> ScoredSequenceOutput (an adaptive softmax returns nll "
           "and no logits).");
  py::class_<XL, models::SequenceModel, std::shared_ptr<XL>> xl(
      m, "TransformerXL", "Transformer-XL, and RSA-XL with attention='rsa' (models/transformer_xl.h).");
  auto xl_forward = [](const XL& model, const Tensor& ids, const py::object& state, const py::object& targets) {
    return model.forward(ids, state.is_none() ? models::SequenceState{} : state.cast<models::SequenceState>(),
                         optional_tensor(targets));
  };
  xl.def(py::init<const models::XLConfig&, DType, Generator*>(), py::arg("config"), py::arg("dtype") = DType::f32,
         py::arg("generator") = nullptr, py::keep_alive<1, 4>())
      .def("forward", xl_forward, py::arg("ids"), py::arg("state") = py::none(), py::arg("targets") = py::none(),
           "ids int64 [B, L] (and the state of the previous segment) -> XLOutput.")
      .def("__call__", xl_forward, py::arg("ids"), py::arg("state") = py::none(), py::arg("targets") = py::none())
      .def_static("loss", &XL::loss, py::arg("logits"), py::arg("targets"), "Mean cross-entropy of [B, L, V] logits.")
      .def_readonly("config", &XL::cfg);

  // ---- optimizers ----
  py::module_ o = top.def_submodule("optim", "Optimizers.");
  py::class_<optim::Optimizer>(o, "Optimizer", "The base of the optimizers: step() and zero_grad().")
      .def("step", &optim::Optimizer::step, "One update of every parameter that has a gradient.")
      .def("zero_grad", &optim::Optimizer::zero_grad, "Drops every parameter's gradient.")
      .def_property("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr, "The learning rate (of group 0).")
      .def_property_readonly("steps_taken", &optim::Optimizer::steps_taken, "step() calls so far.")
      .def("state_dict", [](const optim::Optimizer& opt) { return ordered_dict(opt.state()); },
           "The optimizer's state tensors by name.")
      .def("load_state_dict", [](optim::Optimizer& opt, const py::object& s) { opt.load_state(named_from_mapping(s)); },
           py::arg("state"), "Restores state_dict()'s tensors.")
      .def_property_readonly("type_name", &optim::Optimizer::type_name);
  py::class_<optim::SGD, optim::Optimizer>(o, "SGD", "Stochastic gradient descent with momentum (torch.optim.SGD).")
      .def(py::init<std::vector<Tensor>, double, double, double, double, bool>(), py::arg("params"), py::arg("lr"),
           py::arg("momentum") = 0.0, py::arg("dampening") = 0.0, py::arg("weight_decay") = 0.0,
           py::arg("nesterov") = false);
  py::class_<optim::Adam, optim::Optimizer>(o, "Adam", "Adam (torch.optim.Adam): L2 weight decay.")
      .def(py::init([](std::vector<Tensor> p, double lr, std::pair<double, double> betas, double eps, double wd) {
             return std::make_unique<optim::Adam>(std::move(p), lr, betas.first, betas.second, eps, wd);
           }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0);
  py::class_<optim::AdamW, optim::Adam>(o, "AdamW", "AdamW (torch.optim.AdamW): decoupled weight decay.")
      .def(py::init([](std::vector<Tensor> p, double lr, std::pair<double, double> betas, double eps, double wd) {
             return std::make_unique<optim::AdamW>(std::move(p), lr, betas.first, betas.second, eps, wd);
           }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.01);

  // ---- safetensors ----
  top.def("load_file", [](const std::string& path, bool keep_dtypes) {
            Safetensors st = load_safetensors(path, keep_dtypes);
            return ordered_dict(st.tensors);
          }, py::arg("filename"), py::arg("keep_dtypes") = true,
          "The tensors of a safetensors file, by name, in file order (an OrderedDict). keep_dtypes=False "
          "converts 16-bit floats to float32 and integers to int64 as Remora's checkpoints do.");
  top.def("load_file_metadata", [](const std::string& path) { return load_safetensors(path).metadata; },
          py::arg("filename"), "The \"__metadata__\" strings of a safetensors file.");
  top.def("save_file", [](const py::object& tensors, const std::string& path, const py::object& metadata) {
            std::map<std::string, std::string> meta;
            if (!metadata.is_none()) meta = metadata.cast<std::map<std::string, std::string>>();
            save_safetensors(path, named_from_mapping(tensors), meta);
          }, py::arg("tensors"), py::arg("filename"), py::arg("metadata") = py::none(),
          "Writes a dict of name -> tensor to a safetensors file (with optional string metadata).");
}

}  // namespace python
}  // namespace remora
