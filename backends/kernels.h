// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Per-feature kernel tables: the model-specific kernels (REM, SRU, fused RSA,
/// Transformer-XL's relative shift, the fused optimizer step) that are not part
/// of the general Backend (backend.h).
///
/// Each feature is a table of function pointers taking one named-argument
/// struct (optional pointers are null, and say so), the convention Backend's
/// methods follow too. A device registers its table for its DeviceType with a
/// static initialiser in the file that implements it (backends/cpu/cpu_rem.cpp,
/// backends/cuda/cuda_rem.cu, ...; grep register_kernels); ops/ finds it with
/// kernels<RemKernels>(device), which makes that device current and throws one
/// uniform Error, "REM kernels are not available on cuda:0 ...", when none is
/// registered. This is flashlight's TensorExtension idea: a new device or a new
/// feature adds a table and one registration line; neither Backend nor the
/// other tables change.
///
/// The optional tables (fused RSA attention, the fused Adam step) are asked
/// for through the device's one supports query (Backend::supports, OpKind in
/// backend.h) before they are called.
///
/// Problem checks that do not depend on the device (k, even D, a state with
/// truncation, ...) run once in the front functions (kern::rem_scan, ...) at
/// the end of this file, for every backend alike.
///
/// The argument structs follow backend.h's conventions: device pointers of
/// the kernel's device, owned by the caller, offset to the first element,
/// contiguous row-major in the shapes given; sizes in elements; dt the dtype of
/// every floating operand (f32 or f64: these kernels take no 16-bit input, an
/// Error); outputs written whole.
#pragma once
#include <cstdint>

#include "../core/adam_step.h"
#include "../core/dtype.h"

namespace remora {

/// One REM head as the kernels see it: rho = a * e^{i theta} (theta = 0 and
/// a = lambda for a regular head); the head reads Re (regular, cos) or Im (sin)
/// of its complex state. Dilation 1 means not dilated.
struct RemHeadDesc {
  int8_t reads_imag = 0;  ///< 1 for sin heads.
  int8_t complex = 0;     ///< 0 for regular heads (theta unused, dtheta = 0).
  int64_t dilation = 1;   ///< The head's dilation (1: none).
};

/// Problem description shared by the REM kernels (docs/math.md, sections
/// Recurrence Encoding Matrices (REM) and The scan form: applying a REM in O(L)).
struct RemProblem {
  int64_t B = 1, H = 0, Lq = 0, Lk = 0, D = 0;  ///< Width of v's rows. M = Lk - Lq.
  /// \var B
  /// Batch size.
  /// \var H
  /// REM heads (Hr).
  /// \var Lq
  /// Query rows produced: rows M to Lk-1 (0 <= Lq <= Lk).
  /// \var Lk
  /// Key positions scanned.
  bool masked = true;        ///< Causal (n >= 1) or bidirectional REM.
  int64_t max_distance = 0;  ///< f(n) = 0 beyond this distance; 0 = none.
  int64_t dmax = 1;          ///< State slots (largest dilation).
  const RemHeadDesc* heads = nullptr;  ///< Host array [H].
};

/// The SRU elementwise recurrence (docs/math.md, section The SRU elementwise
/// recurrence): one independent lane per (batch, unit), a sequential loop
/// over time. D counts the units of both directions; with bidirectional,
/// units [D/2, D) run from t = L-1 down to 0.
struct SruProblem {
  int64_t L = 0, B = 0, D = 0;  ///< Units (both directions).
  /// \var L
  /// Time steps.
  /// \var B
  /// Batch size.
  int64_t k = 3;               ///< Columns of U per unit: 3, or 4 (u3 is x').
  bool bidirectional = false;  ///< Units [D/2, D) run backwards in time (D even).
};

/// Fused RSA attention (docs/math.md, section RSA attention and the gate),
/// FlashAttention style: the softmax part
/// O_att = dropout(softmax(scale q k^T + bias + kp)) v is computed tile by tile
/// with an online softmax, so no [Lq, Lk] tensor is stored; the REM heads
/// (h < Hr) then mix in Y (P v from the O(L) scan, computed beforehand):
/// O = O_att + gs[h] (Y - O_att). All of q, k, v, O are contiguous [B, H, L, D].
struct RsaFusedProblem {
  int64_t B = 0, H = 0, Hr = 0, Lq = 0, Lk = 0, D = 0;  ///< Head width.
  /// \var B
  /// Batch size.
  /// \var H
  /// Attention heads.
  /// \var Hr
  /// REM heads, the first Hr of the H (0: plain attention).
  /// \var Lq
  /// Query length.
  /// \var Lk
  /// Key length (Lk - Lq memory positions before the queries).
  double scale = 1;  ///< Factor of q k^T (the caller resolves 0 to 1 / sqrt(D)).
  /// Additive score bias broadcasting to [B, H, Lq, Lk] (element strides, 0 on
  /// broadcast dims), or null. Same dtype as q.
  const void* bias = nullptr;
  int64_t bias_strides[4] = {0, 0, 0, 0};  ///< bias's element strides over (B, H, Lq, Lk).
  /// Key padding as an additive [B, Lk] term (0 or -inf, dtype of q), or null.
  const void* kp_bias = nullptr;
  /// Dropout on the attention probabilities (train only): element
  /// ((b H + h) Lq + i) Lk + j is kept as philox::kept(seed, offset, that index),
  /// exactly as bernoulli_mask over the full [B, H, Lq, Lk] tensor. 0: none.
  double dropout = 0;
  uint64_t seed = 0, offset = 0;  ///< Philox counter of element 0 (see dropout).
  /// \var seed
  /// Philox key of the dropout mask.

  /// Transformer-XL's relative-position term (docs/math.md, section Relative
  /// attention and rel-shift), computed inside the kernel instead of read
  /// from a bias: with c = j + Lq - 1 - i, the score of (i, j) gains
  /// scale * pos_q[b, h, i] dot pos_r[h, c] where c < Lk (nothing where c >= Lk,
  /// as rel_shift). pos_q [B, H, Lq, D] (XL's q + r_r_bias) and pos_r
  /// [H, Lk, D] (row c: the relative distance Lk - 1 - c), contiguous, both
  /// null or both set. A block of query rows reads only the band of pos_r
  /// rows its keys reach, so nothing of size Lq x Lk is formed.
  const void* pos_q = nullptr;
  const void* pos_r = nullptr;  ///< [H, Lk, D] or null; see pos_q.
  /// A causal key window in place of (or on top of) a mask in `bias`: query i
  /// sees keys j <= i + (Lk - Lq), and, when window >= 0, only keys
  /// j > i + (Lk - Lq) - window (Transformer-XL's same_length).
  bool causal = false;
  int64_t window = -1;  ///< The causal window (see causal); -1 = none.
  /// bf16 autocast: q, k, v, pos_q, pos_r (and dO in backward) are bf16
  /// values and everything else f32 (outputs, scores, gradients); the
  /// products take them as bf16 operands with f32 accumulation (CUDA's
  /// tensor cores; the CPU widens them to f32 as it reads them). Only a device
  /// whose Backend::supports(OpKind::fused_rsa, ...) takes it gets it (else
  /// ops/ gives it f32 copies).
  bool bf16_operands = false;
};

/// \name REM kernels
/// docs/math.md, sections Recurrence Encoding Matrices (REM) and The scan
/// form: applying a REM in O(L). a, theta: [H] per-head parameters (a =
/// lambda for a regular head, gamma for a cyclic one; theta 0 for a regular
/// head), as RemHeadDesc describes.
/// @{

/// Dense P [H, Lq, Lk] (p.B unused), the reference form.
struct RemMatrixArgs {
  DType dt = DType::f32;        ///< Dtype of a, theta, P.
  RemProblem p;                 ///< The problem (p.D unused).
  const void* a = nullptr;      ///< [H] decay per head.
  const void* theta = nullptr;  ///< [H] angle per head.
  void* P = nullptr;            ///< [H, Lq, Lk], written.
};
/// da[h] = sum_ij dP[h,i,j] df/da, dtheta likewise; dP [H, Lq, Lk].
struct RemMatrixBackwardArgs {
  DType dt = DType::f32;        ///< Dtype of every operand.
  RemProblem p;                 ///< The forward's problem.
  const void* a = nullptr;      ///< [H], as in the forward.
  const void* theta = nullptr;  ///< [H], as in the forward.
  const void* dP = nullptr;     ///< Incoming gradient [H, Lq, Lk].
  void* da = nullptr;           ///< [H], written.
  void* dtheta = nullptr;       ///< [H], written (0 for regular heads).
};
/// y [B, H, Lq, D] = rows M to Lk-1 of P v, v [B, H, Lk, D], by the O(Lk D) scan.
/// state_in/state_out [B, H, dmax, 2, D] are optional (null) and need a masked
/// REM without max_distance (docs/math.md, section Carry mode; ops/rem.h says
/// why). With Lk = 0, state_out = state_in (zeros without one).
struct RemScanArgs {
  DType dt = DType::f32;        ///< Dtype of every operand.
  RemProblem p;                 ///< The problem.
  const void* a = nullptr;      ///< [H] decay per head.
  const void* theta = nullptr;  ///< [H] angle per head.
  const void* v = nullptr;      ///< Values [B, H, Lk, D] (padded keys already zeroed).
  const void* state_in = nullptr;  ///< Optional: the carried state, (y + v) at the last dmax keys, (re, im).
  void* y = nullptr;            ///< [B, H, Lq, D], written.
  void* state_out = nullptr;       ///< Optional: the end state, written, layout as state_in.
};
/// Gradients of the scan: dv [B, H, Lk, D], da/dtheta [H] (summed over B),
/// dstate_in (optional). Recomputes the forward; never builds P.
struct RemScanBackwardArgs {
  DType dt = DType::f32;        ///< Dtype of every operand.
  RemProblem p;                 ///< The forward's problem.
  const void* a = nullptr;      ///< [H], as in the forward.
  const void* theta = nullptr;  ///< [H], as in the forward.
  const void* v = nullptr;      ///< [B, H, Lk, D], as in the forward.
  const void* state_in = nullptr;  ///< Optional: the forward's state_in.
  const void* dy = nullptr;     ///< Incoming gradient [B, H, Lq, D].
  void* dv = nullptr;           ///< [B, H, Lk, D], written.
  void* da = nullptr;           ///< [H], written.
  void* dtheta = nullptr;       ///< [H], written.
  void* dstate_in = nullptr;       ///< Optional: [B, H, dmax, 2, D], written.
};
/// The REM kernel table of a device.
struct RemKernels {
  static constexpr const char* kFeature = "REM kernels";  ///< Name in "not available" errors.
  void (*matrix)(const RemMatrixArgs&);  ///< Dense P.
  void (*matrix_backward)(const RemMatrixBackwardArgs&);  ///< Gradients of P.
  void (*scan)(const RemScanArgs&);  ///< P v by the scan.
  void (*scan_backward)(const RemScanBackwardArgs&);  ///< Gradients of the scan.
};
/// @}

/// \name SRU kernels
/// docs/math.md, section The SRU elementwise recurrence.
/// @{

/// U [L, B, D, k] (u0 candidate, u1 forget, u2 reset, u3 skip when k == 4);
/// x [L, B, D] is x' when k == 3 (null when k == 4); v [2, D] = (v_f; v_r);
/// b [2, D] = (b_f; b_r); c0 [B, D] (null: zeros); mask [B, D] (null: none) is
/// the dropout mask on c as the official code places it:
/// h_t = x'_t + m * r_t * (c_t - x'_t) (a dropped lane passes x' through).
/// Writes h [L, B, D], c [L, B, D] (every c_t, which backward reads) and
/// c_last [B, D] (the state after the last step of each direction).
struct SruForwardArgs {
  DType dt = DType::f32;       ///< Dtype of every operand.
  SruProblem p;                ///< The problem.
  const void* U = nullptr;     ///< [L, B, D, k].
  const void* x = nullptr;     ///< [L, B, D]; k == 3 only.
  const void* v = nullptr;     ///< [2, D] = (v_f; v_r).
  const void* b = nullptr;     ///< [2, D] = (b_f; b_r).
  const void* c0 = nullptr;    ///< Optional [B, D].
  const void* mask = nullptr;  ///< Optional [B, D].
  void* h = nullptr;           ///< [L, B, D], written.
  void* c = nullptr;           ///< [L, B, D], written.
  void* c_last = nullptr;      ///< [B, D], written.
};
/// Gradients: dh [L, B, D]; dc [L, B, D] and dc_last [B, D] optional (zero).
/// Writes dU [L, B, D, k], dx [L, B, D] (k == 3), dv [2, D] and db [2, D]
/// (summed over B), dc0 [B, D] (optional).
struct SruBackwardArgs {
  DType dt = DType::f32;          ///< Dtype of every operand.
  SruProblem p;                   ///< The forward's problem.
  const void* U = nullptr;        ///< The forward's U.
  const void* x = nullptr;        ///< The forward's x; k == 3 only.
  const void* v = nullptr;        ///< The forward's v.
  const void* b = nullptr;        ///< The forward's b.
  const void* c0 = nullptr;       ///< The forward's c0; optional.
  const void* mask = nullptr;     ///< The forward's mask; optional.
  const void* c = nullptr;        ///< The forward's c [L, B, D].
  const void* dh = nullptr;       ///< Gradient of h [L, B, D].
  const void* dc = nullptr;       ///< Gradient of c [L, B, D]; optional.
  const void* dc_last = nullptr;  ///< Gradient of c_last [B, D]; optional.
  void* dU = nullptr;             ///< [L, B, D, k], written.
  void* dx = nullptr;             ///< [L, B, D], written; k == 3 only (then required).
  void* dv = nullptr;             ///< [2, D], written.
  void* db = nullptr;             ///< [2, D], written.
  void* dc0 = nullptr;            ///< [B, D], written; optional.
};
/// The SRU kernel table of a device.
struct SruKernels {
  static constexpr const char* kFeature = "SRU kernels";  ///< Name in "not available" errors.
  void (*forward)(const SruForwardArgs&);  ///< The recurrence.
  void (*backward)(const SruBackwardArgs&);  ///< Its reverse sweep.
};
/// @}

/// \name Fused RSA attention kernels
/// docs/math.md, section RSA attention and the gate. Optional
/// (OpKind::fused_rsa).
/// @{

/// gs [Hr] = sigmoid(mu) per REM head, Y [B, Hr, Lq, D] (both null when
/// Hr == 0). Writes O [B, H, Lq, D], Oatt_r [B, Hr, Lq, D] (the softmax part of
/// the REM heads, for backward) and lse [B, H, Lq] (row log-sum-exp of the
/// scores; +inf on a fully masked row).
struct RsaForwardArgs {
  DType dt = DType::f32;     ///< Dtype of every operand.
  RsaFusedProblem p;         ///< The problem.
  const void* q = nullptr;   ///< [B, H, Lq, D].
  const void* k = nullptr;   ///< [B, H, Lk, D].
  const void* v = nullptr;   ///< [B, H, Lk, D].
  const void* gs = nullptr;  ///< [Hr]; Hr > 0 only.
  const void* Y = nullptr;   ///< [B, Hr, Lq, D]; Hr > 0 only.
  void* O = nullptr;         ///< [B, H, Lq, D], written.
  void* Oatt_r = nullptr;    ///< [B, Hr, Lq, D], written; Hr > 0 only.
  void* lse = nullptr;       ///< [B, H, Lq], written.
};
/// The gradients of the softmax part: dO is the gradient of O; the kernels
/// apply (1 - gs) on the REM heads themselves. Writes dq, dk, dv [B, H, L, D]
/// and, when dS is given, dS [B, H, Lq, Lk] = dLoss/dScores (the gradient of an
/// additive bias before summing to its shape).
struct RsaBackwardArgs {
  DType dt = DType::f32;         ///< Dtype of every operand.
  RsaFusedProblem p;             ///< The forward's problem.
  const void* q = nullptr;       ///< The forward's q.
  const void* k = nullptr;       ///< The forward's k.
  const void* v = nullptr;       ///< The forward's v.
  const void* gs = nullptr;      ///< [Hr]; Hr > 0 only.
  const void* O = nullptr;       ///< The forward's O [B, H, Lq, D].
  const void* Oatt_r = nullptr;  ///< The forward's Oatt_r; Hr > 0 only.
  const void* lse = nullptr;     ///< The forward's lse [B, H, Lq].
  const void* dO = nullptr;      ///< Gradient of O [B, H, Lq, D].
  void* dq = nullptr;            ///< [B, H, Lq, D], written.
  void* dk = nullptr;            ///< [B, H, Lk, D], written.
  void* dv = nullptr;            ///< [B, H, Lk, D], written (the softmax part; the caller adds the scan's).
  void* dS = nullptr;            ///< Optional [B, H, Lq, Lk], written.
  /// With the positional term (p.pos_q): the gradients of pos_q [B, H, Lq, D]
  /// and of pos_r per batch row [B, H, Lk, D] (the caller sums over B).
  void* dpos_q = nullptr;
  void* dpos_r = nullptr;  ///< [B, H, Lk, D], written with the positional term; see dpos_q.
};
/// The fused RSA kernel table of a device. Fully masked query rows (every
/// score -inf) follow FlashAttention-2: the softmax part of the row is 0 and
/// contributes no gradient.
/// Which problems a device's kernels take (head width, dtype, grid limits) is
/// its Backend::supports(OpKind::fused_rsa, ...); ops/ runs the composed path
/// where it says no.
struct RsaKernels {
  static constexpr const char* kFeature = "fused RSA attention kernels";  ///< Name in "not available" errors.
  void (*forward)(const RsaForwardArgs&);  ///< The forward.
  void (*backward)(const RsaBackwardArgs&);  ///< The gradients.
  /// Calls of forward/backward in this process that ran on tensor cores (CUDA:
  /// the FlashAttention kernels of backends/cuda/cuda_flash.cu, taken for D =
  /// 32, 64 or 128 with f32 operands when cuda_tf32() is on, or with bf16
  /// operands), so a test can tell them from the reference kernels; null when
  /// the device has no such path.
  int64_t (*tensor_core_launches)();
};
/// @}

/// \name Transformer-XL's relative shift kernels
/// docs/math.md, section Relative attention and rel-shift.
/// @{

/// x and out [N, Lq, Lk] contiguous (N: the leading dims flattened); with
/// s_i = Lq - 1 - i,
///   out[n, i, j] = scale * x[n, i, j + s_i] (0 where j + s_i >= Lk) + bias[i, j]
/// bias [Lq, Lk] is optional (null: none). One pass for what the composed form
/// (pad with Lq zero columns, a strided view, scale, add) does in four.
struct RelShiftArgs {
  DType dt = DType::f32;          ///< Dtype of every operand.
  int64_t N = 0, Lq = 0, Lk = 0;  ///< Columns (keys).
  /// \var N
  /// Leading dims flattened.
  /// \var Lq
  /// Rows (queries).
  double scale = 1;               ///< Factor of the x term.
  const void* x = nullptr;        ///< [N, Lq, Lk].
  const void* bias = nullptr;  ///< Optional [Lq, Lk].
  void* out = nullptr;         ///< [N, Lq, Lk], written.
};
/// The gradient of x: dx[n, i, c] = scale * dout[n, i, c - s_i] where c >= s_i,
/// else 0 (dx and dout [N, Lq, Lk] contiguous).
struct RelShiftBackwardArgs {
  DType dt = DType::f32;          ///< Dtype of every operand.
  int64_t N = 0, Lq = 0, Lk = 0;  ///< Columns, as in the forward.
  /// \var N
  /// As in the forward.
  /// \var Lq
  /// As in the forward.
  double scale = 1;               ///< As in the forward.
  const void* dout = nullptr;     ///< Gradient of out [N, Lq, Lk].
  void* dx = nullptr;             ///< [N, Lq, Lk], written.
};
/// The relative-shift kernel table of a device.
struct RelShiftKernels {
  static constexpr const char* kFeature = "relative shift kernels";  ///< Name in "not available" errors.
  void (*forward)(const RelShiftArgs&);  ///< The shift.
  void (*backward)(const RelShiftBackwardArgs&);  ///< Its gradient.
};
/// @}

/// \name Optimizer kernels
/// Optional (OpKind::fused_adam).
/// @{

/// One Adam / AdamW step over n contiguous elements, in place, in one pass: the
/// rule and its hyperparameters are AdamStep's (core/adam_step.h; ops::adam_step_
/// takes the same struct).
struct AdamArgs {
  DType dt = DType::f32;    ///< Dtype of p, g, m, v.
  int64_t n = 0;            ///< Number of elements.
  AdamStep s;               ///< The step's hyperparameters.
  void* p = nullptr;        ///< Parameters, n elements, updated.
  const void* g = nullptr;  ///< Gradient, n elements.
  void* m = nullptr;        ///< First moment (exp_avg), n elements, updated.
  void* v = nullptr;        ///< Second moment (exp_avg_sq), n elements, updated.
};
/// The optimizer kernel table of a device.
struct OptimKernels {
  static constexpr const char* kFeature = "optimizer kernels";  ///< Name in "not available" errors.
  void (*adam)(const AdamArgs&);  ///< One fused Adam / AdamW step.
};
/// @}

// ---- the registry ----

/// Every kernel table. kernels.cpp instantiates the registry slots from this
/// list (a table missing here does not link), and [backends] proves on the CPU
/// that a registry case reaches every entry of every table in it
/// (tests/test_backends.cpp): a new table goes here, a new entry needs a case.
#define REMORA_KERNEL_TABLES(X) X(RemKernels) X(SruKernels) X(RsaKernels) X(RelShiftKernels) X(OptimKernels)

namespace detail {
/// backend(dev).activate(): checks the device exists and makes it current.
void activate_device(Device dev);
/// Throws kernels()' Error for a feature with no table on dev (the device's
/// own Error first when dev does not exist).
[[noreturn]] void kernels_not_available(const char* feature, Device dev);
/// One slot per (table, device type), keyed by DeviceType (up to
/// kMaxDeviceTypes, core/device_registry.h); defined and instantiated for each
/// table in backends/kernels.cpp (so every library and program shares them).
/// Null until a device library registers its table.
template <class K>
const K*& kernel_slot(DeviceType type);
}  // namespace detail

/// A device library registers its tables when it loads (a static initialiser):
/// table (a static object that outlives every call) becomes the K of every
/// device of that type, replacing any earlier one.
template <class K>
void register_kernels(DeviceType type, const K* table) {
  detail::kernel_slot<K>(type) = table;
}
/// The table of a feature on a device, with the device made current; an Error
/// "FEATURE are not available on DEVICE" when none is registered (or the
/// device's own Error when the device does not exist).
template <class K>
const K& kernels(Device dev) {
  const K* k = detail::kernel_slot<K>(dev.type);
  if (!k) detail::kernels_not_available(K::kFeature, dev);
  detail::activate_device(dev);
  return *k;
}

// ---- the fronts ops/ calls: the problem checks every backend shares (an
// Error names the kernel), then the device's table ----
namespace kern {
/// RemKernels::matrix on dev, after the shared checks (sizes >= 0, Lq <= Lk, a head table, dmax >= 1).
void rem_matrix(Device dev, const RemMatrixArgs& a);
/// RemKernels::matrix_backward on dev, after rem_matrix's checks.
void rem_matrix_backward(Device dev, const RemMatrixBackwardArgs& a);
/// RemKernels::scan on dev, after rem_matrix's checks; a state needs a masked
/// REM without max_distance.
void rem_scan(Device dev, const RemScanArgs& a);
/// RemKernels::scan_backward on dev, after rem_scan's checks.
void rem_scan_backward(Device dev, const RemScanBackwardArgs& a);
/// SruKernels::forward on dev, after the shared checks (k 3 or 4, sizes >= 0,
/// x given for k == 3, even D when bidirectional).
void sru_forward(Device dev, const SruForwardArgs& a);
/// SruKernels::backward on dev, after sru_forward's checks (and dx given for k == 3).
void sru_backward(Device dev, const SruBackwardArgs& a);
/// RsaKernels::forward on dev. The fused RSA kernels and adam are optional:
/// ops/ calls them where supports(dev, OpKind::fused_rsa / fused_adam, ...)
/// (backend.h) says yes; these fronts check pos_q / pos_r both set or both
/// null, Lq <= Lk with them or a causal window, and that supports() takes
/// the problem.
void rsa_forward(Device dev, const RsaForwardArgs& a);
/// RsaKernels::backward on dev, after rsa_forward's checks (and dpos_q,
/// dpos_r given with the positional term).
void rsa_backward(Device dev, const RsaBackwardArgs& a);
/// RelShiftKernels::forward on dev (N, Lq, Lk >= 0).
void rel_shift(Device dev, const RelShiftArgs& a);
/// RelShiftKernels::backward on dev (N, Lq, Lk >= 0).
void rel_shift_backward(Device dev, const RelShiftBackwardArgs& a);
/// OptimKernels::adam on dev (n >= 0); optional, see rsa_forward.
void adam(Device dev, const AdamArgs& a);
}  // namespace kern

}  // namespace remora
