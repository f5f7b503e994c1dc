// SPDX-License-Identifier: BSD-3-Clause
// The kernel-table registry (kernels.h) and the problem checks every backend shares.
#include "kernels.h"

#include "../core/device_registry.h"
#include "../core/error.h"
#include "backend.h"

namespace remora {
namespace detail {

template <class K>
const K*& kernel_slot(DeviceType type) {
  static const K* slots[kMaxDeviceTypes] = {};
  const int i = int(type);
  REMORA_CHECK(i >= 0 && i < kMaxDeviceTypes,
               K::kFeature << ": device type " << i << " is beyond the registry's " << kMaxDeviceTypes);
  return slots[i];
}
#define REMORA_INSTANTIATE_SLOT(K) template const K*& kernel_slot<K>(DeviceType);
REMORA_KERNEL_TABLES(REMORA_INSTANTIATE_SLOT)
#undef REMORA_INSTANTIATE_SLOT

void activate_device(Device dev) { backend(dev).activate(); }

void kernels_not_available(const char* feature, Device dev) {
  // backend(dev) first: a device that does not exist says so in its own words.
  backend(dev);
  REMORA_FAIL(feature << " are not available on " << dev.str()
                      << ": no backend registered them for this device type");
}

}  // namespace detail

namespace {
void check_rem_common(const char* kernel, const RemProblem& p, bool has_state) {
  REMORA_CHECK(p.B >= 0 && p.H >= 0 && p.D >= 0 && p.Lq >= 0 && p.Lk >= p.Lq,
               kernel << ": need B, H, D >= 0 and 0 <= Lq <= Lk, got B=" << p.B << " H=" << p.H
                      << " Lq=" << p.Lq << " Lk=" << p.Lk << " D=" << p.D);
  REMORA_CHECK(p.H == 0 || p.heads != nullptr, kernel << ": the head table is missing");
  REMORA_CHECK(p.dmax >= 1, kernel << ": dmax must be >= 1, got " << p.dmax);
  // A carried state is defined for the untruncated causal REM only (ops/rem.h).
  REMORA_CHECK(!has_state || (p.masked && p.max_distance == 0),
               kernel << ": a carried state needs a masked REM without max_distance (a "
                         "truncated REM has no finite state; see ops/rem.h)");
}
void check_sru_common(const char* kernel, const SruProblem& p, const void* x) {
  REMORA_CHECK(p.k == 3 || p.k == 4, kernel << ": k must be 3 or 4, got " << p.k);
  REMORA_CHECK(p.L >= 0 && p.B >= 0 && p.D >= 0,
               kernel << ": need L, B, D >= 0, got L=" << p.L << " B=" << p.B << " D=" << p.D);
  REMORA_CHECK(p.k == 4 || x != nullptr || p.L * p.B * p.D == 0,
               kernel << ": k = 3 needs x (x' is not a column of U)");
  REMORA_CHECK(!p.bidirectional || p.D % 2 == 0,
               kernel << ": bidirectional needs an even D (units of both directions), got "
                      << p.D);
}
}  // namespace

namespace kern {

void rem_matrix(Device dev, const RemMatrixArgs& a) {
  check_rem_common("rem_matrix", a.p, false);
  kernels<RemKernels>(dev).matrix(a);
}
void rem_matrix_backward(Device dev, const RemMatrixBackwardArgs& a) {
  check_rem_common("rem_matrix_backward", a.p, false);
  kernels<RemKernels>(dev).matrix_backward(a);
}
void rem_scan(Device dev, const RemScanArgs& a) {
  check_rem_common("rem_scan", a.p, a.state_in || a.state_out);
  kernels<RemKernels>(dev).scan(a);
}
void rem_scan_backward(Device dev, const RemScanBackwardArgs& a) {
  check_rem_common("rem_scan_backward", a.p, a.state_in || a.dstate_in);
  kernels<RemKernels>(dev).scan_backward(a);
}
void sru_forward(Device dev, const SruForwardArgs& a) {
  check_sru_common("sru_forward", a.p, a.x);
  kernels<SruKernels>(dev).forward(a);
}
void sru_backward(Device dev, const SruBackwardArgs& a) {
  check_sru_common("sru_backward", a.p, a.x);
  REMORA_CHECK(a.p.k == 4 || a.dx != nullptr || a.p.L * a.p.B * a.p.D == 0,
               "sru_backward: k = 3 needs dx (the gradient of x')");
  kernels<SruKernels>(dev).backward(a);
}
static void check_rsa_problem(const char* kernel, const RsaFusedProblem& p) {
  REMORA_CHECK(!p.pos_q == !p.pos_r, kernel << ": the positional term needs both pos_q and pos_r");
  REMORA_CHECK(!(p.pos_q || p.causal) || p.Lq <= p.Lk,
               kernel << ": the positional term and the causal window need Lq <= Lk, got Lq = "
                      << p.Lq << ", Lk = " << p.Lk);
}
void rsa_forward(Device dev, const RsaForwardArgs& a) {
  check_rsa_problem("rsa_attention", a.p);
  const RsaKernels& k = kernels<RsaKernels>(dev);
  REMORA_CHECK(supports(dev, OpKind::fused_rsa, {a.dt, &a.p}),
               "rsa_attention: the fused kernels on " << dev.str() << " do not take this problem (D = "
                                                      << a.p.D << ")");
  k.forward(a);
}
void rsa_backward(Device dev, const RsaBackwardArgs& a) {
  check_rsa_problem("rsa_attention backward", a.p);
  const RsaKernels& k = kernels<RsaKernels>(dev);
  REMORA_CHECK(!a.p.pos_q || (a.dpos_q && a.dpos_r),
               "rsa_attention backward: a problem with the positional term needs dpos_q and dpos_r");
  REMORA_CHECK(supports(dev, OpKind::fused_rsa, {a.dt, &a.p}),
               "rsa_attention backward: the fused kernels on " << dev.str()
                                                               << " do not take this problem (D = " << a.p.D
                                                               << ")");
  k.backward(a);
}

void rel_shift(Device dev, const RelShiftArgs& a) {
  REMORA_CHECK(a.N >= 0 && a.Lq >= 0 && a.Lk >= 0,
               "rel_shift: need N, Lq, Lk >= 0, got " << a.N << ", " << a.Lq << ", " << a.Lk);
  kernels<RelShiftKernels>(dev).forward(a);
}
void rel_shift_backward(Device dev, const RelShiftBackwardArgs& a) {
  REMORA_CHECK(a.N >= 0 && a.Lq >= 0 && a.Lk >= 0, "rel_shift backward: need N, Lq, Lk >= 0, got "
                                                       << a.N << ", " << a.Lq << ", " << a.Lk);
  kernels<RelShiftKernels>(dev).backward(a);
}

void adam(Device dev, const AdamArgs& a) {
  REMORA_CHECK(a.n >= 0, "adam: need n >= 0, got " << a.n);
  kernels<OptimKernels>(dev).adam(a);
}

}  // namespace kern

}  // namespace remora
