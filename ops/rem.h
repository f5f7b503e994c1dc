// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Recurrence Encoding Matrices, the gate, the O(L) scan form of P V, and RSA
/// attention (docs/math.md, sections Recurrence Encoding Matrices (REM), The
/// gate op, The scan form: applying a REM in O(L), and RSA attention and the
/// gate).
///
/// Letters: B batch, H heads, Hr REM heads, Lq query length, Lk key length,
/// M = Lk - Lq memory length, D head width. Query row i sits at absolute
/// position M + i, key column j at j, and the distance is n = M + i - j.
///
/// The REM parameters are the raw ones (docs/math.md, section Kinds of REM head
/// and their parameters): eta [num_eta()] with lambda = tanh(eta) for the
/// regular heads, nu and theta [num_cyclic()] with gamma = sigmoid(nu) and the
/// angle theta for the cyclic pairs; a tensor may be undefined where the spec
/// has no head of its kind. They share the values' floating dtype and device.
/// Devices: the CPU and CUDA. Dtypes: f32 and f64; bf16 and f16 inputs are
/// converted to f32 at the op boundary and the result converted back
/// (docs/precision.md).
#pragma once
#include <vector>

#include "../core/tensor.h"

namespace remora {

/// Which REM heads a layer has, in the order of docs/math.md, section Kinds of
/// REM head and their parameters: regular, cyclic pairs (cos, sin), dilated
/// regular, dilated cyclic pairs (cos, sin).
struct RemSpec {
  int64_t regular = 0;           ///< Regular heads, f(n) = lambda^n.
  int64_t cyclic = 0;            ///< Cyclic pairs: 2 heads each (cos, sin).
  int64_t dilated_regular = 0;   ///< Dilated regular heads.
  int64_t dilated_cyclic = 0;    ///< Dilated cyclic pairs: 2 heads each.
  std::vector<int64_t> dilations;  ///< One per dilated head or pair (regular ones first), each >= 2.
  bool masked = true;            ///< Causal (n >= 1) or bidirectional (|n| >= 1).
  int64_t max_distance = 0;      ///< f(n) = 0 for |n| > max_distance; 0 = no limit.

  /// Hr, the number of REM heads (a cyclic pair counts twice).
  int64_t num_heads() const { return regular + 2 * cyclic + dilated_regular + 2 * dilated_cyclic; }
  int64_t num_eta() const { return regular + dilated_regular; }     ///< Size of rem.eta.
  int64_t num_cyclic() const { return cyclic + dilated_cyclic; }    ///< Size of rem.nu, rem.theta.
  /// An Error (prefixed by op) naming the bad field: counts < 0, wrong
  /// dilations length, dilation < 2, max_distance < 0.
  void validate(const char* op) const;
};

/// What a REM head reads of its recurrence.
enum class RemKind : int8_t { regular = 0, cos = 1, sin = 2 };
/// One REM head of a RemSpec, as the kernels see it.
struct RemHead {
  RemKind kind;      ///< regular (lambda^n), or the cos / sin head of a cyclic pair.
  int64_t dilation;  ///< 1 when not dilated.
  int64_t param;     ///< Index into eta (regular) or nu/theta (cos, sin).
};
/// The spec's num_heads() heads in head order.
std::vector<RemHead> rem_heads(const RemSpec& spec);

/// The dense REM, the reference: eta [num_eta], nu/theta [num_cyclic] ->
/// P [Hr, Lq, Lk] (0 <= Lq <= Lk); with key_padding [B, Lk] (nonzero = padded,
/// any dtype) -> [B, Hr, Lq, Lk] with padded columns zeroed. The spec must
/// have heads and at least one of eta, nu must be defined. Builds Lq x Lk
/// per head: for tests and small problems (rem_apply scales). Gradient to
/// eta, nu and theta.
Tensor rem_matrix(const RemSpec& spec, const Tensor& eta, const Tensor& nu, const Tensor& theta,
                  int64_t Lq, int64_t Lk, const Tensor& key_padding = Tensor());

/// P V without building P: an O(Lk D) scan per (batch, head).
///   v [B, Hr, Lk, D] -> [B, Hr, Lq, D] (rows M..Lk-1 of P V), 0 <= Lq <= Lk.
/// key_padding [B, Lk] (nonzero = padded, any dtype) zeroes padded keys.
/// state_in/state_out carry the scan across segments (masked, no
/// max_distance): [B, Hr, dmax, 2, D] in v's dtype (f32 for 16-bit v), holding (y + v) at the
/// last dmax key positions, as (real, imaginary) parts; dmax is the largest
/// dilation (1 without dilated heads). *state_out, when state_out is given,
/// is a new tensor without history (carried like XL memory). Gradient to v,
/// eta, nu, theta and state_in. With Lk = 0 (an empty segment) the result is
/// empty and *state_out = state_in (zeros without one).
///
/// A carried state and max_distance do not go together, and are rejected with
/// an Error here and in every backend's kernel front (backends/kernels.cpp):
/// the state summarises the whole past as one complex number per lane, but a
/// truncated REM must forget each key exactly max_distance steps after it, so
/// it would need the last max_distance keys themselves, not a summary
/// (docs/math.md, section Carry mode). How the truncated scan drops the keys
/// that leave the window on each device: docs/math.md, section Truncated REMs
/// and max_distance.
Tensor rem_apply(const RemSpec& spec, const Tensor& eta, const Tensor& nu, const Tensor& theta,
                 const Tensor& v, int64_t Lq, const Tensor& key_padding = Tensor(),
                 const Tensor& state_in = Tensor(), Tensor* state_out = nullptr);

/// gate(a, b, mu) = (1 - sigmoid(mu)) * a + sigmoid(mu) * b (docs/math.md,
/// section The gate op): a and b of one shape, mu broadcasting to it; floating,
/// one dtype and device (f32, f64; bf16 and f16 on the CPU). Gradient to a, b
/// and mu.
Tensor gate(const Tensor& a, const Tensor& b, const Tensor& mu);

/// \name RSA attention
/// RSA attention (docs/math.md, section RSA attention and the gate):
/// q [B, H, Lq, D], k, v [B, H, Lk, D] (one floating dtype, one device) ->
/// [B, H, Lq, D]. Heads 0..Hr-1 mix softmax attention with the REM through
/// the gate; the rest are plain (Hr <= H; Lq <= Lk when Hr > 0).
///   mu: [Hr] (one per REM head) or [1] (shared by the layer); needed when Hr > 0.
///   attn_mask: an additive score bias broadcasting to [B, H, Lq, Lk] (0 or -inf
///     for a mask; may be undefined). It is differentiable, so a model can pass
///     learned terms such as Transformer-XL's positional scores through it.
///   key_padding: [B, Lk] nonzero = padded: masked in A and zeroed in P.
/// One autograd node: the REM part runs through the scan, so no Lq x Lk tensor
/// for P is ever stored; dropout (train only) applies to A before the mix.
/// A fully masked query row (every score -inf, from attn_mask and key_padding
/// together) gets A = 0 there, not softmax's NaN, and passes no gradient back
/// through A (FlashAttention-2's rule; the fused CUDA kernels and the reference
/// follow it too). Its REM heads still mix in the REM part: O = gs Y.
///
/// Where the device's fused kernels take the problem (Backend::supports with
/// OpKind::fused_rsa: f32 or f64 and the device's size limits) they compute
/// the softmax part tile by tile without an [Lq, Lk] tensor; elsewhere a
/// composed path with the same mathematics keeps the [B, H, Lq, Lk]
/// probabilities for backward. Gradient to q, k, v, eta, nu, theta, mu,
/// attn_mask and RsaOptions::pos_q / pos_r; none to key_padding or the
/// carried REM state. A shape that does not fit is an Error naming it.
/// @{

/// Options of rsa_attention.
struct RsaOptions {
  double scale = 0;        ///< Score scale; 0 means 1 / sqrt(D).
  double dropout = 0;      ///< Dropout probability on the attention probabilities A, in [0, 1).
  bool train = false;      ///< Apply dropout (training); no dropout when false.
  Generator* gen = nullptr;  ///< Dropout's generator (null: the global one).
  /// Carry mode (docs/math.md, section Carry mode): the REM part scans only the
  /// last Lq keys (the current segment), starting from rem_state_in (undefined
  /// = zeros); the end state comes back in RsaResult::rem_state (detached,
  /// like XL memory). Needs a masked REM without max_distance (an Error otherwise).
  bool carry = false;
  /// The carried state [B, Hr, dmax, 2, D] (layout as rem_apply's state_in);
  /// read in carry mode only, never differentiated.
  Tensor rem_state_in;
  /// Transformer-XL's relative-position term (docs/math.md, section Relative
  /// attention and rel-shift): with pos_q [B, H, Lq, D] (XL's q + r_r_bias)
  /// and pos_r [H, Lk, D] (the projected positional embeddings, row c for the
  /// relative distance Lk - 1 - c), the scores gain
  ///   scale * rel_shift(pos_q pos_r^T)[b, h, i, j]
  /// (ops.h's rel_shift: pos_q[i] dot pos_r[j + Lq - 1 - i], nothing where that
  /// row is past Lk). Both are differentiable; both undefined or both set
  /// (q's dtype and device), and Lq <= Lk. A device whose fused kernels take
  /// it (the CPU's) computes the term tile by tile from the band of pos_r rows
  /// each tile reaches, so no [B, H, Lq, Lk] tensor exists in forward or
  /// backward; elsewhere it is composed with rel_shift into an additive bias
  /// (the reference).
  Tensor pos_q, pos_r;  ///< pos_r [H, Lk, D]: see pos_q.
  /// A causal mask given as numbers instead of a tensor (added to attn_mask):
  /// query i sees keys j <= i + (Lk - Lq), and, when window >= 0, only keys
  /// j > i + (Lk - Lq) - window (Transformer-XL's same_length with
  /// window = mem_len). Needs Lq <= Lk.
  bool causal = false;
  int64_t window = -1;  ///< The causal window (see causal); -1 = none; needs causal.
};
/// The REM of one attention layer as rsa_attention takes it: the spec and its
/// four tensors (undefined where the spec has none of that kind; all undefined
/// and an empty spec for plain softmax attention).
struct RemWeights {
  RemSpec spec;  ///< The layer's REM heads.
  /// eta [num_eta()] (lambda = tanh(eta)).
  Tensor eta, nu, theta, mu;  ///< mu [Hr] or [1], the gate parameters.
  /// Optional, mu's shape: the gate is sigmoid(mu) * gate_scale instead of
  /// sigmoid(mu). At gate_scale = 0 the REM heads are plain softmax heads
  /// exactly, while gate_scale's gradient is not zero: a softmax model given REM
  /// heads this way computes what it did and learns to open the gate.
  Tensor gate_scale;
  /// \var nu
  /// nu [num_cyclic()] (gamma = sigmoid(nu)).
  /// \var theta
  /// theta [num_cyclic()], the cyclic pairs' angles.
};
/// One RSA attention problem, by name: what rsa_attention computes.
struct RsaProblem {
  Tensor q;            ///< [B, H, Lq, D]
  Tensor k;            ///< [B, H, Lk, D]
  Tensor v;            ///< [B, H, Lk, D]
  RemWeights rem;      ///< The layer's REM heads (an empty spec: plain softmax attention).
  Tensor attn_mask;    ///< An additive score bias broadcasting to [B, H, Lq, Lk], or undefined.
  Tensor key_padding;  ///< [B, Lk], nonzero = padded, or undefined.
  RsaOptions opt;      ///< Scale, dropout, carry mode, the positional term, the causal window.
};
/// What rsa_attention returns.
struct RsaResult {
  Tensor out;        ///< [B, H, Lq, D]
  Tensor rem_state;  ///< Carry mode with REM heads: the end state [B, Hr, dmax, 2, D], detached; else undefined.
};
/// RSA attention of one problem (the group text above). It takes one of four
/// paths, each a function of its own in ops/rsa.cpp: 16-bit inputs are
/// widened to f32 and the output narrowed back (rsa_widened); the device's
/// fused kernels where they take the problem (rsa_fused); else the
/// positional term and the causal window composed into a bias
/// (rsa_positional); else the composed path (rsa_composed). The gradient-check
/// registry has cases for each (cases/attention_cases.cpp).
RsaResult rsa_attention(const RsaProblem& p);
/// rsa_attention's output, with the REM given as a spec and its raw parameters
/// (see the group text above and the file's note on eta, nu, theta).
Tensor rsa_attention(const Tensor& q, const Tensor& k, const Tensor& v, const RemSpec& spec,
                     const Tensor& eta, const Tensor& nu, const Tensor& theta, const Tensor& mu,
                     const Tensor& attn_mask = Tensor(), const Tensor& key_padding = Tensor(),
                     const RsaOptions& opt = {});
/// rsa_attention's output, with the REM in one argument.
Tensor rsa_attention(const Tensor& q, const Tensor& k, const Tensor& v, const RemWeights& rem,
                     const Tensor& attn_mask = Tensor(), const Tensor& key_padding = Tensor(),
                     const RsaOptions& opt = {});
/// The same mathematics composed from primitive ops (the reference): the dense
/// rem_matrix (the scan in carry mode), softmax, dropout and matmul, each with
/// its own autograd node, so it keeps [B, H, Lq, Lk] tensors; never the fused
/// kernels. Same problem, checks and result as rsa_attention.
RsaResult rsa_attention_reference(const RsaProblem& p);
/// rsa_attention_reference's output, with the REM as a spec and its raw parameters.
Tensor rsa_attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                               const RemSpec& spec, const Tensor& eta, const Tensor& nu,
                               const Tensor& theta, const Tensor& mu,
                               const Tensor& attn_mask = Tensor(),
                               const Tensor& key_padding = Tensor(), const RsaOptions& opt = {});
/// @}

}  // namespace remora
