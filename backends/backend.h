// The backend interface: flat kernels over raw device pointers.
//
// ops/ resolves views, broadcasting and dtype checks, then calls one of these.
// Kernels see contiguous buffers, except the strided elementwise family (copy,
// binary, where), which takes an ElemIter: an output shape plus per-operand
// strides in elements (0 = broadcast). A new device implements this class and
// registers itself; ops/ does not change.
#pragma once
#include <cstdint>
#include <string>

#include "../core/dtype.h"

namespace remora {

constexpr int kMaxDims = 8;

// Shape of an elementwise iteration with up to 4 operands (operand 0 is the output).
struct ElemIter {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[4][kMaxDims] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
};

enum class UnaryOp : uint8_t {
  affine,   // alpha * x + beta
  pow,      // x ^ alpha
  exp, log, sqrt, tanh, sigmoid, relu, gelu, abs, sin, cos,
};
// Backward helpers: out = grad * f'(...), fused so backward makes one pass.
enum class UnaryGradOp : uint8_t {
  tanh,     // g * (1 - y^2)         (uses the output y)
  sigmoid,  // g * y * (1 - y)       (uses the output y)
  relu,     // g * (x > 0)           (uses the input x)
  gelu,     // g * gelu'(x)          (uses the input x)
  pow,      // g * alpha * x^(alpha-1)
};
enum class BinaryOp : uint8_t { add, sub, mul, div, maximum, minimum, eq, ne, lt, le, gt, ge };
enum class ReduceOp : uint8_t { sum, max, min };

// One REM head as the kernels see it: rho = a * e^{i theta} (theta = 0 and
// a = lambda for a regular head); the head reads Re (regular, cos) or Im (sin)
// of its complex state. Dilation 1 means not dilated.
struct RemHeadDesc {
  int8_t reads_imag = 0;  // 1 for sin heads
  int8_t complex = 0;     // 0 for regular heads (theta unused, dtheta = 0)
  int64_t dilation = 1;
};

// Problem description shared by the REM kernels (SPEC §1, §3).
struct RemProblem {
  int64_t B = 1, H = 0, Lq = 0, Lk = 0, D = 0;  // M = Lk - Lq
  bool masked = true;
  int64_t max_distance = 0;  // 0 = none
  int64_t dmax = 1;          // state slots (largest dilation)
  const RemHeadDesc* heads = nullptr;  // host array [H]
};

// The SRU elementwise recurrence (SPEC §6): one independent lane per
// (batch, unit), a sequential loop over time. D counts the units of both
// directions; with bidirectional, units [D/2, D) run from t = L-1 down to 0.
struct SruProblem {
  int64_t L = 0, B = 0, D = 0;
  int64_t k = 3;               // columns of U per unit: 3, or 4 (u3 is x')
  bool bidirectional = false;
};

// Fused RSA attention (SPEC §2), FlashAttention style: the softmax part
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
  // Dropout on the attention probabilities (train only): the mask of element
  // ((b H + h) Lq + i) Lk + j is Philox counter offset + that index, exactly as
  // bernoulli_mask over the full [B, H, Lq, Lk] tensor.
  double dropout = 0;
  uint64_t seed = 0, offset = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // ---- memory ----
  virtual void* alloc(size_t nbytes) = 0;
  virtual void free(void* p, size_t nbytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes) = 0;

  // ---- fills and random numbers (n elements, contiguous) ----
  virtual void fill(DType dt, void* out, int64_t n, double value) = 0;
  virtual void arange(DType dt, void* out, int64_t n, double start, double step) = 0;
  // Counter-based (Philox 4x32-10): element i uses counter offset + i, so the
  // result does not depend on thread count or device.
  virtual void uniform(DType dt, void* out, int64_t n, double lo, double hi, uint64_t seed,
                       uint64_t offset) = 0;
  virtual void normal(DType dt, void* out, int64_t n, double mean, double std, uint64_t seed,
                      uint64_t offset) = 0;
  // out[i] = (u_i < keep) ? scale : 0
  virtual void bernoulli_mask(DType dt, void* out, int64_t n, double keep, double scale,
                              uint64_t seed, uint64_t offset) = 0;

  // ---- strided elementwise ----
  // out (operand 0, dtype dt_out) = in (operand 1, dtype dt_in), with conversion.
  virtual void copy(const ElemIter& it, DType dt_out, void* out, DType dt_in,
                    const void* in) = 0;
  // out = a op b; comparisons write 1/0 in dt.
  virtual void binary(BinaryOp op, DType dt, const ElemIter& it, void* out, const void* a,
                      const void* b) = 0;
  // out = cond != 0 ? a : b (cond has its own dtype).
  virtual void where(DType dt, const ElemIter& it, void* out, DType dt_cond, const void* cond,
                     const void* a, const void* b) = 0;

  // ---- contiguous elementwise ----
  virtual void unary(UnaryOp op, DType dt, int64_t n, const void* x, void* out, double alpha,
                     double beta) = 0;
  // out = grad * f'(v) where v is x or y as listed in UnaryGradOp.
  virtual void unary_grad(UnaryGradOp op, DType dt, int64_t n, const void* grad, const void* v,
                          void* out, double alpha) = 0;

  // ---- reductions over the middle axis of a contiguous [outer, r, inner] ----
  // out: [outer, inner]; argidx (i64, may be null) gets the position in r for max/min.
  virtual void reduce(ReduceOp op, DType dt, int64_t outer, int64_t r, int64_t inner,
                      const void* in, void* out, int64_t* argidx) = 0;

  // ---- linear algebra (row-major, cuBLAS-style strided batch) ----
  // C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b], op = transpose when ta/tb;
  // A[b] starts at A + b * stride_a (elements), likewise B and C.
  virtual void gemm(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
                    int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c,
                    int64_t batch) = 0;

  // ---- fused neural-network kernels over rows of a contiguous [rows, cols] ----
  virtual void softmax(DType dt, int64_t rows, int64_t cols, const void* x, void* y,
                       bool log) = 0;
  // dx = y * (dy - sum(dy * y))            (softmax)
  // dx = dy - exp(y) * sum(dy)             (log_softmax, y = log-probabilities)
  virtual void softmax_backward(DType dt, int64_t rows, int64_t cols, const void* dy,
                                const void* y, void* dx, bool log) = 0;
  // y = (x - mean) * rstd * w + b; w, b may be null. mean, rstd: [rows].
  virtual void layer_norm(DType dt, int64_t rows, int64_t cols, const void* x, const void* w,
                          const void* b, double eps, void* y, void* mean, void* rstd) = 0;
  // dw, db may be null (then w must be null too, or no affine gradient is wanted).
  virtual void layer_norm_backward(DType dt, int64_t rows, int64_t cols, const void* dy,
                                   const void* x, const void* mean, const void* rstd,
                                   const void* w, void* dx, void* dw, void* db) = 0;
  // Per row n: loss[n] = logsumexp(x[n]) - x[n, t[n]], 0 where t[n] == ignore;
  // lse[n] saved for backward.
  virtual void cross_entropy(DType dt, int64_t rows, int64_t cols, const void* logits,
                             const int64_t* target, int64_t ignore_index, void* loss,
                             void* lse) = 0;
  // dx[n, c] = g[n] * (softmax(x[n])_c - [c == t[n]]), 0 rows where t[n] == ignore.
  virtual void cross_entropy_backward(DType dt, int64_t rows, int64_t cols, const void* logits,
                                      const int64_t* target, int64_t ignore_index,
                                      const void* lse, const void* g, void* dx) = 0;

  // ---- gather / scatter along the middle axis of [outer, r, inner] ----
  // out[o, i, :] = src[o, idx[i], :], out: [outer, n_idx, inner]
  virtual void index_select(DType dt, int64_t outer, int64_t r, int64_t inner, const void* src,
                            const int64_t* idx, int64_t n_idx, void* out) = 0;
  // dst[o, idx[i], :] += src[o, i, :]  (duplicates in idx accumulate)
  virtual void index_add(DType dt, int64_t outer, int64_t r, int64_t inner, void* dst,
                         const int64_t* idx, int64_t n_idx, const void* src) = 0;

  // ---- Recurrence Encoding Matrices (a, theta: [H] per-head parameters) ----
  // Dense P [H, Lq, Lk] (p.B unused), the reference form.
  virtual void rem_matrix(DType dt, const RemProblem& p, const void* a, const void* theta,
                          void* P) = 0;
  // da[h] = sum_ij dP[h,i,j] df/da, dtheta likewise; dP [H, Lq, Lk].
  virtual void rem_matrix_backward(DType dt, const RemProblem& p, const void* a,
                                   const void* theta, const void* dP, void* da,
                                   void* dtheta) = 0;
  // y [B, H, Lq, D] = rows M.. of P v, v [B, H, Lk, D], by the O(Lk D) scan.
  // state_in/state_out [B, H, dmax, 2, D] (either may be null; masked only).
  virtual void rem_scan(DType dt, const RemProblem& p, const void* a, const void* theta,
                        const void* v, const void* state_in, void* y, void* state_out) = 0;
  // Gradients of the scan: dv [B, H, Lk, D], da/dtheta [H] (summed over B),
  // dstate_in (may be null). Recomputes the forward; never builds P.
  virtual void rem_scan_backward(DType dt, const RemProblem& p, const void* a,
                                 const void* theta, const void* v, const void* state_in,
                                 const void* dy, void* dv, void* da, void* dtheta,
                                 void* dstate_in) = 0;

  // ---- SRU recurrence (SPEC §6) ----
  // U [L, B, D, k] (u0 candidate, u1 forget, u2 reset, u3 skip when k == 4);
  // x [L, B, D] is x' when k == 3 (null when k == 4); v [2, D] = (v_f; v_r);
  // b [2, D] = (b_f; b_r); c0 [B, D] (null: zeros); mask [B, D] (null: none) is
  // the dropout mask on c as the official code places it:
  // h_t = x'_t + m ⊙ r_t ⊙ (c_t − x'_t) (a dropped lane passes x' through). Writes h [L, B, D], c [L, B, D] (every
  // c_t, which backward reads) and c_last [B, D] (the state after the last step
  // of each direction).
  // The default implementations throw: a backend without them cannot run SRU.
  virtual void sru_forward(DType dt, const SruProblem& p, const void* U, const void* x,
                           const void* v, const void* b, const void* c0, const void* mask,
                           void* h, void* c, void* c_last);
  // Gradients: dh [L, B, D]; dc [L, B, D] and dc_last [B, D] may be null (zero).
  // Writes dU [L, B, D, k], dx [L, B, D] (k == 3), dv [2, D] and db [2, D]
  // (summed over B), dc0 [B, D] (may be null).
  virtual void sru_backward(DType dt, const SruProblem& p, const void* U, const void* x,
                            const void* v, const void* b, const void* c0, const void* mask,
                            const void* c, const void* dh, const void* dc, const void* dc_last,
                            void* dU, void* dx, void* dv, void* db, void* dc0);

  // ---- fused RSA attention (optional) ----
  // Returns false when this backend (or this problem: head width, dtype) has
  // no fused kernel; ops/ then runs the composed path. gs [Hr] = sigmoid(mu)
  // per REM head, Y [B, Hr, Lq, D] (both null when Hr == 0). Writes O
  // [B, H, Lq, D], Oatt_r [B, Hr, Lq, D] (the softmax part of the REM heads,
  // for backward) and lse [B, H, Lq] (row log-sum-exp of the scores).
  virtual bool rsa_attention_fused(DType dt, const RsaFusedProblem& p, const void* q,
                                   const void* k, const void* v, const void* gs, const void* Y,
                                   void* O, void* Oatt_r, void* lse);
  // The gradients of the softmax part: dO is the gradient of O; the kernels
  // apply (1 - gs) on the REM heads themselves. Writes dq, dk, dv
  // [B, H, L, D] and, when dS is not null, dS [B, H, Lq, Lk] = dLoss/dScores
  // (the gradient of an additive bias before summing to its shape).
  virtual bool rsa_attention_fused_backward(DType dt, const RsaFusedProblem& p, const void* q,
                                            const void* k, const void* v, const void* gs,
                                            const void* O, const void* Oatt_r, const void* lse,
                                            const void* dO, void* dq, void* dk, void* dv,
                                            void* dS);
};

// The backend of a device; a clear Error when that device is not available.
Backend& backend(Device dev);
// Whether device cuda:index can be used; when not, *why (if given) says why
// (no CUDA backend in this build, no GPU or driver, index out of range).
bool cuda_is_available(int index = 0, std::string* why = nullptr);
// TF32 tensor-core math for f32 matmuls on CUDA (about 10 bits of mantissa in
// the products). Off by default; REMORA_CUDA_TF32=1 in the environment turns
// it on at startup. f64 is never affected.
void set_cuda_tf32(bool on);
bool cuda_tf32();
// For device backends that register themselves (the CUDA library does).
void register_backend(DeviceType type, Backend* (*get)(int index));

}  // namespace remora
