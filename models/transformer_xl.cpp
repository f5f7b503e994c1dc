// SPDX-License-Identifier: BSD-3-Clause
#include "transformer_xl.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "../core/autograd.h"
#include "../core/activation_checkpoint.h"
#include "../core/generator.h"
#include "../nn/init.h"
#include "../ops/ops.h"

namespace remora {
namespace models {

bool XLConfig::adaptive() const {
  return !cutoffs.empty() || embed_width() != d_model || div_val != 1 || !tie_weight;
}

nn::AdaptiveOptions XLConfig::adaptive_options() const {
  nn::AdaptiveOptions o;
  o.n_token = n_token;
  o.d_embed = embed_width();
  o.d_proj = d_model;
  o.cutoffs = cutoffs;
  o.div_val = div_val;
  return o;
}

double XLConfig::parameter_count() const {
  const double d = double(d_model), H = double(n_head), L = double(n_layer), di = double(d_inner);
  const double HD = H * double(d_head > 0 ? d_head : d_model / n_head);
  const double V = double(n_token), out = double(n_out > 0 ? n_out : n_token);
  const double layer = d * 3 * HD + HD * d + d * HD + (d * di + di) + (di * d + d) + 4 * d + 2 * HD;
  if (adaptive()) {
    // Per part i: the table [size_i, w_i] (one [V, d_embed] when div_val is 1)
    // and the projection [d, w_i] where there is one; the output layer adds
    // the untied tables and projections, a bias per token and the clusters.
    const nn::AdaptiveOptions o = adaptive_options();
    const std::vector<int64_t> ends = o.ends();
    const bool has_proj = div_val != 1 || o.d_embed != d_model;
    double tables = 0, projs = 0, out_projs = 0;
    for (size_t i = 0; i < ends.size(); ++i) {
      const double w = double(o.width(i)), rows = std::max(0.0, double(ends[i] - (i == 0 ? 0 : ends[i - 1])));
      tables += div_val == 1 ? (i == 0 ? V * w : 0) : rows * w;
      if (has_proj && (div_val != 1 || i == 0)) projs += d * w;
      if (has_proj && !(i < tie_projs.size() && tie_projs[i])) out_projs += d * w;
    }
    const double clusters = double(cutoffs.size()) * (double(o.d_embed) + 1);
    return L * layer + tables + projs + (tie_weight ? 0 : tables) + out_projs + V + clusters;
  }
  const double in = n_in > 0 ? double(n_in) * d + d : V * d;
  return L * layer + in + out * d + out;
}

// Per layer about 12 [B, L, d] tensors, the [B, L, d_inner] ones (1 with
// dropout: fc2 keeps relu_dropout's output, relu_dropout its mask bits; 2
// without: relu keeps its input, fc2 its output), the keys and values over memory and segment
// [B, H, L + M, D] and the projected positional embeddings [H, L + M, D];
// backward adds, for one layer at a time, the gradients of those keys,
// values and (per batch row) positional rows. Training keeps every layer's,
// inference one layer at a time. The positional scores [B, H, L, L + M]
// exist only where they are materialised (fused_position off, or a device
// without the fused positional kernel): 3 score-sized tensors per layer.
XLConfig::ActivationBytes XLConfig::activation_bytes(const ActivationShape& s) const {
  const double d = double(d_model), H = double(n_head), L = double(n_layer), di = double(d_inner);
  const double HD = H * double(d_head > 0 ? d_head : d_model / n_head);
  const double out = double(n_out > 0 ? n_out : n_token);
  const double B = double(s.batch), T = double(s.seq_len), M = double(mem_len), Lk = T + M;
  const double layers = s.train ? L : 1, inner = dropout > 0 ? 1 : 2;
  ActivationBytes a;
  a.scores = fused_position ? 0 : 4.0 * layers * 3 * B * H * T * Lk;
  a.layers = 4.0 * layers * (12 * B * T * d + inner * B * T * di + 2 * B * M * HD + Lk * HD) +
             (s.train ? 4.0 * 3 * B * Lk * HD : 0);
  // recompute_ff: one feed-forward block's inner activations (the block running
  // again in backward) instead of every layer's. (Its [B, T, d] tensors are
  // mostly live at the peak either way: measured at L = 16,384, RSA-XL, the
  // peak fell by the inner activations of all layers but one.)
  if (recompute_ff && s.train) a.layers -= 4.0 * (layers - 1) * inner * B * T * di;
  if (adaptive() && n_out == 0) {
    // Adaptive softmax. Training scores the targets alone: the head's logits
    // [B T, c_1 + k] over every row (with their copies per part and their
    // gradients), and each tail cluster's logits for the rows whose target is
    // in it (how many depends on the text: expected_tail_logits counts them for
    // word frequencies following Zipf's law). Evaluation builds every
    // log-probability [B T, V] (adaptive_log_prob), and the head's beside them.
    const std::vector<int64_t> ends = adaptive_options().ends();
    const double tail = adaptive_options().expected_tail_logits();  // logits per row, expected
    const double head = double(ends[0]) + double(ends.size() - 1);
    a.logits = s.train ? 4.0 * B * T * (5 * head + 3 * tail) : 4.0 * 2 * B * T * (head + double(n_token));
  } else {
    a.logits = 4.0 * (s.train ? 3 : 2) * B * T * out;
  }
  a.memory = M > 0 ? 4.0 * L * B * M * d : 0;  // one [B, M, d] per layer (Output::state)
  return a;
}

void XLConfig::validate() const {
  REMORA_CHECK(n_token >= 1, "transformer_xl: n_token must be >= 1, got " << n_token);
  REMORA_CHECK(n_layer >= 1 && n_head >= 1 && d_model >= 1 && d_inner >= 1,
               "transformer_xl: n_layer, n_head, d_model, d_inner must be >= 1");
  REMORA_CHECK(d_model % 2 == 0, "transformer_xl: d_model must be even (the sinusoidal position embedding "
                                 "pairs a sine and a cosine per frequency), got " << d_model);
  REMORA_CHECK(d_head > 0 || d_model % n_head == 0,
               "transformer_xl: d_model = " << d_model << " is not divisible by n_head = " << n_head
                                            << "; set d_head explicitly");
  REMORA_CHECK(mem_len >= 0 && clamp_len >= 0 && n_out >= 0 && n_in >= 0,
               "transformer_xl: mem_len, clamp_len, n_out and n_in must be >= 0");
  REMORA_CHECK(n_in == 0 || n_out > 0,
               "transformer_xl: real-valued inputs (n_in > 0) need an untied output layer (n_out > 0)");
  if (adaptive()) {
    REMORA_CHECK(n_out == 0 && n_in == 0,
                 "transformer_xl: the adaptive input and softmax (cutoffs, d_embed, div_val, tie_weight false) "
                 "are for language models over tokens, not n_out / n_in");
    REMORA_CHECK(d_embed >= 0 && div_val >= 1, "transformer_xl: d_embed must be >= 0 and div_val >= 1");
    int64_t prev = 0;
    for (int64_t c : cutoffs) {
      REMORA_CHECK(c > prev && c < n_token, "transformer_xl: cutoffs must increase strictly from > 0 and stay below "
                                                "the vocabulary size "
                                                    << n_token << ", got " << c << " after " << prev);
      prev = c;
    }
    REMORA_CHECK(tie_projs.empty() || tie_projs.size() == cutoffs.size() + 1,
                 "transformer_xl: tie_projs needs one entry per part (" << cutoffs.size() + 1 << "), got "
                                                                        << tie_projs.size());
    adaptive_options().check("transformer_xl");
  }
  REMORA_CHECK(dropout >= 0 && dropout < 1 && dropatt >= 0 && dropatt < 1,
               "transformer_xl: dropout and dropatt must be in [0, 1)");
  REMORA_CHECK(attention == "softmax" || attention == "rsa",
               "transformer_xl: attention must be \"softmax\" or \"rsa\", got \"" << attention << "\"");
  if (attention == "rsa") {
    rem.validate("transformer_xl");
    REMORA_CHECK(rem.masked, "transformer_xl: the REM of a language model must be masked");
    REMORA_CHECK(rem.num_heads() >= 1 && rem.num_heads() <= n_head,
                 "transformer_xl: rsa needs 1.." << n_head << " REM heads, got " << rem.num_heads());
    REMORA_CHECK(!carry || rem.max_distance == 0,
                 "transformer_xl: carry mode needs a REM without max_distance");
  }
}

namespace {
int64_t head_dim(const XLConfig& c) { return c.d_head > 0 ? c.d_head : c.d_model / c.n_head; }

// A module that only holds children or parameters under fixed names
// (word_emb.emb_layers, crit.out_layers, pos_ff.CoreNet).
std::shared_ptr<nn::Module> holder() { return std::make_shared<nn::Module>(); }

}  // namespace

// ---- attention ----

RelPartialAttention::RelPartialAttention(const XLConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  const int64_t HD = c.n_head * head_dim(c);
  qkv_net = register_module("qkv_net", std::make_shared<nn::Linear>(c.d_model, 3 * HD, false, dt, g));
  r_net = register_module("r_net", std::make_shared<nn::Linear>(c.d_model, HD, false, dt, g));
  o_net = register_module("o_net", std::make_shared<nn::Linear>(HD, c.d_model, false, dt, g));
  layer_norm = register_module("layer_norm", std::make_shared<nn::LayerNorm>(c.d_model, 1e-5, dt));
  if (c.attention == "rsa")
    rem = register_module("rem", std::make_shared<nn::RemParameters>(c.rem, c.gate, c.rem_init, dt, g));
}

Tensor RelPartialAttention::forward(const Tensor& h, const Tensor& r, const Tensor& mem,
                                    const Tensor& r_w_bias, const Tensor& r_r_bias,
                                    const Tensor& mask, const Tensor& rem_state_in,
                                    Tensor* rem_state_out) const {
  const int64_t B = h.size(0), Lq = h.size(1), H = cfg.n_head, D = head_dim(cfg), HD = H * D;
  const int64_t M = mem.defined() ? mem.size(1) : 0, Lk = M + Lq;
  auto split = [&](const Tensor& x, int64_t L) { return x.reshape({B, L, H, D}).permute({0, 2, 1, 3}); };
  auto in = [&](const Tensor& x) { return cfg.pre_lnorm ? layer_norm->forward(x) : x; };
  // q, k, v of the segment; the memory rows need only k and v (the official
  // code projects cat(mem, h) whole and drops the memory's q), so they go
  // through the k and v rows of the weight alone: no q for them, and, as the
  // memory is detached, no input gradient for them in backward.
  // (The f32 temporaries are let go as soon as they are used: they would
  // otherwise be live beside the attention, at the step's peak of memory.)
  Tensor q, k, v;
  {
    std::vector<Tensor> qkv = chunk(qkv_net->forward(in(h)), 3, -1);  // [B, Lq, HD] each
    q = split(qkv[0], Lq);                                             // [B, H, Lq, D]
    k = split(qkv[1], Lq), v = split(qkv[2], Lq);
  }
  if (M > 0) {
    std::vector<Tensor> kv = chunk(linear(in(mem), qkv_net->weight.slice(0, HD, 3 * HD)), 2, -1);
    k = cat({split(kv[0], M), k}, 2);  // [B, H, Lk, D]
    v = cat({split(kv[1], M), v}, 2);
  }
  Tensor rk = r_net->forward(r).reshape({Lk, H, D}).permute({1, 0, 2});  // [H, Lk, D]
  const double scale = 1.0 / std::sqrt(double(D));
  RsaOptions opt;
  Tensor bias;
  if (cfg.fused_position) {
    // BD = rel_shift((q + v_bias) r^T) as rsa_attention's positional term:
    // inside the fused kernel, tile by tile, where the device has it (else
    // composed there); XL's causal mask (same_length: a window of mem_len
    // keys) as numbers unless a mask is given.
    opt.pos_q = add(q, r_r_bias.reshape({1, H, 1, D}));
    opt.pos_r = rk.contiguous();
    if (mask.defined()) {
      bias = mask;
    } else {
      opt.causal = true;
      opt.window = cfg.same_length && Lk - cfg.mem_len > 0 ? cfg.mem_len : -1;
    }
  } else {
    // BD materialised as a learned bias [B, H, Lq, Lk], scaled, with the mask
    // added in the same pass (the reference form).
    REMORA_CHECK(mask.defined(), "transformer_xl: the composed positional term needs the mask");
    bias = rel_shift(matmul(add(q, r_r_bias.reshape({1, H, 1, D})), rk.transpose(-2, -1)), scale,
                     mask);
  }
  opt.scale = scale;
  opt.dropout = cfg.dropatt;
  opt.train = is_training();
  opt.gen = gen;
  opt.carry = cfg.carry;
  opt.rem_state_in = rem_state_in;
  // AC = (q + u) k^T through rsa_attention (plain softmax heads when there is no REM).
  RsaResult attn;
  {
    RsaProblem problem{add(q, r_w_bias.reshape({1, H, 1, D})), std::move(k), std::move(v),
                       rem ? rem->weights() : RemWeights{}, bias, Tensor(), std::move(opt)};
    q = Tensor();
    attn = rsa_attention(problem);
  }
  if (rem_state_out) *rem_state_out = attn.rem_state;
  Tensor o = attn.out;
  o = o.permute({0, 2, 1, 3}).reshape({B, Lq, H * D});
  Tensor out = dropout(o_net->forward(o), cfg.dropout, is_training(), gen);
  return cfg.pre_lnorm ? add(h, out) : layer_norm->forward(add(h, out));
}

// ---- feed-forward ----

PositionwiseFF::PositionwiseFF(const XLConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  auto core = register_module("CoreNet", holder());
  fc1 = core->register_module("0", std::make_shared<nn::Linear>(c.d_model, c.d_inner, true, dt, g));
  fc2 = core->register_module("3", std::make_shared<nn::Linear>(c.d_inner, c.d_model, true, dt, g));
  layer_norm = register_module("layer_norm", std::make_shared<nn::LayerNorm>(c.d_model, 1e-5, dt));
}

Tensor PositionwiseFF::forward(const Tensor& x) const {
  const bool tr = is_training();
  auto block = [this, tr](const Tensor& x) {
    auto core = [&](const Tensor& in) {
      Tensor y = relu_dropout(fc1->forward(in), cfg.dropout, tr, gen);
      return dropout(fc2->forward(y), cfg.dropout, tr, gen);
    };
    return cfg.pre_lnorm ? add(core(layer_norm->forward(x)), x) : layer_norm->forward(add(x, core(x)));
  };
  if (cfg.recompute_ff && tr)  // the block's dropout draws come from gen: the same when it runs again
    return checkpoint([block](const std::vector<Tensor>& in) { return std::vector<Tensor>{block(in[0])}; },
                      {x}, gen)[0];
  return block(x);
}

XLLayer::XLLayer(const XLConfig& c, DType dt, Generator* g) {
  dec_attn = register_module("dec_attn", std::make_shared<RelPartialAttention>(c, dt, g));
  pos_ff = register_module("pos_ff", std::make_shared<PositionwiseFF>(c, dt, g));
}

// ---- the model ----

TransformerXL::TransformerXL(const XLConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  cfg.validate();
  const int64_t H = c.n_head, D = head_dim(c);
  if (c.n_in > 0) {
    in_proj = register_module("in_proj", std::make_shared<nn::Linear>(c.n_in, c.d_model, true, dt, g));
  } else if (c.adaptive()) {
    word_emb = register_module("word_emb", std::make_shared<nn::AdaptiveEmbedding>(c.adaptive_options(), dt, g));
  } else {
    auto word_emb = register_module("word_emb", holder());
    auto emb_layers = word_emb->register_module("emb_layers", holder());
    embedding = emb_layers->register_module("0", std::make_shared<nn::Embedding>(c.n_token, c.d_model, -1, dt, g));
  }
  r_w_bias = register_parameter("r_w_bias", Tensor::zeros({H, D}, dt));
  r_r_bias = register_parameter("r_r_bias", Tensor::zeros({H, D}, dt));
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) layers->push_back(std::make_shared<XLLayer>(c, dt, g));
  if (c.n_out > 0) {
    out_head = register_module("out_head", std::make_shared<nn::Linear>(c.d_model, c.n_out, true, dt, g));
  } else if (c.adaptive()) {
    crit = register_module("crit", std::make_shared<nn::ProjectedAdaptiveLogSoftmax>(
                                       c.adaptive_options(), dt, g, word_emb.get(), c.tie_weight, c.tie_projs));
  } else {
    auto crit = register_module("crit", holder());
    auto out_layers = crit->register_module("out_layers", holder());
    auto out0 = out_layers->register_module("0", holder());
    out_bias = out0->register_parameter("bias", Tensor::zeros({c.n_token}, dt));
  }
  reset_parameters(g);
}

void TransformerXL::reset_parameters(Generator* g) {
  // docs/math.md#relative-attention-and-rel-shift / the official weights_init: N(0, init_std) weights, zero biases,
  // LayerNorm weights N(1, init_std), r_w_bias and r_r_bias N(0, init_std), the
  // adaptive projections N(0, proj_init_std) and cluster weights N(0, init_std).
  NoGradGuard ng;
  const double s = cfg.init_std;
  for (auto& kv : named_parameters()) {
    const std::string& n = kv.first;
    Tensor& t = kv.second;
    const bool is_ln = n.find("layer_norm.") != std::string::npos;
    const bool is_bias = n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
    if (is_ln && !is_bias) nn::init::normal_(t, 1.0, s, g);
    else if (is_bias) nn::init::zeros_(t);
    else if (n.find(".rem.") != std::string::npos) continue;  // docs/math.md#initialisation-and-checkpoint-names init, done by RemParameters
    else if (n.find("emb_projs.") != std::string::npos || n.find("out_projs.") != std::string::npos)
      nn::init::normal_(t, 0.0, cfg.proj_init_std, g);
    else nn::init::normal_(t, 0.0, s, g);
  }
}

Tensor TransformerXL::loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits, targets);
}

TransformerXL::Output TransformerXL::forward(const Tensor& ids, const XLState& state, const Tensor& targets) const {
  if (in_proj)
    REMORA_CHECK(ids.defined() && is_floating(ids.dtype()) && ids.dim() == 3 && ids.size(2) == cfg.n_in,
                 "transformer_xl: inputs must be floating [B, L, " << cfg.n_in << "], got "
                                                                   << (ids.defined() ? ids.str() : "undefined"));
  else
    REMORA_CHECK(ids.defined() && ids.dtype() == DType::i64 && ids.dim() == 2,
                 "transformer_xl: ids must be i64 [B, L], got " << (ids.defined() ? ids.str() : "undefined"));
  const int64_t B = ids.size(0), Lq = ids.size(1), d = cfg.d_model, nl = cfg.n_layer;
  const bool has_mem = !state.mems.empty();
  REMORA_CHECK(!has_mem || int64_t(state.mems.size()) == nl,
               "transformer_xl: expected " << nl << " memories, got " << state.mems.size());
  const int64_t M = has_mem ? state.mems[0].size(1) : 0, Lk = M + Lq;
  for (const Tensor& m : state.mems)
    REMORA_CHECK(m.dim() == 3 && m.size(0) == B && m.size(1) == M && m.size(2) == d,
                 "transformer_xl: memory " << shape_str(m.shape()) << " does not fit [B, M, d] = ["
                                           << B << ", " << M << ", " << d << "]");
  const DType dt = r_w_bias.dtype();
  const Device dev = r_w_bias.device();
  const bool tr = is_training();

  Tensor h = in_proj    ? in_proj->forward(ids.to(r_w_bias.dtype()))
             : word_emb ? word_emb->forward(ids)  // times sqrt(d) inside
                        : affine(embedding->forward(ids), std::sqrt(double(d)), 0);  // [B, L, d]

  // Mask [Lq, Lk]: -inf where j > M + i, and with same_length where j <= M + i - mem_len.
  // The fused positional path passes it as numbers instead (no [Lq, Lk] tensor).
  Tensor mask;
  if (!cfg.fused_position) {
    const double ninf = -std::numeric_limits<double>::infinity();
    Tensor blocked = triu(Tensor::ones({Lq, Lk}, DType::i64, dev), 1 + M);
    if (cfg.same_length && Lk - cfg.mem_len > 0)
      blocked = add(blocked, tril(Tensor::ones({Lq, Lk}, DType::i64, dev), M - cfg.mem_len));
    mask = masked_fill(Tensor::zeros({Lq, Lk}, dt, dev), blocked, ninf);
  }

  // Positional embeddings R [Lk, d] for distances Lk-1 .. 0 (clamped).
  Tensor pos = Tensor::arange(double(Lk - 1), -1.0, -1.0, DType::f64, dev);
  if (cfg.clamp_len > 0) pos = minimum(pos, Tensor::scalar(double(cfg.clamp_len), DType::f64, dev));
  Tensor inv_freq = exp(affine(Tensor::arange(0.0, double(d), 2.0, DType::f64, dev), -std::log(10000.0) / double(d), 0));
  Tensor arg = mul(pos.reshape({Lk, 1}), inv_freq.reshape({1, -1}));  // [Lk, d/2]
  Tensor R = cat({sin(arg), cos(arg)}, 1).to(dt);

  h = dropout(h, cfg.dropout, tr, gen);
  R = dropout(R, cfg.dropout, tr, gen);

  Output out;
  out.layer_inputs.push_back(h);
  const bool carry = cfg.carry && cfg.attention == "rsa";
  for (int64_t l = 0; l < nl; ++l) {
    auto layer = layers->at<XLLayer>(size_t(l));
    Tensor mem = has_mem ? state.mems[size_t(l)] : Tensor();
    Tensor rs_in = carry && size_t(l) < state.rem_states.size() ? state.rem_states[size_t(l)] : Tensor();
    Tensor rs_out;
    h = layer->dec_attn->forward(h, R, mem, r_w_bias, r_r_bias, mask, rs_in, carry ? &rs_out : nullptr);
    h = layer->pos_ff->forward(h);
    out.layer_inputs.push_back(h);
    if (carry) out.state.rem_states.push_back(rs_out);
  }
  // New memories: the last mem_len rows of [mem; layer input], detached.
  if (cfg.mem_len > 0) {
    const int64_t T = M + Lq, beg = std::max<int64_t>(0, T - cfg.mem_len);
    for (int64_t l = 0; l < nl; ++l) {
      Tensor x = out.layer_inputs[size_t(l)].detach();
      // Rows of x alone need no concatenation (and when they are all of x, the
      // memory shares x's storage: no copy).
      Tensor full = beg >= M ? x : cat({state.mems[size_t(l)], x}, 1);
      const int64_t off = beg >= M ? M : 0;
      out.state.mems.push_back(full.slice(1, beg - off, T - off).contiguous());
    }
  }
  out.hidden = h;
  Tensor core = dropout(h, cfg.dropout, tr, gen);
  if (crit) {
    const Tensor flat = core.reshape({B * Lq, d});
    if (targets.defined()) {
      REMORA_CHECK(targets.dtype() == DType::i64 && targets.dim() == 2 && targets.size(0) == B && targets.size(1) == Lq,
                   "transformer_xl: targets must be i64 [" << B << ", " << Lq << "], got " << targets.str());
      out.nll = crit->nll(flat, targets.reshape({B * Lq})).reshape({B, Lq});
    } else {
      out.logits = crit->log_prob(flat).reshape({B, Lq, cfg.n_token});
    }
    return out;
  }
  out.logits = out_head ? out_head->forward(core)
                        : add(matmul(core, embedding->weight.t()), out_bias);  // tied weights [B, L, V]
  return out;
}

}  // namespace models
}  // namespace remora
