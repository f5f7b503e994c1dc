// SPDX-License-Identifier: BSD-3-Clause
// Recurrence Encoding Matrices, the gate, the O(L) scan form of P·V, and RSA
// attention (docs/math.md: #recurrence-encoding-matrices-rem, #the-gate-op,
// #the-scan-form-applying-a-rem-in-ol, #rsa-attention-and-the-gate).
//
// Letters: B batch, H heads, Hr REM heads, Lq query length, Lk key length,
// M = Lk - Lq memory length, D head width. Query row i sits at absolute
// position M + i, key column j at j, and the distance is n = M + i - j.
#pragma once
#include <vector>

#include "../core/tensor.h"

namespace remora {

// Which REM heads a layer has, in the order of docs/math.md#kinds-of-rem-head-and-their-parameters: regular, cyclic pairs (cos, sin),
// dilated regular, dilated cyclic pairs (cos, sin).
struct RemSpec {
  int64_t regular = 0;
  int64_t cyclic = 0;            // pairs: 2 heads each
  int64_t dilated_regular = 0;
  int64_t dilated_cyclic = 0;    // pairs: 2 heads each
  std::vector<int64_t> dilations;  // one per dilated head or pair, each >= 2
  bool masked = true;            // causal (n >= 1) or bidirectional (|n| >= 1)
  int64_t max_distance = 0;      // f(n) = 0 for |n| > max_distance; 0 = no limit

  int64_t num_heads() const { return regular + 2 * cyclic + dilated_regular + 2 * dilated_cyclic; }
  int64_t num_eta() const { return regular + dilated_regular; }     // size of rem.eta
  int64_t num_cyclic() const { return cyclic + dilated_cyclic; }    // size of rem.nu, rem.theta
  // Errors name the bad field: counts < 0, wrong dilations length, dilation < 2.
  void validate(const char* op) const;
};

// Per-head view of a RemSpec, as the kernels see it.
enum class RemKind : int8_t { regular = 0, cos = 1, sin = 2 };
struct RemHead {
  RemKind kind;
  int64_t dilation;  // 1 when not dilated
  int64_t param;     // index into eta (regular) or nu/theta (cos, sin)
};
std::vector<RemHead> rem_heads(const RemSpec& spec);

// The dense REM, the reference: eta [num_eta], nu/theta [num_cyclic] ->
// P [Hr, Lq, Lk]; with key_padding [B, Lk] (nonzero = padded) -> [B, Hr, Lq, Lk]
// with padded columns zeroed. Differentiable in eta, nu and theta.
Tensor rem_matrix(const RemSpec& spec, const Tensor& eta, const Tensor& nu, const Tensor& theta,
                  int64_t Lq, int64_t Lk, const Tensor& key_padding = Tensor());

// P·V without building P: an O(Lk·D) scan per (batch, head).
//   v [B, Hr, Lk, D] -> [B, Hr, Lq, D] (rows M..Lk-1 of P·V).
// key_padding [B, Lk] zeroes padded keys. state_in/state_out carry the scan
// across segments (masked, no max_distance): [B, Hr, dmax, 2, D] holding
// (y + v) at the last dmax key positions, as (real, imaginary) parts; dmax is
// the largest dilation (1 without dilated heads). Differentiable in v, eta,
// nu, theta and state_in. With Lk = 0 (an empty segment) the result is empty
// and *state_out = state_in (zeros without one).
//
// A carried state and max_distance do not go together, and are rejected with
// an Error here and in every backend's kernel front (backends/kernels.cpp):
// the state summarises the whole past as one complex number per lane, but a
// truncated REM must forget each key exactly max_distance steps after it, so
// it would need the last max_distance keys themselves, not a summary. (docs/math.md#the-scan-form-applying-a-rem-in-ol
// should say: "the carried state is defined for the masked, untruncated REM
// only; a truncated REM sees the keys of the current window".) The truncated
// scan itself feeds s_t − ρ^(K+1) s_(t−δ(K+1)) into the recurrence on the CPU
// (no cancellation at |λ| → 1); the CUDA scan subtracts ρ^K z_(t−δK) after it.
Tensor rem_apply(const RemSpec& spec, const Tensor& eta, const Tensor& nu, const Tensor& theta,
                 const Tensor& v, int64_t Lq, const Tensor& key_padding = Tensor(),
                 const Tensor& state_in = Tensor(), Tensor* state_out = nullptr);

// gate(a, b, mu) = (1 - sigmoid(mu)) * a + sigmoid(mu) * b, mu broadcast.
Tensor gate(const Tensor& a, const Tensor& b, const Tensor& mu);

// RSA attention (docs/math.md#rsa-attention-and-the-gate): q [B, H, Lq, D], k, v [B, H, Lk, D]. Heads 0..Hr-1
// mix softmax attention with the REM through the gate; the rest are plain.
//   mu: [Hr] (one per REM head) or [1] (shared by the layer).
//   attn_mask: an additive score bias broadcasting to [B, H, Lq, Lk] (0 or -inf
//     for a mask; may be undefined). It is differentiable, so a model can pass
//     learned terms such as Transformer-XL's positional scores through it.
//   key_padding: [B, Lk] nonzero = padded: masked in A and zeroed in P.
// One autograd node: the REM part runs through the scan, so no Lq x Lk tensor
// for P is ever stored; dropout (train only) applies to A before the mix.
// A fully masked query row (every score -inf, from attn_mask and key_padding
// together) gets A = 0 there, not softmax's NaN, and passes no gradient back
// through A (FlashAttention-2's rule; the fused CUDA kernels and the reference
// follow it too). Its REM heads still mix in the REM part: O = gs · Y.
struct RsaOptions {
  double scale = 0;        // 0 means 1 / sqrt(D)
  double dropout = 0;
  bool train = false;
  Generator* gen = nullptr;
  // Carry mode (docs/math.md#the-scan-form-applying-a-rem-in-ol): the REM part scans only the last Lq keys (the
  // current segment), starting from rem_state_in (undefined = zeros), and
  // writes the end state to *rem_state_out (detached, like XL memory).
  bool carry = false;
  Tensor rem_state_in;
  Tensor* rem_state_out = nullptr;
  // Transformer-XL's relative-position term (docs/math.md#relative-attention-and-rel-shift): with pos_q [B, H, Lq, D]
  // (XL's q + r_r_bias) and pos_r [H, Lk, D] (the projected positional
  // embeddings, row c for the relative distance Lk - 1 - c), the scores gain
  //   scale * rel_shift(pos_q pos_r^T)[b, h, i, j]
  // (ops.h's rel_shift: pos_q[i] . pos_r[j + Lq - 1 - i], nothing where that
  // row is past Lk). Both are differentiable; both undefined or both set, and
  // Lq <= Lk. A device whose fused kernels take it (the CPU's) computes the
  // term tile by tile from the band of pos_r rows each tile reaches, so no
  // [B, H, Lq, Lk] tensor exists in forward or backward; elsewhere it is
  // composed with rel_shift into an additive bias (the reference).
  Tensor pos_q, pos_r;
  // A causal mask given as numbers instead of a tensor (added to attn_mask):
  // query i sees keys j <= i + (Lk - Lq), and, when window >= 0, only keys
  // j > i + (Lk - Lq) - window (Transformer-XL's same_length with
  // window = mem_len). Needs Lq <= Lk.
  bool causal = false;
  int64_t window = -1;
};
Tensor rsa_attention(const Tensor& q, const Tensor& k, const Tensor& v, const RemSpec& spec,
                     const Tensor& eta, const Tensor& nu, const Tensor& theta, const Tensor& mu,
                     const Tensor& attn_mask = Tensor(), const Tensor& key_padding = Tensor(),
                     const RsaOptions& opt = {});
// The REM of one attention layer as rsa_attention takes it: the spec and its
// four tensors (undefined where the spec has none of that kind; all undefined
// and an empty spec for plain softmax attention).
struct RemWeights {
  RemSpec spec;
  Tensor eta, nu, theta, mu;
};
// rsa_attention with the REM in one argument (the form models use).
Tensor rsa_attention(const Tensor& q, const Tensor& k, const Tensor& v, const RemWeights& rem,
                     const Tensor& attn_mask = Tensor(), const Tensor& key_padding = Tensor(),
                     const RsaOptions& opt = {});
// The same mathematics composed from primitive ops (the reference).
Tensor rsa_attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                               const RemSpec& spec, const Tensor& eta, const Tensor& nu,
                               const Tensor& theta, const Tensor& mu,
                               const Tensor& attn_mask = Tensor(),
                               const Tensor& key_padding = Tensor(), const RsaOptions& opt = {});

}  // namespace remora
