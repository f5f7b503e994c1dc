// SPDX-License-Identifier: BSD-3-Clause
// The cases of the REM ops (rem_matrix, rem_apply), the gate and RSA
// attention (fused entry and composed reference): small ones are float64
// gradient-checked; the kernel edges (tile-unfriendly widths, long keys,
// B·H > 65,535, masked rows, all-padded sequences, empty scans) are
// backend-only and compared across devices by [backends].
#include <algorithm>
#include <limits>

#include "../core/autocast.h"
#include "../ops/ops.h"
#include "../ops/rem.h"
#include "cases.h"

namespace remora::cases {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

RemSpec all_kinds(bool masked, int64_t max_distance = 0) {
  RemSpec s;
  s.regular = 1;
  s.cyclic = 1;
  s.dilated_regular = 1;
  s.dilated_cyclic = 1;
  s.dilations = {2, 3};
  s.masked = masked;
  s.max_distance = max_distance;
  return s;  // 6 heads: reg, cos, sin, reg/2, cos/3, sin/3
}

RemSpec spec(int64_t reg, int64_t cyc, int64_t dreg, int64_t dcyc, std::vector<int64_t> dil,
             bool masked = true) {
  RemSpec s;
  s.regular = reg;
  s.cyclic = cyc;
  s.dilated_regular = dreg;
  s.dilated_cyclic = dcyc;
  s.dilations = std::move(dil);
  s.masked = masked;
  return s;
}

// eta in [lo, hi] (negative lambda too), nu in [-1, 2], theta in all quadrants.
Inputs rem_params(Maker& m, const RemSpec& s, double eta_lo = -1.5, double eta_hi = 1.5) {
  return Inputs{m.leaf({s.num_eta()}, eta_lo, eta_hi), m.leaf({s.num_cyclic()}, -1.0, 2.0),
                m.leaf({s.num_cyclic()}, -3.1, 3.1)};
}

// Causal over absolute positions: key j is visible to row i when j <= M + i.
Tensor causal_mask(int64_t Lq, int64_t Lk) {
  std::vector<double> v(size_t(Lq * Lk), 0.0);
  for (int64_t i = 0; i < Lq; ++i)
    for (int64_t j = 0; j < Lk; ++j)
      if (j > Lk - Lq + i) v[size_t(i * Lk + j)] = -kInf;
  return Tensor::from_vector(v, {Lq, Lk}, DType::f64);
}

void rem_cases() {
  add("rem_matrix", "masked_memory", [](Maker& m) { return rem_params(m, all_kinds(true)); },
      [](const Inputs& x) { return rem_matrix(all_kinds(true), x[0], x[1], x[2], 4, 7); });
  add("rem_matrix", "unmasked_padding_max_distance",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(false, 4));
        in.push_back(m.ids({0, 0, 1, 0, 0, 0, 0, 0, 0, 1}, {2, 5}));
        return in;
      },
      [](const Inputs& x) { return rem_matrix(all_kinds(false, 4), x[0], x[1], x[2], 5, 5, x[3]); });
  add("rem_apply", "masked_memory",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(true));
        in.push_back(m.strided_leaf({2, 6, 7, 2}));
        return in;
      },
      [](const Inputs& x) { return rem_apply(all_kinds(true), x[0], x[1], x[2], x[3], 4); });
  add("rem_apply", "unmasked_padding_max_distance",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(false, 4));
        in.push_back(m.leaf({2, 6, 6, 2}));
        in.push_back(m.ids({0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0}, {2, 6}));
        return in;
      },
      [](const Inputs& x) { return rem_apply(all_kinds(false, 4), x[0], x[1], x[2], x[3], 6, x[4]); });
  add("rem_apply", "carried_state",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(true));
        in.push_back(m.leaf({1, 6, 5, 2}));
        in.push_back(m.leaf({1, 6, 3, 2, 2}));  // dmax = 3
        return in;
      },
      [](const Inputs& x) {
        Tensor so;
        return rem_apply(all_kinds(true), x[0], x[1], x[2], x[3], 5, Tensor(), x[4], &so);
      });
  // A carried state longer than the segment: dilation 5, 3 new keys (the scan
  // reads state rows for every step).
  // (state_out is detached, like XL memory: the Jacobian case checks y, the
  // backend-only twin compares state_out across devices too.)
  for (bool with_state_out : {false, true})
    add("rem_apply", with_state_out ? "state_longer_than_segment_state_out" : "state_longer_than_segment",
        [](Maker& m) {
          const RemSpec s = spec(0, 0, 1, 1, {5, 4});
          Inputs in = rem_params(m, s);
          in.push_back(m.leaf({2, 3, 3, 2}));
          in.push_back(m.leaf({2, 3, 5, 2, 2}));  // dmax = 5
          return in;
        },
        [with_state_out](const Inputs& x) {
          Tensor so;
          Tensor y = rem_apply(spec(0, 0, 1, 1, {5, 4}), x[0], x[1], x[2], x[3], 3, Tensor(), x[4], &so);
          return with_state_out ? cat({y.reshape({-1}), so.reshape({-1})}, 0) : y;
        },
        {}, with_state_out);
  // Lk = 0 with a state: nothing to scan, the state passes through unchanged
  // (the carried state_out is written on every path).
  add("rem_apply", "empty_segment_with_state",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(true));
        in.push_back(m.leaf({2, 6, 0, 2}));
        in.push_back(m.leaf({2, 6, 3, 2, 2}));
        return in;
      },
      [](const Inputs& x) {
        Tensor so;
        Tensor y = rem_apply(all_kinds(true), x[0], x[1], x[2], x[3], 0, Tensor(), x[4], &so);
        REMORA_CHECK(so.defined(), "rem_apply with Lk = 0 wrote no state_out");
        return cat({y.reshape({-1}), so.reshape({-1})}, 0);
      },
      {}, /*backend_only=*/true);
  // B·Hr = 11,000 · 6 = 66,000 > 65,535 (a grid.y limit), short scans.
  add("rem_apply", "batch_heads_over_65535",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(true));
        in.push_back(m.leaf({11000, 6, 3, 2}));
        return in;
      },
      [](const Inputs& x) { return rem_apply(all_kinds(true), x[0], x[1], x[2], x[3], 3); }, {}, true);
  // Large |eta| (|lambda| -> 1 after the tanh) over a long scan: the decay
  // barely damps, the sum grows, the cancellation of a truncated scan shows.
  add("rem_apply", "large_eta_long_scan",
      [](Maker& m) {
        const RemSpec s = spec(2, 1, 0, 0, {});
        Inputs in = rem_params(m, s, 4.0, 6.0);
        in[0] = Maker::grad_leaf(m.floats({5.0, -4.5}, {2}));
        in.push_back(m.leaf({1, 4, 3000, 4}));
        return in;
      },
      [](const Inputs& x) { return rem_apply(spec(2, 1, 0, 0, {}), x[0], x[1], x[2], x[3], 3000); }, {},
      true);
  add("rem_matrix", "large_eta_long",
      [](Maker& m) {
        Inputs in = rem_params(m, spec(1, 1, 0, 0, {}));
        in[0] = Maker::grad_leaf(m.floats({-5.5}, {1}));
        return in;
      },
      [](const Inputs& x) { return rem_matrix(spec(1, 1, 0, 0, {}), x[0], x[1], x[2], 300, 1200); }, {}, true);
  // Long enough for many chunks of the chunked scan (32 steps per residue per
  // chunk): truncation with memory, and bidirectional with padding.
  add("rem_apply", "chunked_max_distance_memory",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(true, 40));
        in.push_back(m.leaf({2, 6, 140, 19}));
        return in;
      },
      [](const Inputs& x) { return rem_apply(all_kinds(true, 40), x[0], x[1], x[2], x[3], 120); }, {}, true);
  add("rem_apply", "chunked_unmasked_padding",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(false, 33));
        in.push_back(m.leaf({2, 6, 130, 19}));
        std::vector<int64_t> p(260, 0);
        for (int64_t j = 121; j < 130; ++j) p[size_t(130 + j)] = 1;
        in.push_back(m.ids(p, {2, 130}));
        return in;
      },
      [](const Inputs& x) { return rem_apply(all_kinds(false, 33), x[0], x[1], x[2], x[3], 130, x[4]); }, {},
      true);
  add("rem_matrix", "chunked_memory_padding",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(false));
        std::vector<int64_t> p(460, 0);
        for (int64_t j = 200; j < 230; ++j) p[size_t(j)] = 1;
        in.push_back(m.ids(p, {2, 230}));
        return in;
      },
      [](const Inputs& x) { return rem_matrix(all_kinds(false), x[0], x[1], x[2], 100, 230, x[3]); }, {}, true);
  add("rem_apply", "chunked_carried_state",
      [](Maker& m) {
        Inputs in = rem_params(m, all_kinds(true));
        in.push_back(m.leaf({2, 6, 97, 8}));
        in.push_back(m.leaf({2, 6, 3, 2, 8}));
        return in;
      },
      [](const Inputs& x) {
        Tensor so;
        Tensor y = rem_apply(all_kinds(true), x[0], x[1], x[2], x[3], 97, Tensor(), x[4], &so);
        return cat({y.reshape({-1}), so.reshape({-1})}, 0);
      },
      {}, true);
  add("gate", "broadcast_mu",
      [](Maker& m) { return Inputs{m.leaf({2, 3, 4}), m.leaf({2, 3, 4}), m.leaf({3, 1})}; },
      [](const Inputs& x) { return gate(x[0], x[1], x[2]); });
}

// One RSA case: q, k, v [B, H, L, D], the REM parameters, mu, then the
// optional score bias and key padding as inputs.
enum class Bias { none, causal, learned, shared_learned, over_lq, masked_rows, causal_top_left, shared_key_padding };
enum class Pad { none, some, whole_sequence };
struct Rsa {
  RemSpec spec;
  int64_t B, H, Lq, Lk, D, n_mu;
  Bias bias = Bias::none;
  Pad pad = Pad::none;
  double dropout = 0;
  bool carry = false;
  bool reference = false;  // rsa_attention_reference instead of the fused entry
  bool state_out = false;  // carry: append the (detached) end state to the output
  bool gate_scale = false;  // the gate sigmoid(mu) * gate_scale (RemWeights::gate_scale), an input last
};

Inputs rsa_inputs(Maker& m, const Rsa& r) {
  Inputs in{m.leaf({r.B, r.H, r.Lq, r.D}), m.leaf({r.B, r.H, r.Lk, r.D}), m.leaf({r.B, r.H, r.Lk, r.D})};
  if (r.spec.num_heads() == 0) {
    for (int i = 0; i < 4; ++i) in.push_back(Tensor());  // plain heads only: no REM parameters, no mu
  } else {
    for (Tensor& t : rem_params(m, r.spec)) in.push_back(t);
    in.push_back(m.leaf({r.n_mu}, -3, 3));
  }
  switch (r.bias) {
    case Bias::none: in.push_back(Tensor()); break;
    case Bias::causal: in.push_back(m.on(causal_mask(r.Lq, r.Lk))); break;
    case Bias::learned: in.push_back(m.leaf({r.B, r.H, r.Lq, r.Lk})); break;
    case Bias::shared_learned: in.push_back(m.leaf({r.Lq, r.Lk})); break;   // one [Lq, Lk] for all
    case Bias::over_lq: in.push_back(m.leaf({r.H, 1, r.Lk})); break;        // broadcast over Lq
    case Bias::causal_top_left: {  // key j visible to row i when j <= i (no memory offset)
      std::vector<double> v(size_t(r.Lq * r.Lk), 0.0);
      for (int64_t i = 0; i < r.Lq; ++i)
        for (int64_t j = i + 1; j < r.Lk; ++j) v[size_t(i * r.Lk + j)] = -kInf;
      in.push_back(m.on(Tensor::from_vector(v, {r.Lq, r.Lk}, DType::f64)));
      break;
    }
    case Bias::shared_key_padding: {  // one [Lq, Lk] bias: 0, and -inf on keys 64 .. Lk-1 of every row
      std::vector<double> v(size_t(r.Lq * r.Lk), 0.0);
      for (int64_t i = 0; i < r.Lq; ++i)
        for (int64_t j = std::min<int64_t>(64, r.Lk); j < r.Lk; ++j) v[size_t(i * r.Lk + j)] = -kInf;
      in.push_back(m.on(Tensor::from_vector(v, {r.Lq, r.Lk}, DType::f64)));
      break;
    }
    case Bias::masked_rows: {  // causal, plus rows 0 and Lq-1 fully masked
      Tensor c = causal_mask(r.Lq, r.Lk);
      c.select(0, 0).fill_(-kInf);
      c.select(0, r.Lq - 1).fill_(-kInf);
      in.push_back(m.on(c));
      break;
    }
  }
  if (r.pad == Pad::none) {
    in.push_back(Tensor());
  } else {
    std::vector<int64_t> p(size_t(r.B * r.Lk), 0);
    for (int64_t j = r.Lk - std::max<int64_t>(1, r.Lk / 4); j < r.Lk; ++j) p[size_t(j)] = 1;  // row 0: tail
    if (r.pad == Pad::whole_sequence)
      for (int64_t j = 0; j < r.Lk; ++j) p[size_t((r.B - 1) * r.Lk + j)] = 1;  // last row: all padded
    in.push_back(m.ids(p, {r.B, r.Lk}));
  }
  if (r.carry) {
    int64_t dmax = 1;
    for (int64_t d : r.spec.dilations) dmax = std::max(dmax, d);
    in.push_back(m.value({r.B, r.spec.num_heads(), dmax, 2, r.D}));
  }
  if (r.gate_scale) in.push_back(m.leaf({r.n_mu}, -1, 1));
  return in;
}

GradFn rsa_fn(const Rsa& r) {
  return [r](const Inputs& x) {
    Generator d(99);  // the same dropout mask on every call and every device
    RsaOptions o;
    o.dropout = r.dropout;
    o.train = r.dropout > 0;
    o.gen = &d;
    if (r.carry) {
      o.carry = true;
      o.rem_state_in = x[9];
    }
    const Tensor gate_scale = r.gate_scale ? x.back() : Tensor();
    const RsaProblem p{x[0], x[1], x[2], RemWeights{r.spec, x[3], x[4], x[5], x[6], gate_scale}, x[7], x[8], o};
    const RsaResult res = r.reference ? rsa_attention_reference(p) : rsa_attention(p);
    // The end state is detached: compared across devices, not in the Jacobian.
    if (r.carry && r.state_out) return cat({res.out.reshape({-1}), res.rem_state.reshape({-1})}, 0);
    return res.out;
  };
}

void add_rsa(const std::string& variant, Rsa r, bool backend_only = false) {
  r.state_out = backend_only;
  const char* op = r.reference ? "rsa_attention_reference" : "rsa_attention";
  add(op, variant, [r](Maker& m) { return rsa_inputs(m, r); }, rsa_fn(r), {}, backend_only);
}

void rsa_cases() {
  // Float64-checked (small).
  for (bool ref : {false, true}) {
    add_rsa("causal_memory", {all_kinds(true), 1, 7, 3, 5, 2, 6, Bias::causal, Pad::none, 0, false, ref});
    add_rsa("learned_score_bias", {all_kinds(true), 1, 6, 3, 4, 2, 6, Bias::learned, Pad::none, 0, false, ref});
    add_rsa("padding_dropout_layer_gate",
            {all_kinds(false), 2, 6, 4, 4, 2, 1, Bias::none, Pad::some, 0.25, false, ref});
    add_rsa("shared_lq_lk_bias", {all_kinds(true), 2, 7, 3, 5, 2, 6, Bias::shared_learned, Pad::none, 0, false, ref});
    add_rsa("bias_over_lq", {all_kinds(true), 2, 7, 3, 5, 3, 6, Bias::over_lq, Pad::none, 0, false, ref});
    add_rsa("single_query_row", {all_kinds(true), 1, 6, 1, 9, 3, 6, Bias::none, Pad::none, 0, false, ref});
    // The gate scaled by a learned gate_scale (RemInit::closed_gate), per head and per layer.
    add_rsa("gate_scale", {all_kinds(true), 1, 6, 3, 5, 2, 6, Bias::causal, Pad::none, 0, false, ref, false, true});
    add_rsa("gate_scale_layer_padding",
            {all_kinds(false), 2, 6, 4, 4, 2, 1, Bias::none, Pad::some, 0, false, ref, false, true});
    // Plain heads only with more queries than keys (MultiHeadAttention's cross-attention).
    add_rsa("plain_heads_lq_over_lk", {spec(0, 0, 0, 0, {}), 2, 2, 6, 4, 3, 0, Bias::none, Pad::some, 0, false, ref});
  }
  add_rsa("carry_state", {spec(1, 0, 1, 0, {2}), 1, 3, 3, 6, 2, 2, Bias::causal, Pad::none, 0, true});
  // Backend-only kernel edges (fused entry and composed reference each).
  for (bool ref : {false, true}) {
    const RemSpec s2 = spec(1, 1, 0, 0, {});
    add_rsa("d65_causal", {s2, 2, 4, 70, 70, 65, 3, Bias::causal, Pad::none, 0, false, ref}, true);
    add_rsa("d128_memory", {s2, 1, 4, 40, 90, 128, 3, Bias::causal, Pad::none, 0, false, ref}, true);
    add_rsa("d129_bidirectional", {spec(1, 1, 0, 0, {}, false), 1, 3, 33, 33, 129, 3, Bias::none,
                                   Pad::some, 0, false, ref}, true);
    add_rsa("one_row_lk1500", {s2, 2, 3, 1, 1500, 32, 3, Bias::causal, Pad::none, 0, false, ref}, true);
    add_rsa("lk_under_32", {s2, 2, 3, 5, 17, 16, 3, Bias::causal, Pad::none, 0, false, ref}, true);
    add_rsa("lk4100_memory", {s2, 1, 3, 40, 4100, 64, 3, Bias::causal, Pad::none, 0, false, ref}, true);
    add_rsa("shared_bias_large", {s2, 2, 3, 37, 75, 64, 3, Bias::shared_learned, Pad::none, 0, false, ref}, true);
    add_rsa("bias_over_lq_large", {s2, 2, 3, 37, 75, 64, 3, Bias::over_lq, Pad::none, 0, false, ref}, true);
    add_rsa("dropout_padding", {spec(1, 1, 0, 0, {}, false), 2, 3, 45, 45, 32, 3, Bias::none, Pad::some, 0.3,
                                false, ref}, true);
    // Policy: a row with no visible key outputs 0 and gets no
    // gradient, on every path. Written as the cases that must agree.
    add_rsa("fully_masked_rows", {s2, 2, 3, 9, 12, 16, 3, Bias::masked_rows, Pad::none, 0, false, ref}, true);
    add_rsa("all_padded_sequence", {spec(1, 1, 0, 0, {}, false), 2, 3, 8, 8, 16, 3, Bias::none,
                                    Pad::whole_sequence, 0, false, ref}, true);
    add_rsa("batch_heads_over_65535", {spec(1, 0, 0, 0, {}), 2, 32800, 2, 3, 2, 1, Bias::causal, Pad::none, 0,
                                       false, ref}, true);
  }
  // Plain heads only (Hr = 0), and D = 96 (the 128-wide fused kernel, partly filled).
  add_rsa("plain_heads_only", {spec(0, 0, 0, 0, {}), 2, 2, 37, 37, 8, 0, Bias::causal}, true);
  add_rsa("d96_unmasked", {spec(1, 0, 1, 0, {2}, false), 2, 4, 45, 45, 96, 2, Bias::none}, true);
  add_rsa("carry_long", {spec(1, 1, 1, 0, {3}), 2, 4, 50, 100, 64, 4, Bias::causal, Pad::none, 0, true}, true);
  // The tensor-core FlashAttention kernels (f32 with TF32 on, D = 64 and 128;
  // [backends]' TF32 rerun): each feature they must match the reference on,
  // at lengths that leave partial 64-row blocks and 32-key tiles.
  {
    const RemSpec s2 = spec(1, 1, 0, 0, {});
    const RemSpec s2u = spec(1, 1, 0, 0, {}, false);
    add_rsa("flash_d64_dropout_padding", {s2u, 2, 3, 70, 70, 64, 3, Bias::none, Pad::some, 0.2}, true);
    add_rsa("flash_d128_dropout_causal", {s2, 1, 3, 50, 50, 128, 3, Bias::causal, Pad::none, 0.2}, true);
    add_rsa("flash_d128_learned_bias", {s2, 2, 4, 45, 80, 128, 3, Bias::learned}, true);
    add_rsa("flash_d64_masked_rows", {s2, 2, 3, 70, 70, 64, 3, Bias::masked_rows}, true);
    add_rsa("flash_d128_shared_bias_all_padded", {s2u, 2, 3, 66, 66, 128, 3, Bias::shared_learned,
                                                  Pad::whole_sequence}, true);
    add_rsa("flash_d64_plain_heads_memory", {spec(0, 0, 0, 0, {}), 2, 2, 33, 130, 64, 0, Bias::causal}, true);
  }
  // Masks under which a whole 64-row block of the flash kernels runs no tile
  // (fused entry and composed reference each, on every device):
  // - keys 64..127 (and 128, 129) that no query sees: top-left causal with
  //   Lk >= Lq + 64 (the dK/dV pass's blocks 1 and 2 see no query tile);
  // - the same through key padding written into a shared [Lq, Lk] bias
  //   (keys 64..149 are -inf in every row);
  // - a fully masked 64-row query block: bottom-right causal with Lq >= Lk + 64
  //   (rows 0..69 see no key: the forward's and the dQ pass's block 0 run no
  //   tile; plain heads, as REM needs Lk >= Lq).
  for (bool ref : {false, true}) {
    const RemSpec s2 = spec(1, 1, 0, 0, {});
    add_rsa("flash_d64_keys_no_query_sees",
            {s2, 2, 3, 40, 130, 64, 3, Bias::causal_top_left, Pad::none, 0, false, ref}, true);
    add_rsa("flash_d128_shared_bias_key_padding",
            {s2, 1, 3, 50, 150, 128, 3, Bias::shared_key_padding, Pad::none, 0,
             false, ref}, true);
    add_rsa("flash_d64_masked_query_block",
            {spec(0, 0, 0, 0, {}), 2, 2, 100, 30, 64, 0, Bias::causal, Pad::none, 0, false, ref}, true);
  }
}

// Transformer-XL's positional term through rsa_attention (RsaOptions::pos_q,
// pos_r: inside the fused kernels of the CPU and CUDA) and through
// the reference. Inputs: q, k, v, the REM parameters, mu, pos_q, then the
// positional table (pos_r itself, or with clamp the [H, clamp + 1, D] rows
// it repeats), then the mask tensor when the case has one.
struct XlPos {
  RemSpec spec;
  int64_t B, H, Lq, Lk, D, n_mu;
  bool causal = true;       // the causal mask as numbers (RsaOptions::causal)
  int64_t window = -1;      // same_length: the window of mem_len keys
  bool mask_tensor = false;  // the causal mask as a tensor instead
  int64_t clamp = 0;        // > 0: distances clamped to it (rows of pos_r repeat)
  double dropout = 0;
  bool reference = false;
  bool bf16_autocast = false;  // under AutocastGuard(bf16): CUDA's bf16 tensor-core kernels
};

Inputs xl_pos_inputs(Maker& m, const XlPos& r) {
  Inputs in{m.leaf({r.B, r.H, r.Lq, r.D}), m.leaf({r.B, r.H, r.Lk, r.D}), m.leaf({r.B, r.H, r.Lk, r.D})};
  if (r.spec.num_heads() == 0) {
    for (int i = 0; i < 4; ++i) in.push_back(Tensor());
  } else {
    for (Tensor& t : rem_params(m, r.spec)) in.push_back(t);
    in.push_back(m.leaf({r.n_mu}, -3, 3));
  }
  in.push_back(m.leaf({r.B, r.H, r.Lq, r.D}));
  in.push_back(m.leaf({r.H, r.clamp > 0 ? std::min(r.clamp + 1, r.Lk) : r.Lk, r.D}));
  if (r.mask_tensor) in.push_back(m.on(causal_mask(r.Lq, r.Lk)));
  return in;
}

GradFn xl_pos_fn(const XlPos& r) {
  return [r](const Inputs& x) {
    Generator d(99);
    AutocastGuard precision(r.bf16_autocast ? Precision::bf16 : autocast_precision());
    RsaOptions o;
    o.dropout = r.dropout;
    o.train = r.dropout > 0;
    o.gen = &d;
    o.pos_q = x[7];
    o.pos_r = x[8];
    if (r.clamp > 0) {  // row c holds distance min(Lk - 1 - c, clamp), as XL's clamp_len
      std::vector<int64_t> idx(size_t(r.Lk));
      for (int64_t c = 0; c < r.Lk; ++c) idx[size_t(c)] = std::min(r.Lk - 1 - c, r.clamp);
      Tensor ids = Tensor::from_vector(idx, {r.Lk}, DType::i64).to(x[0].device());
      o.pos_r = index_select(x[8], 1, ids);
    }
    o.causal = r.causal;
    o.window = r.window;
    const Tensor mask = r.mask_tensor ? x[9] : Tensor();
    return r.reference ? rsa_attention_reference(x[0], x[1], x[2], r.spec, x[3], x[4], x[5], x[6], mask,
                                                 Tensor(), o)
                       : rsa_attention(x[0], x[1], x[2], r.spec, x[3], x[4], x[5], x[6], mask, Tensor(), o);
  };
}

void add_xl_pos(const std::string& variant, XlPos r, bool backend_only = false) {
  const char* op = r.reference ? "rsa_attention_reference" : "rsa_attention";
  add(op, variant, [r](Maker& m) { return xl_pos_inputs(m, r); }, xl_pos_fn(r), {}, backend_only);
}

void xl_position_cases() {
  const RemSpec s2 = spec(1, 1, 0, 0, {});  // 3 REM heads: regular, cos, sin
  const RemSpec none = spec(0, 0, 0, 0, {});
  for (bool ref : {false, true}) {
    // Float64-checked. Memory M = Lk - Lq keys before the segment: the
    // positional band of a block straddles the memory / segment boundary.
    XlPos mem{s2, 2, 3, 5, 9, 3, 3};
    mem.reference = ref;
    add_xl_pos("xl_position_memory", mem);
    XlPos plain{none, 1, 2, 4, 4, 2, 0};  // no memory, plain heads
    plain.reference = ref;
    add_xl_pos("xl_position_no_memory", plain);
    XlPos same{s2, 1, 3, 5, 11, 2, 3};  // same_length: a window of mem_len = 6 keys
    same.window = 6;
    same.reference = ref;
    add_xl_pos("xl_position_same_length", same);
    XlPos same_short{none, 1, 2, 6, 8, 2, 0};  // a window shorter than the segment: rows of 2 keys
    same_short.window = 2;
    same_short.reference = ref;
    add_xl_pos("xl_position_window_2", same_short);
    XlPos clamp{s2, 1, 3, 5, 10, 2, 1};  // distances clamped at 3: pos_r repeats its last row
    clamp.clamp = 3;
    clamp.reference = ref;
    add_xl_pos("xl_position_clamp_len", clamp);
    XlPos tensor_mask{s2, 2, 4, 4, 7, 2, 3};  // the causal mask as a tensor, no window
    tensor_mask.causal = false;
    tensor_mask.mask_tensor = true;
    tensor_mask.reference = ref;
    add_xl_pos("xl_position_mask_tensor", tensor_mask);
    XlPos unmasked{none, 1, 2, 3, 6, 2, 0};  // no mask: rows past the band get no term
    unmasked.causal = false;
    unmasked.reference = ref;
    add_xl_pos("xl_position_unmasked", unmasked);
    XlPos drop{s2, 2, 3, 5, 8, 2, 1};
    drop.dropout = 0.25;
    drop.reference = ref;
    add_xl_pos("xl_position_dropout", drop);
    // Several 64-row blocks (the CPU kernel's unit) and a memory of 64 keys:
    // each block's band crosses the boundary at another key.
    XlPos blocks{spec(1, 0, 0, 0, {}), 1, 1, 70, 134, 2, 1};
    blocks.reference = ref;
    add_xl_pos("xl_position_blocks_memory", blocks);
    XlPos blocks_same{none, 1, 1, 67, 131, 2, 0};
    blocks_same.window = 64;
    blocks_same.clamp = 40;
    blocks_same.reference = ref;
    add_xl_pos("xl_position_blocks_same_length_clamp", blocks_same);
  }
  // Backend-only: model-sized heads, partial blocks, long memory.
  for (bool ref : {false, true}) {
    XlPos big{s2, 2, 4, 130, 260, 64, 3};
    big.reference = ref;
    add_xl_pos("xl_position_d64_long", big, true);
    XlPos big_same{s2, 1, 3, 100, 164, 32, 3};
    big_same.window = 64;
    big_same.clamp = 90;
    big_same.dropout = 0.2;
    big_same.reference = ref;
    add_xl_pos("xl_position_d32_same_length_dropout", big_same, true);
  }
  // bf16 autocast (backend-only, as matmul's): on CUDA the tensor-core kernels
  // take the bf16 operands as they are (P and dS rounded to bf16 for their
  // products); the CPU widens them (P and dS in f32). Backward runs outside
  // the guard: it follows the forward's mode.
  XlPos b32{s2, 2, 4, 100, 164, 32, 3};
  b32.window = 64;
  b32.dropout = 0.2;
  b32.bf16_autocast = true;
  add_xl_pos("bf16_autocast_xl_position_d32", b32, true);
  XlPos b64{spec(1, 0, 0, 0, {}), 1, 2, 130, 200, 64, 1};
  b64.bf16_autocast = true;
  add_xl_pos("bf16_autocast_xl_position_d64", b64, true);
}

}  // namespace

void register_attention_cases() {
  rem_cases();
  rsa_cases();
  xl_position_cases();
}

}  // namespace remora::cases
