// SPDX-License-Identifier: BSD-3-Clause
// Per-feature kernel tables: the model-specific kernels (REM, SRU, fused RSA,
// Transformer-XL's relative shift, the fused optimizer step) that are not part
// of the general Backend (backend.h).
//
// Each feature is a table of function pointers taking one named-argument
// struct (optional pointers are null, and say so), the convention Backend's
// methods follow too. A device registers its table for its DeviceType with a
// static initialiser in the file that implements it (backends/cpu/cpu_rem.cpp,
// backends/cuda/cuda_rem.cu, ...; grep register_kernels); ops/ finds it with
// kernels<RemKernels>(device), which makes that device current and throws one
// uniform Error, "REM kernels are not available on cuda:0 ...", when none is
// registered. This is flashlight's TensorExtension idea: a new device or a new
// feature adds a table and one registration line; neither Backend nor the
// other tables change.
//
// The optional tables (fused RSA attention, the fused Adam step) are asked
// for through the device's one supports query (Backend::supports, OpKind in
// backend.h) before they are called.
//
// Problem checks that do not depend on the device (k, even D, a state with
// truncation, ...) run once in the front functions (kern::rem_scan, ...) at
// the end of this file, for every backend alike.
#pragma once
#include <cstdint>

#include "../core/adam_step.h"
#include "../core/dtype.h"

namespace remora {

// One REM head as the kernels see it: rho = a * e^{i theta} (theta = 0 and
// a = lambda for a regular head); the head reads Re (regular, cos) or Im (sin)
// of its complex state. Dilation 1 means not dilated.
struct RemHeadDesc {
  int8_t reads_imag = 0;  // 1 for sin heads
  int8_t complex = 0;     // 0 for regular heads (theta unused, dtheta = 0)
  int64_t dilation = 1;
};

// Problem description shared by the REM kernels (docs/math.md#recurrence-encoding-matrices-rem and #the-scan-form-applying-a-rem-in-ol).
struct RemProblem {
  int64_t B = 1, H = 0, Lq = 0, Lk = 0, D = 0;  // M = Lk - Lq
  bool masked = true;
  int64_t max_distance = 0;  // 0 = none
  int64_t dmax = 1;          // state slots (largest dilation)
  const RemHeadDesc* heads = nullptr;  // host array [H]
};

// The SRU elementwise recurrence (docs/math.md#the-sru-elementwise-recurrence): one independent lane per
// (batch, unit), a sequential loop over time. D counts the units of both
// directions; with bidirectional, units [D/2, D) run from t = L-1 down to 0.
struct SruProblem {
  int64_t L = 0, B = 0, D = 0;
  int64_t k = 3;               // columns of U per unit: 3, or 4 (u3 is x')
  bool bidirectional = false;
};

// Fused RSA attention (docs/math.md#rsa-attention-and-the-gate), FlashAttention style: the softmax part
// O_att = dropout(softmax(scale q k^T + bias + kp)) v is computed tile by tile
// with an online softmax, so no [Lq, Lk] tensor is stored; the REM heads
// (h < Hr) then mix in Y (P v from the O(L) scan, computed beforehand):
// O = O_att + gs[h] (Y - O_att). All of q, k, v, O are contiguous [B, H, L, D].
struct RsaFusedProblem {
  int64_t B = 0, H = 0, Hr = 0, Lq = 0, Lk = 0, D = 0;
  double scale = 1;
  // Additive score bias broadcasting to [B, H, Lq, Lk] (element strides, 0 on
  // broadcast dims), or null. Same dtype as q.
  const void* bias = nullptr;
  int64_t bias_strides[4] = {0, 0, 0, 0};
  // Key padding as an additive [B, Lk] term (0 or -inf, dtype of q), or null.
  const void* kp_bias = nullptr;
  // Dropout on the attention probabilities (train only): element
  // ((b H + h) Lq + i) Lk + j is kept as philox::kept(seed, offset, that index),
  // exactly as bernoulli_mask over the full [B, H, Lq, Lk] tensor.
  double dropout = 0;
  uint64_t seed = 0, offset = 0;
  // Transformer-XL's relative-position term (docs/math.md#relative-attention-and-rel-shift), computed inside the
  // kernel instead of read from a bias: with c = j + Lq - 1 - i, the score of
  // (i, j) gains scale * pos_q[b, h, i] . pos_r[h, c] where c < Lk (nothing
  // where c >= Lk, as rel_shift). pos_q [B, H, Lq, D] (XL's q + r_r_bias) and
  // pos_r [H, Lk, D] (row c: the relative distance Lk - 1 - c), contiguous,
  // both null or both set. A block of query rows reads only the band of pos_r
  // rows its keys reach, so nothing of size Lq x Lk is formed.
  const void* pos_q = nullptr;
  const void* pos_r = nullptr;
  // A causal key window in place of (or on top of) a mask in `bias`: query i
  // sees keys j <= i + (Lk - Lq), and, when window >= 0, only keys
  // j > i + (Lk - Lq) - window (Transformer-XL's same_length).
  bool causal = false;
  int64_t window = -1;
};

// ---- REM (docs/math.md#recurrence-encoding-matrices-rem and #the-scan-form-applying-a-rem-in-ol); a, theta: [H] per-head parameters ----

// Dense P [H, Lq, Lk] (p.B unused), the reference form.
struct RemMatrixArgs {
  DType dt = DType::f32;
  RemProblem p;
  const void* a = nullptr;
  const void* theta = nullptr;
  void* P = nullptr;
};
// da[h] = sum_ij dP[h,i,j] df/da, dtheta likewise; dP [H, Lq, Lk].
struct RemMatrixBackwardArgs {
  DType dt = DType::f32;
  RemProblem p;
  const void* a = nullptr;
  const void* theta = nullptr;
  const void* dP = nullptr;
  void* da = nullptr;
  void* dtheta = nullptr;
};
// y [B, H, Lq, D] = rows M.. of P v, v [B, H, Lk, D], by the O(Lk D) scan.
// state_in/state_out [B, H, dmax, 2, D] are optional (null) and need a masked
// REM without max_distance (docs/math.md#the-scan-form-applying-a-rem-in-ol; ops/rem.h says why). With Lk = 0,
// state_out = state_in (zeros without one).
struct RemScanArgs {
  DType dt = DType::f32;
  RemProblem p;
  const void* a = nullptr;
  const void* theta = nullptr;
  const void* v = nullptr;
  const void* state_in = nullptr;  // optional
  void* y = nullptr;
  void* state_out = nullptr;       // optional
};
// Gradients of the scan: dv [B, H, Lk, D], da/dtheta [H] (summed over B),
// dstate_in (optional). Recomputes the forward; never builds P.
struct RemScanBackwardArgs {
  DType dt = DType::f32;
  RemProblem p;
  const void* a = nullptr;
  const void* theta = nullptr;
  const void* v = nullptr;
  const void* state_in = nullptr;  // optional
  const void* dy = nullptr;
  void* dv = nullptr;
  void* da = nullptr;
  void* dtheta = nullptr;
  void* dstate_in = nullptr;       // optional
};
struct RemKernels {
  static constexpr const char* kFeature = "REM kernels";
  void (*matrix)(const RemMatrixArgs&);
  void (*matrix_backward)(const RemMatrixBackwardArgs&);
  void (*scan)(const RemScanArgs&);
  void (*scan_backward)(const RemScanBackwardArgs&);
};

// ---- SRU recurrence (docs/math.md#the-sru-elementwise-recurrence) ----

// U [L, B, D, k] (u0 candidate, u1 forget, u2 reset, u3 skip when k == 4);
// x [L, B, D] is x' when k == 3 (null when k == 4); v [2, D] = (v_f; v_r);
// b [2, D] = (b_f; b_r); c0 [B, D] (null: zeros); mask [B, D] (null: none) is
// the dropout mask on c as the official code places it:
// h_t = x'_t + m ⊙ r_t ⊙ (c_t − x'_t) (a dropped lane passes x' through).
// Writes h [L, B, D], c [L, B, D] (every c_t, which backward reads) and
// c_last [B, D] (the state after the last step of each direction).
struct SruForwardArgs {
  DType dt = DType::f32;
  SruProblem p;
  const void* U = nullptr;
  const void* x = nullptr;     // k == 3 only
  const void* v = nullptr;
  const void* b = nullptr;
  const void* c0 = nullptr;    // optional
  const void* mask = nullptr;  // optional
  void* h = nullptr;
  void* c = nullptr;
  void* c_last = nullptr;
};
// Gradients: dh [L, B, D]; dc [L, B, D] and dc_last [B, D] optional (zero).
// Writes dU [L, B, D, k], dx [L, B, D] (k == 3), dv [2, D] and db [2, D]
// (summed over B), dc0 [B, D] (optional).
struct SruBackwardArgs {
  DType dt = DType::f32;
  SruProblem p;
  const void* U = nullptr;
  const void* x = nullptr;        // k == 3 only
  const void* v = nullptr;
  const void* b = nullptr;
  const void* c0 = nullptr;       // optional
  const void* mask = nullptr;     // optional
  const void* c = nullptr;
  const void* dh = nullptr;
  const void* dc = nullptr;       // optional
  const void* dc_last = nullptr;  // optional
  void* dU = nullptr;
  void* dx = nullptr;             // k == 3 only
  void* dv = nullptr;
  void* db = nullptr;
  void* dc0 = nullptr;            // optional
};
struct SruKernels {
  static constexpr const char* kFeature = "SRU kernels";
  void (*forward)(const SruForwardArgs&);
  void (*backward)(const SruBackwardArgs&);
};

// ---- fused RSA attention (docs/math.md#rsa-attention-and-the-gate) ----

// gs [Hr] = sigmoid(mu) per REM head, Y [B, Hr, Lq, D] (both null when
// Hr == 0). Writes O [B, H, Lq, D], Oatt_r [B, Hr, Lq, D] (the softmax part of
// the REM heads, for backward) and lse [B, H, Lq] (row log-sum-exp of the
// scores; +inf on a fully masked row).
struct RsaForwardArgs {
  DType dt = DType::f32;
  RsaFusedProblem p;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* gs = nullptr;  // Hr > 0 only
  const void* Y = nullptr;   // Hr > 0 only
  void* O = nullptr;
  void* Oatt_r = nullptr;    // Hr > 0 only
  void* lse = nullptr;
};
// The gradients of the softmax part: dO is the gradient of O; the kernels
// apply (1 - gs) on the REM heads themselves. Writes dq, dk, dv [B, H, L, D]
// and, when dS is given, dS [B, H, Lq, Lk] = dLoss/dScores (the gradient of an
// additive bias before summing to its shape).
struct RsaBackwardArgs {
  DType dt = DType::f32;
  RsaFusedProblem p;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* gs = nullptr;      // Hr > 0 only
  const void* O = nullptr;
  const void* Oatt_r = nullptr;  // Hr > 0 only
  const void* lse = nullptr;
  const void* dO = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  void* dS = nullptr;            // optional
  // With the positional term (p.pos_q): the gradients of pos_q [B, H, Lq, D]
  // and of pos_r per batch row [B, H, Lk, D] (the caller sums over B).
  void* dpos_q = nullptr;
  void* dpos_r = nullptr;
};
// Fully masked query rows (every score -inf) follow FlashAttention-2: the
// softmax part of the row is 0 and contributes no gradient.
// Which problems a device's kernels take (head width, dtype, grid limits) is
// its Backend::supports(OpKind::fused_rsa, ...); ops/ runs the composed path
// where it says no.
struct RsaKernels {
  static constexpr const char* kFeature = "fused RSA attention kernels";
  void (*forward)(const RsaForwardArgs&);
  void (*backward)(const RsaBackwardArgs&);
  // Calls of forward/backward in this process that ran on tensor cores (CUDA:
  // the TF32 FlashAttention kernels of backends/cuda/cuda_flash.cu, taken when
  // cuda_tf32() is on and D is 64 or 128), so a test can tell them from the
  // reference kernels; null when the device has no such path.
  int64_t (*tensor_core_launches)();
};

// ---- Transformer-XL's relative shift (docs/math.md#relative-attention-and-rel-shift) ----

// x and out [N, Lq, Lk] contiguous (N: the leading dims flattened); with
// s_i = Lq - 1 - i,
//   out[n, i, j] = scale * x[n, i, j + s_i] (0 where j + s_i >= Lk) + bias[i, j]
// bias [Lq, Lk] is optional (null: none). One pass for what the composed form
// (pad with Lq zero columns, a strided view, scale, add) does in four.
struct RelShiftArgs {
  DType dt = DType::f32;
  int64_t N = 0, Lq = 0, Lk = 0;
  double scale = 1;
  const void* x = nullptr;
  const void* bias = nullptr;  // optional
  void* out = nullptr;
};
// The gradient of x: dx[n, i, c] = scale * dout[n, i, c - s_i] where c >= s_i,
// else 0 (dx and dout [N, Lq, Lk] contiguous).
struct RelShiftBackwardArgs {
  DType dt = DType::f32;
  int64_t N = 0, Lq = 0, Lk = 0;
  double scale = 1;
  const void* dout = nullptr;
  void* dx = nullptr;
};
struct RelShiftKernels {
  static constexpr const char* kFeature = "relative shift kernels";
  void (*forward)(const RelShiftArgs&);
  void (*backward)(const RelShiftBackwardArgs&);
};

// ---- optimizers ----

// One Adam / AdamW step over n contiguous elements, in place, in one pass: the
// rule and its hyperparameters are AdamStep's (core/adam_step.h; ops::adam_step_
// takes the same struct).
struct AdamArgs {
  DType dt = DType::f32;
  int64_t n = 0;
  AdamStep s;
  void* p = nullptr;
  const void* g = nullptr;
  void* m = nullptr;
  void* v = nullptr;
};
struct OptimKernels {
  static constexpr const char* kFeature = "optimizer kernels";
  void (*adam)(const AdamArgs&);
};

// ---- the registry ----

// Every kernel table. kernels.cpp instantiates the registry slots from this
// list (a table missing here does not link), and [backends] proves on the CPU
// that a registry case reaches every entry of every table in it
// (tests/test_backends.cpp): a new table goes here, a new entry needs a case.
#define REMORA_KERNEL_TABLES(X) X(RemKernels) X(SruKernels) X(RsaKernels) X(RelShiftKernels) X(OptimKernels)

namespace detail {
// backend(dev).activate(): checks the device exists and makes it current.
void activate_device(Device dev);
[[noreturn]] void kernels_not_available(const char* feature, Device dev);
// One slot per (table, device type), keyed by DeviceType (up to
// kMaxDeviceTypes, core/device_registry.h); defined and instantiated for each
// table in backends/kernels.cpp (so every library and program shares them).
template <class K>
const K*& kernel_slot(DeviceType type);
}  // namespace detail

// A device library registers its tables when it loads (a static initialiser).
template <class K>
void register_kernels(DeviceType type, const K* table) {
  detail::kernel_slot<K>(type) = table;
}
// The table of a feature on a device, with the device made current; an Error
// "<feature> are not available on <device>" when none is registered.
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
void rem_matrix(Device dev, const RemMatrixArgs& a);
void rem_matrix_backward(Device dev, const RemMatrixBackwardArgs& a);
void rem_scan(Device dev, const RemScanArgs& a);
void rem_scan_backward(Device dev, const RemScanBackwardArgs& a);
void sru_forward(Device dev, const SruForwardArgs& a);
void sru_backward(Device dev, const SruBackwardArgs& a);
// The fused RSA kernels and adam are optional: ops/ calls them where
// supports(dev, OpKind::fused_rsa / fused_adam, ...) (backend.h) says yes.
void rsa_forward(Device dev, const RsaForwardArgs& a);
void rsa_backward(Device dev, const RsaBackwardArgs& a);
void rel_shift(Device dev, const RelShiftArgs& a);
void rel_shift_backward(Device dev, const RelShiftBackwardArgs& a);
void adam(Device dev, const AdamArgs& a);
}  // namespace kern

}  // namespace remora
