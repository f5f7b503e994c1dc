// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The SRU elementwise recurrence (docs/math.md, section The SRU elementwise
/// recurrence; Lei et al., official asappresearch/sru).
///
/// Letters: L time, B batch, D units (of both directions with bidirectional),
/// k columns of U per unit. Time-major like the official code.
///
///     f_t = sigmoid(u1_t + v_f * c_(t-1) + b_f)
///     r_t = sigmoid(u2_t + v_r * c_(t-1) + b_r)
///     c_t = f_t * c_(t-1) + (1 - f_t) * u0_t
///     h_t = x'_t + m * r_t * (c_t - x'_t)
///
/// (all products elementwise). m is the dropout mask on c (the official
/// placement: sru/ops.py and the CUDA kernel compute h = (c - x') mask r + x',
/// so a dropped lane passes x' through; without a mask
/// h_t = r_t * c_t + (1 - r_t) * x'_t).
///
///     Tensor U = ...;                                   // [L, B, D, 3]
///     SruOutput o = sru_recurrence(U, x, v, b, c0);    // o.h [L, B, D], o.c_last [B, D]
///     sum(o.h).backward();                              // gradients for U, x, v, b, c0
#pragma once
#include "../core/tensor.h"

namespace remora {

/// The outputs of sru_recurrence, all of U's dtype and device.
struct SruOutput {
  Tensor h;       ///< [L, B, D], the outputs h_t.
  Tensor c;       ///< [L, B, D], every c_t (differentiable too).
  Tensor c_last;  ///< [B, D], the state after each direction's last step.
};

/// U [L, B, D, k] with columns (u0 candidate, u1 forget, u2 reset[, u3 skip]):
///   k == 3: x [L, B, D] is x';  k == 4: x must be undefined and u3 is x'.
/// v [2, D] = (v_f; v_r), b [2, D] = (b_f; b_r); c0 [B, D] (undefined = zeros);
/// mask [B, D] (undefined = none; not differentiated). bidirectional: units
/// [D/2, D) run from t = L-1 down to 0 (D must be even).
/// f32 or f64 (16-bit is an Error: convert to f32), all of one dtype on one
/// device (the CPU or CUDA); a shape that does not fit is an Error naming the
/// argument. One fused autograd node whose backward is the device's SRU
/// backward kernel (a reverse sweep per lane) gives gradients for U, x, v, b
/// and c0, from any of h, c and c_last.
SruOutput sru_recurrence(const Tensor& U, const Tensor& x, const Tensor& v, const Tensor& b,
                         const Tensor& c0 = Tensor(), const Tensor& mask = Tensor(),
                         bool bidirectional = false);

/// The same mathematics composed from primitive ops, one step of t at a time
/// (the reference for the fused kernel; slow, autograd through every step).
/// Same arguments, checks and outputs as sru_recurrence.
SruOutput sru_recurrence_reference(const Tensor& U, const Tensor& x, const Tensor& v,
                                   const Tensor& b, const Tensor& c0 = Tensor(),
                                   const Tensor& mask = Tensor(), bool bidirectional = false);

}  // namespace remora
