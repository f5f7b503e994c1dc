// SPDX-License-Identifier: BSD-3-Clause
#include "srupp.h"

#include <cmath>
#include <limits>

#include "../core/autograd.h"
#include "../core/generator.h"
#include "../nn/init.h"
#include "../ops/adaptive_softmax.h"
#include "../ops/ops.h"
#include "../ops/rem.h"
#include "../ops/sru.h"

namespace remora {
namespace models {

nn::AdaptiveOptions SRUppConfig::adaptive_options() const {
  nn::AdaptiveOptions o;
  o.n_token = n_token;
  o.d_embed = d_embed > 0 ? d_embed : d_model;
  o.d_proj = d_model;
  o.cutoffs = cutoffs;
  o.div_val = div_val;
  return o;
}

double SRUppConfig::parameter_count() const {
  const double d = double(d_model), da = double(d_attn), L = double(n_layer);
  const double V = double(n_token), out = double(n_out > 0 ? n_out : n_token);
  // Every layer: W_in / W_q [d', d], the output [3 d, d'], the transform's layer
  // norm (2 d'), weight_c and bias (4 d) and the input layer norm (2 d); the
  // attention layers add W_kv [2 d', d'] and alpha.
  const double attention_layers = double(n_layer / attn_every);
  const double layers = L * (d * da + da * 3 * d + 2 * da + 4 * d + (layer_norm ? 2 * d : 0)) +
                        attention_layers * (2 * da * da + 1);
  if (adaptive()) {
    // Per part: the table [size_i (+ k for the head), w_i], its bias and the
    // projection [d, w_i], shared by the embedding.
    const nn::AdaptiveOptions o = adaptive_options();
    const std::vector<int64_t> ends = o.ends();
    double n = 0;
    for (size_t i = 0; i < ends.size(); ++i) {
      const double w = double(o.width(i));
      const double rows = std::max(0.0, double(ends[i] - (i == 0 ? 0 : ends[i - 1]))) +
                          (i == 0 ? double(cutoffs.size()) : 0);
      n += rows * (w + 1) + d * w;
    }
    return layers + n;
  }
  const double in = n_in > 0 ? double(n_in) * d + d : V * d;
  return in + layers + out * d + out;
}

SRUppConfig::ActivationBytes SRUppConfig::activation_bytes(const ActivationShape& s) const {
  const double d = double(d_model), L = double(n_layer), out = double(n_out > 0 ? n_out : n_token);
  const double B = double(s.batch), T = double(s.seq_len), M = double(mem_len), layers = s.train ? L : 1;
  ActivationBytes a;
  // An attention layer keeps z, k and v over memory and segment ([B, L + M,
  // d'] each) and q and the fused kernel's output over the segment, never the
  // scores: linear in L + M.
  const double attn_layers = s.train ? double(n_layer / attn_every) : 1;
  a.scores = 4.0 * attn_layers * B * (2 * T + 3 * (T + M)) * double(d_attn);
  a.layers = 4.0 * layers * 6 * B * T * d;
  if (adaptive()) {
    // Training: the head's logits over every row, the expected tail logits
    // (nn::AdaptiveOptions::expected_tail_logits) and the projected rows;
    // evaluation: every log-probability and the head's.
    const nn::AdaptiveOptions o = adaptive_options();
    const double head = double(o.ends()[0]) + double(cutoffs.size());
    a.logits = s.train ? 4.0 * B * T * (5 * head + 3 * o.expected_tail_logits() + 2 * double(o.d_embed))
                       : 4.0 * 2 * B * T * (head + double(n_token));
  } else {
    a.logits = 4.0 * (s.train ? 3 : 2) * B * T * out;
  }
  a.memory = M > 0 ? 4.0 * L * B * M * d : 0;
  return a;
}

void SRUppConfig::validate() const {
  REMORA_CHECK(n_in > 0 || n_token >= 1, "srupp: n_token must be >= 1, got " << n_token);
  REMORA_CHECK(d_model >= 1, "srupp: d_model must be >= 1, got " << d_model);
  REMORA_CHECK(d_attn >= 1, "srupp: d_attn must be >= 1, got " << d_attn);
  REMORA_CHECK(n_layer >= 1, "srupp: n_layer must be >= 1, got " << n_layer);
  REMORA_CHECK(attn_every >= 1, "srupp: attn_every must be >= 1 (layer i has attention when "
                                "(i + 1) % attn_every == 0), got " << attn_every);
  REMORA_CHECK(dropout >= 0 && dropout < 1, "srupp: dropout must be in [0, 1), got " << dropout);
  REMORA_CHECK(attn_dropout >= 0 && attn_dropout < 1,
               "srupp: attn_dropout must be in [0, 1), got " << attn_dropout);
  REMORA_CHECK(mem_len >= 0, "srupp: mem_len must be >= 0, got " << mem_len);
  REMORA_CHECK(std::isfinite(highway_bias), "srupp: highway_bias must be finite");
  REMORA_CHECK(n_out >= 0, "srupp: n_out must be >= 0, got " << n_out);
  REMORA_CHECK(n_in >= 0, "srupp: n_in must be >= 0, got " << n_in);
  REMORA_CHECK(n_in == 0 || n_out > 0,
               "srupp: real-valued inputs (n_in > 0) need an output size n_out > 0");
  REMORA_CHECK(emb_dropout >= 0 && emb_dropout < 1, "srupp: emb_dropout must be in [0, 1), got " << emb_dropout);
  REMORA_CHECK(d_embed >= 0 && div_val >= 1, "srupp: d_embed must be >= 0 and div_val >= 1, got " << d_embed
                                                 << " and " << div_val);
  if (adaptive()) {
    REMORA_CHECK(n_out == 0 && n_in == 0, "srupp: the adaptive input and softmax (cutoffs, d_embed) are for "
                                          "language models over tokens, not n_out / n_in");
    int64_t prev = 0;
    for (int64_t c : cutoffs) {
      REMORA_CHECK(c > prev && c < n_token, "srupp: cutoffs must increase strictly from > 0 and stay below the "
                                            "vocabulary size " << n_token << ", got " << c << " after " << prev);
      prev = c;
    }
    adaptive_options().check("srupp");
  }
}

namespace {
// U(-a, a) with a = sqrt(3 / size(0)): the enwik8 Model.init_weights "old" rule.
void uniform_by_rows(Tensor& w, Generator* g) {
  const double a = std::sqrt(3.0 / double(w.size(0)));
  nn::init::uniform_(w, -a, a, g);
}
}  // namespace

// ---- transform modules ----

SRUppProjectedLinear::SRUppProjectedLinear(int64_t in, int64_t out, int64_t p, double drop,
                                           DType dt, Generator* g)
    : dropout(drop), gen(g) {
  linear1 = register_module("linear1", std::make_shared<nn::Linear>(in, p, false, dt, g));
  linear2 = register_module("linear2", std::make_shared<nn::Linear>(p, out, false, dt, g));
  layer_norm = register_module("layer_norm", std::make_shared<nn::LayerNorm>(p, 1e-5, dt));
  reset_parameters(g);
}

void SRUppProjectedLinear::reset_parameters(Generator* g) {
  NoGradGuard ng;
  nn::init::xavier_uniform_(linear1->weight, 1, g);
  nn::init::xavier_uniform_(linear2->weight, 1, g);
  if (dropout > 0) linear2->weight.mul_(std::sqrt(1 - dropout));
}

Tensor SRUppProjectedLinear::forward(const Tensor& x) const {
  Tensor z = layer_norm->forward(linear1->forward(x));
  return linear2->forward(remora::dropout(z, dropout, is_training(), gen));
}

SRUppAttention::SRUppAttention(int64_t in, int64_t out, int64_t p, double drop, double adrop,
                               DType dt, Generator* g)
    : proj(p), dropout(drop), attn_dropout(adrop), gen(g) {
  linear1 = register_module("linear1", std::make_shared<nn::Linear>(in, p, false, dt, g));
  linear2 = register_module("linear2", std::make_shared<nn::Linear>(p, 2 * p, false, dt, g));
  linear3 = register_module("linear3", std::make_shared<nn::Linear>(p, out, false, dt, g));
  alpha = register_parameter("alpha", Tensor::zeros({1}, dt));
  layer_norm = register_module("layer_norm", std::make_shared<nn::LayerNorm>(p, 1e-5, dt));
  reset_parameters(g);
}

void SRUppAttention::reset_parameters(Generator* g) {
  NoGradGuard ng;
  nn::init::xavier_uniform_(linear1->weight, 1, g);
  nn::init::xavier_uniform_(linear2->weight, 1, g);
  nn::init::xavier_uniform_(linear3->weight, 1, g);
  alpha.zero_();  // rezero: U starts as W_o LN(W_q x)
  if (dropout > 0) linear3->weight.mul_(std::sqrt(1 - dropout));
}

Tensor SRUppAttention::forward(const Tensor& x, const Tensor& mem) const {
  const int64_t L = x.size(0);
  const bool has_mem = mem.defined() && mem.size(0) > 0;
  const int64_t M = has_mem ? mem.size(0) : 0, Lk = M + L;
  Tensor z = linear1->forward(has_mem ? cat({mem, x}, 0) : x);  // [Lk, B, d']
  Tensor q = has_mem ? z.slice(0, M, Lk) : z;                   // [L, B, d'] (also the residual)
  std::vector<Tensor> kv = chunk(linear2->forward(z), 2, -1);   // K, V [Lk, B, d']
  // One head through the fused attention, batch-major [B, 1, L, d']: causal
  // over absolute positions (query i, at position M + i, sees keys j <= M + i;
  // with same_length only the window + 1 keys up to it), the mask as numbers,
  // so no [B, L, Lk] scores are kept where the device has the fused kernel.
  auto head = [](const Tensor& t) { return t.permute({1, 0, 2}).unsqueeze(1); };
  RsaOptions opt;
  opt.scale = 1.0 / std::sqrt(double(proj));
  opt.causal = true;
  opt.window = window > 0 ? window + 1 : -1;
  opt.dropout = attn_dropout;
  opt.train = is_training();
  opt.gen = gen;
  Tensor a = rsa_attention(head(q), head(kv[0]), head(kv[1]), RemWeights{}, Tensor(), Tensor(), opt)
                 .squeeze(1)
                 .permute({1, 0, 2});  // [L, B, d']
  Tensor y = layer_norm->forward(add(mul(a, alpha), q));
  return linear3->forward(remora::dropout(y, dropout, is_training(), gen));
}

// ---- one layer ----

SRUppCell::SRUppCell(const SRUppConfig& c, int64_t in_features, bool with_attention, bool last,
                     DType dt, Generator* g)
    : in(in_features), d(c.d_model), attention(with_attention), highway_bias(c.highway_bias),
      gen(g) {
  k = in == d ? 3 : 4;
  c_dropout = last ? 0.0 : c.dropout;
  const int64_t out = d * k;
  // torch registers transform_module first, then weight_c, bias, scale_x; the
  // state dict lists own tensors before children either way.
  if (attention) {
    attn = register_module("transform_module", std::make_shared<SRUppAttention>(
                                                   in, out, c.d_attn, c.dropout, c.attn_dropout, dt, g));
    attn->window = c.same_length ? c.mem_len : 0;
  }
  else
    proj = register_module("transform_module",
                           std::make_shared<SRUppProjectedLinear>(in, out, c.d_attn, c.dropout, dt, g));
  if (c.layer_norm) layer_norm = register_module("layer_norm", std::make_shared<nn::LayerNorm>(in, 1e-5, dt));
  weight_c = register_parameter("weight_c", Tensor::zeros({2 * d}, dt));
  bias = register_parameter("bias", Tensor::zeros({2 * d}, dt));
  scale_x = register_buffer("scale_x", Tensor::ones({1}, dt));
  reset_parameters(g);
}

void SRUppCell::reset_parameters(Generator* g) {
  NoGradGuard ng;
  bias.zero_();
  bias.slice(0, d, 2 * d).fill_(highway_bias);  // b_r; b_f = 0
  scale_x.fill_(1);
  nn::init::uniform_(weight_c, -1.0, 1.0, g);    // weight_c_init = 1
}

Tensor SRUppCell::forward(const Tensor& x, const Tensor& c0, const Tensor& mem,
                          Tensor* c_last) const {
  const int64_t L = x.size(0), B = x.size(1);
  // layer_norm: the transform reads LN(x) (the memory stays raw, as the
  // official SRUppCell hands it on); x' below is the raw x.
  const Tensor xin = layer_norm ? layer_norm->forward(x) : x;
  Tensor U = attention ? attn->forward(xin, mem) : proj->forward(xin);  // [L, B, d k]
  U = U.reshape({L, B, d, k});  // the official (L, B, d, k) column order
  Tensor mask;
  if (is_training() && c_dropout > 0)
    mask = remora::dropout(Tensor::ones({B, d}, x.dtype(), x.device()), c_dropout, true, gen);
  SruOutput o = sru_recurrence(U, k == 3 ? x : Tensor(), weight_c.reshape({2, d}),
                               bias.reshape({2, d}), c0, mask);
  if (c_last) *c_last = o.c_last;
  return o.h;
}

SRUpp::SRUpp(const SRUppConfig& c, DType dt, Generator* g) {
  rnn_lst = register_module("rnn_lst", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i)
    rnn_lst->push_back(std::make_shared<SRUppCell>(c, c.d_model, (i + 1) % c.attn_every == 0,
                                                   i + 1 == c.n_layer, dt, g));
}

// ---- the language model ----

SRUppLM::SRUppLM(const SRUppConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  cfg.validate();
  if (c.n_in > 0)
    in_proj = register_module("in_proj", std::make_shared<nn::Linear>(c.n_in, c.d_model, true, dt, g));
  else if (!c.adaptive())
    embedding_layer = register_module(
        "embedding_layer", std::make_shared<nn::Embedding>(c.n_token, c.d_model, -1, dt, g));
  if (c.adaptive()) {
    // Built before registering: the embedding reads the output layer's
    // tensors; the official module order is embedding_layer, rnn, output_layer.
    auto out = std::make_shared<SRUppAdaptiveLogSoftmax>(c.adaptive_options(), c.emb_dropout, dt, g);
    adaptive_embedding = register_module(
        "embedding_layer",
        std::make_shared<SRUppAdaptiveEmbedding>(out.get(), c.layer_norm ? 1.0 : std::sqrt(double(c.d_model))));
    rnn = register_module("rnn", std::make_shared<SRUpp>(c, dt, g));
    adaptive_output = register_module("output_layer", out);
  } else {
    rnn = register_module("rnn", std::make_shared<SRUpp>(c, dt, g));
    const int64_t n_out = c.n_out > 0 ? c.n_out : c.n_token;
    output_layer = register_module("output_layer",
                                   std::make_shared<nn::Linear>(c.d_model, n_out, true, dt, g));
  }
  reset_parameters(g);
}

// ---- adaptive input and softmax (the official embedding.py) ----

SRUppAdaptiveLogSoftmax::SRUppAdaptiveLogSoftmax(const nn::AdaptiveOptions& o, double drop, DType dt,
                                                 Generator* g)
    : opts(o), dropout(drop), gen(g) {
  o.check("srupp: adaptive softmax");
  const std::vector<int64_t> ends = o.ends();
  const int64_t k = int64_t(ends.size()) - 1;
  out_layers = register_module("out_layers", std::make_shared<nn::ModuleList>());
  out_projs = register_module("out_projs", std::make_shared<nn::ParameterList>());
  for (size_t i = 0; i < ends.size(); ++i) {
    const int64_t rows = ends[i] - (i == 0 ? 0 : ends[i - 1]) + (i == 0 ? k : 0);
    out_layers->push_back(std::make_shared<nn::AdaptiveOutLayer>(Tensor(), rows, o.width(i), dt, g));
  }
  for (size_t i = 0; i < ends.size(); ++i) out_projs->push_back(Tensor::zeros({o.d_proj, o.width(i)}, dt));
  reset_parameters(g);
}

void SRUppAdaptiveLogSoftmax::reset_parameters(Generator* g) {
  NoGradGuard ng;
  const double a = std::sqrt(3.0 / double(opts.d_proj));  // the official init_range, sqrt(3 / n_d)
  for (size_t i = 0; i < out_layers->size(); ++i) {
    auto& l = *out_layers->at<nn::AdaptiveOutLayer>(i);
    nn::init::uniform_(l.weight, -a, a, g);
    l.bias.zero_();
    Tensor p = (*out_projs)[i];
    nn::init::xavier_uniform_(p, 1, g);
  }
}

AdaptiveSoftmaxWeights SRUppAdaptiveLogSoftmax::weights() const {
  AdaptiveSoftmaxWeights w;
  w.cutoffs = opts.ends();
  for (size_t i = 0; i < w.cutoffs.size(); ++i) {
    const auto& l = *out_layers->at<nn::AdaptiveOutLayer>(i);
    w.weight.push_back(l.weight);
    w.bias.push_back(l.bias);
    w.proj.push_back((*out_projs)[i]);
  }
  w.dropout = is_training() ? dropout : 0.0;
  w.gen = gen;
  return w;
}

Tensor SRUppAdaptiveLogSoftmax::nll(const Tensor& hidden, const Tensor& target) const {
  return adaptive_log_softmax_nll(hidden, target, weights());
}

Tensor SRUppAdaptiveLogSoftmax::log_prob(const Tensor& hidden) const { return adaptive_log_prob(hidden, weights()); }

SRUppAdaptiveEmbedding::SRUppAdaptiveEmbedding(const SRUppAdaptiveLogSoftmax* o, double s) : out(o), scale(s) {}

Tensor SRUppAdaptiveEmbedding::forward(const Tensor& ids) const {
  const nn::AdaptiveOptions& o = out->opts;
  Shape out_shape = ids.shape();
  out_shape.push_back(o.d_proj);
  const Tensor flat = ids.reshape({-1});
  const AdaptiveParts parts_of = adaptive_parts(flat, o.ends(), "srupp: AdaptiveEmbedding: id");
  const bool tr = out->is_training();
  std::vector<Tensor> parts;
  for (size_t p = 0; p < parts_of.rows.size(); ++p) {
    if (parts_of.rows[p].empty()) continue;
    const Tensor rows = index_select(out->out_layers->at<nn::AdaptiveOutLayer>(p)->weight, 0,
                                     Tensor::from_vector(parts_of.local[p], {}, DType::i64, ids.device()));
    parts.push_back(linear(remora::dropout(rows, out->dropout, tr, out->gen), (*out->out_projs)[p]));
  }
  if (parts.empty()) return Tensor::zeros(out_shape, (*out->out_projs)[0].dtype(), ids.device());
  Tensor e = adaptive_restore_order(parts, parts_of).reshape(out_shape);
  return scale != 1.0 ? e * scale : e;
}

void SRUppLM::reset_parameters(Generator* g) {
  NoGradGuard ng;
  for (size_t i = 0; i < rnn->rnn_lst->size(); ++i) {
    auto cell = rnn->rnn_lst->at<SRUppCell>(i);
    if (cell->attention) cell->attn->reset_parameters(g);
    else cell->proj->reset_parameters(g);
    cell->reset_parameters(g);
  }
  // Model.init_weights: matrices U(-sqrt(3 / size(0)), ...), vectors zero.
  if (embedding_layer) uniform_by_rows(embedding_layer->weight, g);
  if (in_proj) {
    uniform_by_rows(in_proj->weight, g);
    in_proj->bias.zero_();
  }
  if (adaptive_output) {
    adaptive_output->reset_parameters(g);
  } else {
    uniform_by_rows(output_layer->weight, g);
    output_layer->bias.zero_();
  }
}

Tensor SRUppLM::loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits, targets);
}

SRUppLM::Output SRUppLM::forward(const Tensor& ids, const SequenceState& state, const Tensor& targets) const {
  if (in_proj)
    REMORA_CHECK(ids.defined() && is_floating(ids.dtype()) && ids.dim() == 3 && ids.size(2) == cfg.n_in,
                 "srupp: inputs must be floating [B, L, " << cfg.n_in << "], got "
                                                          << (ids.defined() ? ids.str() : "undefined"));
  else
    REMORA_CHECK(ids.defined() && ids.dtype() == DType::i64 && ids.dim() == 2,
                 "srupp: ids must be i64 [B, L], got " << (ids.defined() ? ids.str() : "undefined"));
  const int64_t B = ids.size(0), d = cfg.d_model, nl = cfg.n_layer;
  const bool has_mem = !state.mems.empty();
  REMORA_CHECK(!has_mem || int64_t(state.mems.size()) == nl,
               "srupp: expected " << nl << " memories (one per layer) in state.mems, got "
                                  << state.mems.size());
  const int64_t M = has_mem ? state.mems[0].size(1) : 0;
  for (const Tensor& m : state.mems)
    REMORA_CHECK(m.dim() == 3 && m.size(0) == B && m.size(1) == M && m.size(2) == d,
                 "srupp: memory " << shape_str(m.shape()) << " does not fit [B, M, d] = [" << B
                                  << ", " << M << ", " << d << "]");
  REMORA_CHECK(state.cells.empty() || int64_t(state.cells.size()) == nl,
               "srupp: expected " << nl << " cell states (one per layer) in state.cells, got "
                                  << state.cells.size());
  for (const Tensor& c : state.cells)
    REMORA_CHECK(c.dim() == 2 && c.size(0) == B && c.size(1) == d,
                 "srupp: cell state " << shape_str(c.shape()) << " does not fit [B, d] = [" << B
                                      << ", " << d << "]");
  const DType dt = adaptive_output ? (*adaptive_output->out_projs)[0].dtype() : output_layer->weight.dtype();
  const bool tr = is_training();

  Tensor emb = in_proj            ? in_proj->forward(ids.to(dt))
               : embedding_layer ? embedding_layer->forward(ids)
                                 : adaptive_embedding->forward(ids);  // [B, L, d]
  Tensor x = dropout(emb, cfg.dropout, tr, gen).transpose(0, 1).contiguous();           // [L, B, d]

  Output out;
  for (int64_t l = 0; l < nl; ++l) {
    auto cell = rnn->rnn_lst->at<SRUppCell>(size_t(l));
    // Memory [M, B, d] time-major for the layer (only attention layers read it).
    Tensor mem = has_mem && M > 0 ? state.mems[size_t(l)].transpose(0, 1) : Tensor();
    Tensor c0 = state.cells.empty() ? Tensor() : state.cells[size_t(l)];
    Tensor c_last;
    Tensor h = cell->forward(x, c0, cell->attention ? mem : Tensor(), &c_last);
    out.state.cells.push_back(c_last.detach());
    if (cfg.mem_len > 0) {  // the last mem_len rows of [mem; input of layer l], detached
      Tensor xd = x.detach();
      Tensor full = mem.defined() ? cat({mem, xd}, 0) : xd;
      const int64_t T = full.size(0), beg = std::max<int64_t>(0, T - cfg.mem_len);
      out.state.mems.push_back(full.slice(0, beg, T).transpose(0, 1).contiguous());
    }
    x = h;
  }
  out.hidden = x.transpose(0, 1);  // [B, L, d]
  const Tensor h = dropout(out.hidden, cfg.dropout, tr, gen);
  if (adaptive_output) {
    const int64_t Lq = h.size(1);
    const Tensor flat = h.reshape({B * Lq, d});
    if (targets.defined()) {
      REMORA_CHECK(targets.dtype() == DType::i64 && targets.dim() == 2 && targets.size(0) == B &&
                       targets.size(1) == Lq,
                   "srupp: targets must be i64 [" << B << ", " << Lq << "], got " << targets.str());
      out.nll = adaptive_output->nll(flat, targets.reshape({B * Lq})).reshape({B, Lq});
    } else {
      out.logits = adaptive_output->log_prob(flat).reshape({B, Lq, cfg.n_token});
    }
    return out;
  }
  out.logits = output_layer->forward(h);
  return out;
}

}  // namespace models
}  // namespace remora
