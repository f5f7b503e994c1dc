// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The op table (ops/ops.def) in Python, with no edit here for a new row.
///
/// The table is expanded twice:
/// 1. at namespace scope, each row declares its function once more, in a
///    namespace of its own (named after the row's line in ops.def), with the
///    row's own parameter list. Its type, decltype(&sig_N::name), is the row's
///    signature without the defaults, which picks the row's overload of
///    remora::name;
/// 2. inside bind_ops, each row binds that overload as remora._C._ops.<name>_<line>
///    (positional arguments) and adds a tuple to remora._C.op_table:
///    (kind, name, raw attribute, line, params, method params, call, check),
///    the C++ text of the row. remora/_ops.py turns each row into a Python
///    function with the row's parameter names and defaults (and each
///    REMORA_METHOD / REMORA_UNARY row into a Tensor method as well).
///
/// The ops declared in their own headers (REMORA_DECLARED_IN rows: REM, RSA,
/// SRU, the losses, adaptive softmax) take argument structs; those with a
/// Python form are bound by hand below, the others are listed as skipped.
#include "common.h"

#define REMORA_PY_CAT_(a, b) a##b
#define REMORA_PY_CAT(a, b) REMORA_PY_CAT_(a, b)
#define REMORA_PY_STR_(...) #__VA_ARGS__
#define REMORA_PY_STR(...) REMORA_PY_STR_(__VA_ARGS__)

// ---- expansion 1: the rows' signatures ----
namespace remora {
namespace python {
namespace sig {
#define REMORA_FUNCTION(Ret, name, params, check) \
  namespace REMORA_PY_CAT(row_, __LINE__) {       \
  Ret name params;                                \
  }
#define REMORA_METHOD(Ret, name, params, method_params, call, check) REMORA_FUNCTION(Ret, name, params, check)
#define REMORA_DECLARED_IN(name, header, check)
#include <remora/ops/ops.def>
#undef REMORA_FUNCTION
#undef REMORA_METHOD
#undef REMORA_DECLARED_IN
}  // namespace sig

namespace {

// Rows whose signature has no generic Python form, skipped on purpose (each
// with its reason, listed in remora.skipped_ops):
const std::map<std::string, std::string>& skipped_rows() {
  static const std::map<std::string, std::string> rows = {
      // adam_step_ takes an AdamStep struct; remora.optim.Adam / AdamW run it.
      {"adam_step_", "takes an AdamStep struct: the optimizers of remora.optim run it"},
      // index / index_put take std::vector<TensorIndex>: Tensor.__getitem__,
      // __setitem__ and Tensor.index_put convert Python keys to them.
      {"index", "takes TensorIndex lists: use t[key] (Tensor.__getitem__)"},
      {"index_put", "takes TensorIndex lists: use t.index_put(key, value) or t[key] = value"},
  };
  return rows;
}

}  // namespace

void bind_ops(py::module_& m) {
  py::enum_<Reduction>(m, "Reduction", "How a loss reduces over its elements.")
      .value("mean", Reduction::mean)
      .value("sum", Reduction::sum)
      .value("none", Reduction::none);

  py::module_ raw = m.def_submodule("_ops", "The op table's functions, positional, one per row of ops/ops.def.");
  py::list table;
  const auto& skipped = skipped_rows();

  // ---- expansion 2: bind each row ----
#define REMORA_PY_ROW(kind, Ret, name, params, method_params, call, check)                                     \
  {                                                                                                         \
    const std::string attr = std::string(#name "_") + std::to_string(__LINE__);                            \
    auto it = skipped.find(#name);                                                                          \
    if (it == skipped.end()) {                                                                              \
      raw.def(attr.c_str(), static_cast<decltype(&sig::REMORA_PY_CAT(row_, __LINE__)::name)>(&::remora::name)); \
      table.append(py::make_tuple(kind, #name, attr, __LINE__, REMORA_PY_STR(params),                       \
                                  REMORA_PY_STR(method_params), REMORA_PY_STR(call), REMORA_PY_STR(check))); \
    } else {                                                                                                \
      table.append(py::make_tuple("skipped", #name, it->second, __LINE__, REMORA_PY_STR(params), "", "",    \
                                  REMORA_PY_STR(check)));                                                   \
    }                                                                                                       \
  }
#define REMORA_FUNCTION(Ret, name, params, check) REMORA_PY_ROW("function", Ret, name, params, (), (), check)
#define REMORA_METHOD(Ret, name, params, method_params, call, check) \
  REMORA_PY_ROW("method", Ret, name, params, method_params, call, check)
#define REMORA_DECLARED_IN(name, header, check) \
  table.append(py::make_tuple("declared_in", #name, header, __LINE__, "", "", "", REMORA_PY_STR(check)));
#include <remora/ops/ops.def>
#undef REMORA_FUNCTION
#undef REMORA_METHOD
#undef REMORA_DECLARED_IN
#undef REMORA_PY_ROW
  m.attr("op_table") = table;

  // ---- the REMORA_DECLARED_IN ops with a Python form ----
  py::class_<RemSpec>(m, "RemSpec",
                      "Which REM heads a layer has (ops/rem.h): regular, cyclic pairs, dilated regular, "
                      "dilated cyclic pairs, their dilations, masked (causal) and max_distance.")
      .def(py::init([](int64_t regular, int64_t cyclic, int64_t dilated_regular, int64_t dilated_cyclic,
                       std::vector<int64_t> dilations, bool masked, int64_t max_distance) {
             RemSpec s;
             s.regular = regular;
             s.cyclic = cyclic;
             s.dilated_regular = dilated_regular;
             s.dilated_cyclic = dilated_cyclic;
             s.dilations = std::move(dilations);
             s.masked = masked;
             s.max_distance = max_distance;
             return s;
           }),
           py::arg("regular") = 0, py::arg("cyclic") = 0, py::arg("dilated_regular") = 0,
           py::arg("dilated_cyclic") = 0, py::arg("dilations") = std::vector<int64_t>{}, py::arg("masked") = true,
           py::arg("max_distance") = 0)
      .def_readwrite("regular", &RemSpec::regular)
      .def_readwrite("cyclic", &RemSpec::cyclic)
      .def_readwrite("dilated_regular", &RemSpec::dilated_regular)
      .def_readwrite("dilated_cyclic", &RemSpec::dilated_cyclic)
      .def_readwrite("dilations", &RemSpec::dilations)
      .def_readwrite("masked", &RemSpec::masked)
      .def_readwrite("max_distance", &RemSpec::max_distance)
      .def("num_heads", &RemSpec::num_heads, "Hr, the number of REM heads (a cyclic pair counts twice).")
      .def("num_eta", &RemSpec::num_eta, "The size of eta.")
      .def("num_cyclic", &RemSpec::num_cyclic, "The size of nu and theta.")
      .def("__repr__", [](const RemSpec& s) {
        std::ostringstream os;
        os << "RemSpec(regular=" << s.regular << ", cyclic=" << s.cyclic << ", dilated_regular=" << s.dilated_regular
           << ", dilated_cyclic=" << s.dilated_cyclic << ", masked=" << (s.masked ? "True" : "False")
           << ", max_distance=" << s.max_distance << ")";
        return os.str();
      });

  m.def("gate", &gate, py::arg("a"), py::arg("b"), py::arg("mu"),
        "(1 - sigmoid(mu)) * a + sigmoid(mu) * b (docs/math.md, The gate op). Gradient to a, b and mu.");
  m.def("rem_matrix", [](const RemSpec& spec, const py::object& eta, const py::object& nu, const py::object& theta,
                         int64_t Lq, int64_t Lk, const py::object& key_padding) {
          return rem_matrix(spec, optional_tensor(eta), optional_tensor(nu), optional_tensor(theta), Lq, Lk,
                            optional_tensor(key_padding));
        }, py::arg("spec"), py::arg("eta"), py::arg("nu"), py::arg("theta"), py::arg("Lq"), py::arg("Lk"),
        py::arg("key_padding") = py::none(),
        "The dense REM P [Hr, Lq, Lk] (or [B, Hr, Lq, Lk] with key_padding). Gradient to eta, nu, theta.");
  m.def("rem_apply", [](const RemSpec& spec, const py::object& eta, const py::object& nu, const py::object& theta,
                        const Tensor& v, int64_t Lq, const py::object& key_padding, const py::object& state_in,
                        bool return_state) -> py::object {
          Tensor state_out;
          Tensor out = rem_apply(spec, optional_tensor(eta), optional_tensor(nu), optional_tensor(theta), v, Lq,
                                 optional_tensor(key_padding), optional_tensor(state_in),
                                 return_state ? &state_out : nullptr);
          if (return_state) return py::make_tuple(out, tensor_or_none(state_out));
          return py::cast(out);
        }, py::arg("spec"), py::arg("eta"), py::arg("nu"), py::arg("theta"), py::arg("v"), py::arg("Lq"),
        py::arg("key_padding") = py::none(), py::arg("state_in") = py::none(), py::arg("return_state") = false,
        "P V without building P: v [B, Hr, Lk, D] -> [B, Hr, Lq, D] (ops/rem.h). With return_state, "
        "(out, state_out). Gradient to v, eta, nu, theta and state_in.");
  m.def("rsa_attention", [](const Tensor& q, const Tensor& k, const Tensor& v, const RemSpec& spec,
                            const py::object& eta, const py::object& nu, const py::object& theta,
                            const py::object& mu, const py::object& attn_mask, const py::object& key_padding,
                            double scale, double dropout, bool train, bool causal, int64_t window,
                            const py::object& pos_q, const py::object& pos_r, bool reference) {
          RsaOptions o;
          o.scale = scale;
          o.dropout = dropout;
          o.train = train;
          o.causal = causal;
          o.window = window;
          o.pos_q = optional_tensor(pos_q);
          o.pos_r = optional_tensor(pos_r);
          auto f = reference ? static_cast<Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const RemSpec&,
                                                      const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                      const Tensor&, const Tensor&, const RsaOptions&)>(
                                   &rsa_attention_reference)
                             : static_cast<Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const RemSpec&,
                                                      const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                      const Tensor&, const Tensor&, const RsaOptions&)>(&rsa_attention);
          return f(q, k, v, spec, optional_tensor(eta), optional_tensor(nu), optional_tensor(theta),
                   optional_tensor(mu), optional_tensor(attn_mask), optional_tensor(key_padding), o);
        }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("spec") = RemSpec{}, py::arg("eta") = py::none(),
        py::arg("nu") = py::none(), py::arg("theta") = py::none(), py::arg("mu") = py::none(),
        py::arg("attn_mask") = py::none(), py::arg("key_padding") = py::none(), py::arg("scale") = 0.0,
        py::arg("dropout") = 0.0, py::arg("train") = false, py::arg("causal") = false, py::arg("window") = -1,
        py::arg("pos_q") = py::none(), py::arg("pos_r") = py::none(), py::arg("reference") = false,
        "RSA attention (ops/rem.h, docs/math.md): q [B, H, Lq, D], k, v [B, H, Lk, D] -> [B, H, Lq, D]. "
        "Heads 0..Hr-1 mix softmax attention with the REM through the gate sigmoid(mu); the rest are plain. "
        "scale 0 means 1/sqrt(D). reference=True runs the composed reference path. Gradient to q, k, v, "
        "eta, nu, theta, mu, attn_mask, pos_q and pos_r.");
  m.def("mse_loss", [](const Tensor& a, const Tensor& b, Reduction r) { return mse_loss(a, b, r); },
        py::arg("input"), py::arg("target"), py::arg("reduction") = Reduction::mean, "Mean squared error.");
  m.def("l1_loss", [](const Tensor& a, const Tensor& b, Reduction r) { return l1_loss(a, b, r); },
        py::arg("input"), py::arg("target"), py::arg("reduction") = Reduction::mean, "Mean absolute error.");
  m.def("smooth_l1_loss", [](const Tensor& a, const Tensor& b, Reduction r, double beta) {
          return smooth_l1_loss(a, b, r, beta);
        }, py::arg("input"), py::arg("target"), py::arg("reduction") = Reduction::mean, py::arg("beta") = 1.0,
        "Huber-style loss, quadratic below beta.");
  m.def("nll_loss", [](const Tensor& a, const Tensor& t, int64_t ignore, Reduction r) {
          return nll_loss(a, t, ignore, r);
        }, py::arg("log_probs"), py::arg("target"), py::arg("ignore_index") = -100,
        py::arg("reduction") = Reduction::mean, "Negative log-likelihood of log-probabilities [N, C].");
  m.def("binary_cross_entropy_with_logits", [](const Tensor& l, const Tensor& t, const py::object& mask,
                                               Reduction r) {
          return binary_cross_entropy_with_logits(l, t, optional_tensor(mask), r);
        }, py::arg("logits"), py::arg("targets"), py::arg("mask") = py::none(), py::arg("reduction") = Reduction::mean,
        "Sigmoid + binary cross-entropy, fused and stable.");
}

}  // namespace python
}  // namespace remora
