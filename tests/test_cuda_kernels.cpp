// SPDX-License-Identifier: BSD-3-Clause
// CUDA-only checks of single kernels: each skips visibly (WARN
// and return) without a GPU, like tests/test_cuda.cpp. The registry-driven
// backend parity test lives in tests/test_backends.cpp.
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../backends/backend.h"
#include "../backends/kernels.h"
#include "helpers.h"

using namespace remora;
using remora_test::spec_of;

namespace {

const Device kGpu = Device::cuda(0);

#define BE_REQUIRE_GPU()                                      \
  do {                                                        \
    std::string why_;                                         \
    if (!cuda_is_available(0, &why_)) {                       \
      WARN("skipped: no CUDA device: " << why_);              \
      return;                                                 \
    }                                                         \
  } while (0)

double max_rel(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to(Device::cpu()).to_vector(),
                            y = b.to(Device::cpu()).to_vector();
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i)
    e = std::max(e, std::fabs(x[i] - y[i]) / std::max(1.0, std::fabs(y[i])));
  return e;
}

}  // namespace

TEST_CASE("cuda kernels: the REM backward with B*Hr above 65,535", "[cuda]") {
  BE_REQUIRE_GPU();
  // k_grad_rho once put B*Hr on grid.y (at most 65,535): an invalid launch.
  RemSpec s = spec_of(2, 0, 0, 0, {}, true);
  const int64_t B = 40000, Hr = 2, L = 3, D = 1;
  Generator g(1);
  Tensor eta = Tensor::rand({2}, DType::f64, Device::cpu(), &g);
  Tensor v = Tensor::randn({B, Hr, L, D}, DType::f64, Device::cpu(), &g);
  Tensor grads[2];
  for (int which = 0; which < 2; ++which) {
    const Device d = which ? kGpu : Device::cpu();
    Tensor e = eta.to(d).detach().requires_grad_();  // on the CPU, to() is eta itself
    sum(rem_apply(s, e, Tensor(), Tensor(), v.to(d), L)).backward();
    grads[which] = e.grad().to(Device::cpu());
  }
  CHECK(max_rel(grads[1], grads[0]) < 1e-9);
}

TEST_CASE("cuda kernels: rem_scan with no keys writes the carried state", "[cuda]") {
  BE_REQUIRE_GPU();
  RemSpec s = spec_of(1, 1, 0, 0, {}, true);
  Generator g(2);
  Tensor eta = Tensor::rand({1}, DType::f64, Device::cpu(), &g).to(kGpu);
  Tensor nu = Tensor::rand({1}, DType::f64, Device::cpu(), &g).to(kGpu);
  Tensor th = Tensor::rand({1}, DType::f64, Device::cpu(), &g).to(kGpu);
  Tensor state = Tensor::randn({2, 3, 1, 2, 4}, DType::f64, Device::cpu(), &g);
  Tensor st;
  rem_apply(s, eta, nu, th, Tensor::zeros({2, 3, 0, 4}, DType::f64, kGpu), 0, Tensor(),
            state.to(kGpu), &st);
  REQUIRE(st.defined());
  CHECK(max_rel(st, state) == 0);
}

TEST_CASE("cuda kernels: fully masked rows in the fused attention follow FlashAttention-2",
          "[cuda][rsa]") {
  BE_REQUIRE_GPU();
  RemSpec s = spec_of(1, 0, 0, 0, {}, true);
  const int64_t B = 2, H = 3, Lq = 5, Lk = 7, D = 8;
  Generator g(3);
  const double inf = std::numeric_limits<double>::infinity();
  Tensor mask = Tensor::zeros({Lq, Lk});
  mask.select(0, 2).fill_(-inf);
  Tensor kp = Tensor::zeros({B, Lk}, DType::i64);
  kp.select(0, 1).fill_(1);
  Tensor q = Tensor::randn({B, H, Lq, D}, DType::f32, Device::cpu(), &g);
  Tensor k = Tensor::randn({B, H, Lk, D}, DType::f32, Device::cpu(), &g);
  Tensor v = Tensor::randn({B, H, Lk, D}, DType::f32, Device::cpu(), &g);
  Tensor eta = Tensor::rand({1}, DType::f32, Device::cpu(), &g), mu = Tensor::zeros({1});
  Tensor probe = Tensor::randn({B, H, Lq, D}, DType::f32, Device::cpu(), &g);
  RsaFusedProblem fp;
  fp.B = B; fp.H = H; fp.Hr = 1; fp.Lq = Lq; fp.Lk = Lk; fp.D = D;
  REQUIRE(supports(kGpu, OpKind::fused_rsa, {DType::f32, &fp}));
  Tensor out[2], gq[2], gk[2], gv[2];
  for (int which = 0; which < 2; ++which) {
    const Device d = which ? kGpu : Device::cpu();
    Tensor qd = q.to(d).detach().requires_grad_(), kd = k.to(d).detach().requires_grad_(),
           vd = v.to(d).detach().requires_grad_();
    Tensor o = rsa_attention(qd, kd, vd, s, eta.to(d), Tensor(), Tensor(), mu.to(d), mask.to(d),
                             kp.to(d));
    sum(o * probe.to(d)).backward();
    out[which] = o.detach().to(Device::cpu());
    gq[which] = qd.grad().to(Device::cpu());
    gk[which] = kd.grad().to(Device::cpu());
    gv[which] = vd.grad().to(Device::cpu());
  }
  for (const Tensor& t : {out[1], gq[1], gk[1], gv[1]})
    for (double x : t.to_vector()) REQUIRE(std::isfinite(x));
  CHECK(max_rel(out[1], out[0]) < 1e-5);
  CHECK(max_rel(gq[1], gq[0]) < 1e-5);
  CHECK(max_rel(gk[1], gk[0]) < 1e-5);
  CHECK(max_rel(gv[1], gv[0]) < 1e-5);
}

TEST_CASE("cuda kernels: SRU over more lanes than one grid covers", "[cuda][sru]") {
  BE_REQUIRE_GPU();
  // grid_for caps a launch at 2^20 blocks of 128 threads = 2^27 lanes; the
  // grid-stride loop runs the rest. L = 1 keeps this at ~1 GiB of f32.
  const int64_t L = 1, B = 1, D = (int64_t(1) << 27) + 3, k = 4;
  Tensor U = Tensor::full({L, B, D, k}, 0.5, DType::f32, kGpu);
  Tensor vv = Tensor::zeros({2, D}, DType::f32, kGpu), bb = Tensor::zeros({2, D}, DType::f32, kGpu);
  SruOutput o = sru_recurrence(U, Tensor(), vv, bb);
  // c_1 = sigmoid(0.5) * 0 + (1 - sigmoid(0.5)) * 0.5 in every lane, the last one too.
  const double f = 1 / (1 + std::exp(-0.5));
  const double c = (1 - f) * 0.5;
  CHECK(std::fabs(o.c_last.select(1, D - 1).to(Device::cpu()).item() - c) < 1e-6);
  CHECK(std::fabs(o.c_last.select(1, 0).to(Device::cpu()).item() - c) < 1e-6);
}

TEST_CASE("cuda kernels: the SRU problem checks hold on the GPU too", "[cuda][sru]") {
  BE_REQUIRE_GPU();
  SruBackwardArgs b;
  b.dt = DType::f32;
  b.p.L = 2;
  b.p.B = 1;
  b.p.D = 3;
  b.p.k = 3;
  b.p.bidirectional = true;
  Tensor m = Tensor::zeros({64}, DType::f32, kGpu);
  void* p = m.raw_data();
  b.U = b.v = b.b = b.c = b.dh = b.x = p;
  b.dU = b.dv = b.db = b.dx = p;
  CHECK_THROWS_WITH(kern::sru_backward(kGpu, b), Catch::Contains("even D"));
  b.p.bidirectional = false;
  b.x = nullptr;
  CHECK_THROWS_WITH(kern::sru_backward(kGpu, b), Catch::Contains("needs x"));
}
