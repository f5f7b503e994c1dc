// SPDX-License-Identifier: BSD-3-Clause
// Helpers the REM ops (ops/rem.cpp) share with RSA attention (ops/rsa.cpp);
// not part of the public API.
#pragma once
#include <vector>

#include "../backends/kernels.h"
#include "rem.h"

namespace remora {
namespace rem_detail {

struct HeadParams {
  std::vector<RemHeadDesc> desc;
  Tensor a, theta;  // [Hr]: lambda or gamma, and theta (0 for regular heads)
  int64_t dmax = 1;
};

// Checks the parameter tensors against the spec and maps them to per-head
// (a, theta), differentiably: lambda = tanh(eta), gamma = sigmoid(nu).
HeadParams head_params(const char* op, const RemSpec& spec, const Tensor& eta, const Tensor& nu,
                       const Tensor& theta, DType dt, Device dev);
// The kernels' problem description for a [B, Hr, Lk, D] scan with Lq query rows.
RemProblem problem(const RemSpec& spec, const HeadParams& hp, int64_t B, int64_t Lq, int64_t Lk,
                   int64_t D);
// A tensor's data, or null when it is undefined (an optional kernel argument).
void* opt_ptr(const Tensor& t);
RemScanBackwardArgs scan_backward_args(const RemProblem& p, const Tensor& a, const Tensor& theta,
                                       const Tensor& v, const Tensor& state_in, const Tensor& dy,
                                       const Tensor& dv, const Tensor& da, const Tensor& dtheta,
                                       const Tensor& dstate_in);
// 1 where the key is kept, 0 where padded, reshaped to `shape`.
Tensor keep_mask(const char* op, const Tensor& kp, int64_t Lk, DType dt, const Shape& shape);
// The scan as an op on per-head parameters: y = rows M.. of P v.
Tensor scan_op(const RemSpec& spec, const HeadParams& hp, const Tensor& v, int64_t Lq,
               const Tensor& state_in, Tensor* state_out);

}  // namespace rem_detail
}  // namespace remora
