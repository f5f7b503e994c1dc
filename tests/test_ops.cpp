// SPDX-License-Identifier: BSD-3-Clause
// Every fast path against a naive reference written here in plain loops over
// to_vector() data (llm.c's habit: the slow version stays beside the fast one).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <remora/remora.h>

#include "helpers.h"

using namespace remora;
using remora_test::check_close;

namespace {

// A tensor's logical values in row-major order plus its shape.
struct Ref {
  std::vector<double> v;
  Shape s;
};
Ref ref(const Tensor& t) { return {t.to_vector(), t.shape()}; }

// Calls f(index) for every multi-index of shape s, row-major.
void for_each_index(const Shape& s, const std::function<void(const Shape&)>& f) {
  const int64_t n = shape_numel(s);
  Shape idx(s.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rem = flat;
    for (size_t d = s.size(); d-- > 0;) {
      idx[d] = rem % s[d];
      rem /= s[d];
    }
    f(idx);
  }
}

// r's value at out-index oi under NumPy broadcasting (right-aligned, size-1 dims repeat).
double bget(const Ref& r, const Shape& oi) {
  const size_t lead = oi.size() - r.s.size();
  int64_t off = 0, stride = 1;
  for (size_t d = r.s.size(); d-- > 0;) {
    const int64_t i = r.s[d] == 1 ? 0 : oi[lead + d];
    off += i * stride;
    stride *= r.s[d];
  }
  return r.v[size_t(off)];
}

Shape bshape(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Ref naive_binary(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
  Ref out{{}, bshape(a.s, b.s)};
  for_each_index(out.s, [&](const Shape& i) { out.v.push_back(f(bget(a, i), bget(b, i))); });
  return out;
}

// NumPy matmul semantics, including 1-D promotion and broadcast batch dims.
Ref naive_matmul(Ref a, Ref b) {
  const bool va = a.s.size() == 1, vb = b.s.size() == 1;
  if (va) a.s.insert(a.s.begin(), 1);
  if (vb) b.s.push_back(1);
  const int64_t M = a.s[a.s.size() - 2], K = a.s.back(), N = b.s.back();
  REQUIRE(b.s[b.s.size() - 2] == K);
  const Shape batch = bshape(Shape(a.s.begin(), a.s.end() - 2), Shape(b.s.begin(), b.s.end() - 2));
  Ref out{{}, batch};
  out.s.push_back(M);
  out.s.push_back(N);
  for_each_index(out.s, [&](const Shape& oi) {
    Shape ia = oi, ib = oi;  // [..., m, n] -> [..., m, k] and [..., k, n]
    double s = 0;
    for (int64_t k = 0; k < K; ++k) {
      ia.back() = k;
      ib[ib.size() - 2] = k;
      s += bget(a, ia) * bget(b, ib);
    }
    out.v.push_back(s);
  });
  if (va) out.s.erase(out.s.end() - 2);
  if (vb) out.s.pop_back();
  return out;
}

// Sum over dims (already wrapped and sorted).
Ref naive_sum(const Ref& x, const std::vector<int64_t>& dims, bool keepdim) {
  auto reduced = [&](size_t d) { return std::find(dims.begin(), dims.end(), int64_t(d)) != dims.end(); };
  Shape os, ks;  // output shape; keepdim shape
  for (size_t d = 0; d < x.s.size(); ++d) {
    ks.push_back(reduced(d) ? 1 : x.s[d]);
    if (!reduced(d)) os.push_back(x.s[d]);
    else if (keepdim) os.push_back(1);
  }
  Ref out{std::vector<double>(size_t(shape_numel(ks)), 0.0), keepdim ? ks : os};
  const Shape kst = remora_test::rm_strides(ks);
  size_t flat = 0;
  for_each_index(x.s, [&](const Shape& i) {
    int64_t off = 0;
    for (size_t d = 0; d < i.size(); ++d) off += (reduced(d) ? 0 : i[d]) * kst[d];
    out.v[size_t(off)] += x.v[flat++];
  });
  return out;
}

void check_ref(const Tensor& got, const Ref& want, double atol, double rtol) {
  INFO("got " << got.str() << ", want shape " << shape_str(want.s));
  REQUIRE(got.shape() == want.s);
  check_close(got.to_vector(), want.v, atol, rtol);
}

Tensor randn(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return Tensor::randn(s, dt, Device::cpu(), &g);
}

}  // namespace

// ---------------------------------------------------------------- matmul

TEST_CASE("matmul matches the naive triple loop", "[ops][matmul]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-4 : 1e-12;
    DYNAMIC_SECTION(dtype_name(dt)) {
      uint64_t seed = 100;
      auto mm = [&](const Tensor& a, const Tensor& b) {
        INFO(shape_str(a.shape()) << " @ " << shape_str(b.shape()) << " strides "
                                  << shape_str(a.strides()) << " / " << shape_str(b.strides()));
        check_ref(matmul(a, b), naive_matmul(ref(a), ref(b)), tol, tol);
      };
      auto R = [&](const Shape& s) { return randn(s, dt, ++seed); };

      // 2-D: [M, K] @ [K, N]
      mm(R({3, 4}), R({4, 5}));
      mm(R({17, 33}), R({33, 9}));
      // batched: [B, M, K] @ [B, K, N]
      mm(R({2, 3, 4}), R({2, 4, 5}));
      // broadcast batch dims: [2, 1, M, K] @ [3, K, N] -> [2, 3, M, N]
      mm(R({2, 1, 3, 4}), R({3, 4, 5}));
      mm(R({1, 3, 4}), R({4, 2, 4, 5}));
      // batch dims no one stride walks: one batched gemm per index of the first
      // (XL's position term [B, H, Lq, D] @ [H, D, Lk] with a transposed view)
      mm(R({2, 3, 4, 5}), R({3, 6, 5}).transpose(-1, -2));
      mm(R({2, 2, 3, 4, 5}), R({3, 5, 2}));
      // [B, M, K] @ [K, N]: folded into one gemm of B*M rows
      mm(R({5, 3, 4}), R({4, 6}));
      mm(R({2, 3, 5, 4}), R({4, 6}));
      // [K] vectors and 1-D promotion
      mm(R({4}), R({4}));        // -> []
      mm(R({4}), R({4, 5}));     // -> [5]
      mm(R({3, 4}), R({4}));     // -> [3]
      mm(R({2, 3, 4}), R({4}));  // -> [2, 3]
      mm(R({4}), R({2, 4, 5}));  // -> [2, 5]
      // sizes 1 and 0
      mm(R({1, 1}), R({1, 1}));
      mm(R({1, 4}), R({4, 1}));
      mm(R({4, 1}), R({1, 4}));
      mm(R({3, 1, 4}), R({3, 4, 1}));
      mm(R({0, 3}), R({3, 4}));     // -> [0, 4]
      mm(R({3, 0}), R({0, 4}));     // K = 0: zeros [3, 4]
      mm(R({2, 0, 3}), R({3, 4}));  // -> [2, 0, 4]
      mm(R({0, 2, 3}), R({3, 4}));  // no batches
      // transposed operands (BLAS transpose flags)
      mm(R({4, 3}).t(), R({4, 5}));           // A^T: [3, 4]
      mm(R({3, 4}), R({5, 4}).t());           // B^T: [4, 5]
      mm(R({4, 3}).t(), R({5, 4}).t());       // both
      mm(R({2, 4, 3}).transpose(-1, -2), R({2, 5, 4}).transpose(-1, -2));
      mm(R({2, 4, 3}).transpose(-1, -2), R({4, 5}));  // transposed A cannot fold
      // permuted batch dims and sliced (ld > K) operands
      mm(R({3, 2, 4}).permute({1, 0, 2}), R({2, 4, 5}));  // [2, 3, 4], batch stride 4
      mm(R({2, 3, 4}), R({5, 2, 4}).permute({1, 2, 0}));  // B [2, 4, 5]: transposed, batch stride 4
      mm(R({3, 8}).slice(1, 0, 4), R({4, 6}));            // A rows of 8, K = 4
      mm(R({2, 3, 8}).slice(2, 2, 6), R({4, 6}));         // folded with lda 8
      mm(R({3, 4}), R({4, 10}).slice(1, 1, 10, 2));       // B with column step 2: copied
      mm(R({4, 6}).slice(0, 0, 4, 2), R({6, 3}));         // A row stride 12
      mm(R({3, 4}).slice(0, 1, 2), R({4, 5}));            // offset view
      // expanded (stride 0) operands
      mm(R({1, 4}).expand({3, 4}), R({4, 5}));
      mm(R({3, 4}), R({4, 1}).expand({4, 5}));
      mm(R({3, 4}).expand({2, 3, 4}), R({2, 4, 5}));
    }
  }
}

TEST_CASE("matmul gradients match the naive formulas", "[ops][matmul][autograd]") {
  // a: [2, 3, 4] (transposed view), b: [4, 5] (broadcast over the batch)
  Tensor a = randn({2, 4, 3}, DType::f64, 1).transpose(-1, -2).detach().requires_grad_();
  Tensor b = randn({4, 5}, DType::f64, 2).requires_grad_();
  Tensor g = randn({2, 3, 5}, DType::f64, 3);
  matmul(a, b).backward(g);
  // dA = G @ B^T, dB = sum_batch A^T @ G
  Ref da = naive_matmul(ref(g), ref(b.detach().t()));
  Ref db_b = naive_matmul(ref(a.detach().transpose(-1, -2)), ref(g));  // [2, 4, 5]
  check_ref(a.grad(), da, 1e-12, 1e-12);
  check_ref(b.grad(), naive_sum(db_b, {0}, false), 1e-12, 1e-12);

  // Two batch dims, contiguous a: dB takes the stacked-rows gemm (ops/linalg.cpp).
  Tensor a4 = randn({2, 3, 4, 5}, DType::f64, 4).requires_grad_();
  Tensor b4 = randn({5, 6}, DType::f64, 5).requires_grad_();
  Tensor g4 = randn({2, 3, 4, 6}, DType::f64, 6);
  matmul(a4, b4).backward(g4);
  Ref db4 = naive_matmul(ref(a4.detach().transpose(-1, -2)), ref(g4));  // [2, 3, 5, 6]
  check_ref(b4.grad(), naive_sum(db4, {0, 1}, false), 1e-12, 1e-12);
  check_ref(a4.grad(), naive_matmul(ref(g4), ref(b4.detach().t())), 1e-12, 1e-12);
}

TEST_CASE("linear is x @ w^T + b", "[ops][matmul]") {
  Tensor x = randn({2, 3, 4}, DType::f32, 5), w = randn({6, 4}, DType::f32, 6),
         b = randn({6}, DType::f32, 7);
  Ref want = naive_binary(naive_matmul(ref(x), ref(w.t())), ref(b), std::plus<double>());
  check_ref(linear(x, w, b), want, 1e-5, 1e-5);
  check_ref(linear(x, w), naive_matmul(ref(x), ref(w.t())), 1e-5, 1e-5);
}

// ---------------------------------------------------------------- elementwise

TEST_CASE("binary ops broadcast over contiguous and strided inputs", "[ops][elementwise]") {
  using F = std::function<double(double, double)>;
  struct Op {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> fn;
    F ref;
  };
  const std::vector<Op> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double x, double y) { return x + y; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double x, double y) { return x - y; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double x, double y) { return x * y; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double x, double y) { return x / y; }},
      {"maximum", maximum, [](double x, double y) { return std::max(x, y); }},
      {"minimum", minimum, [](double x, double y) { return std::min(x, y); }},
  };
  struct Case {
    Tensor a, b;
  };
  for (DType dt : {DType::f32, DType::f64}) {
    uint64_t seed = 200;
    auto R = [&](const Shape& s) { return randn(s, dt, ++seed); };
    const std::vector<Case> cases = {
        {R({3, 4}), R({3, 4})},                             // same shape
        {R({3, 4}), R({4})},                                // row vector
        {R({3, 1}), R({1, 4})},                             // outer
        {R({2, 1, 4}), R({3, 1})},                          // [2, 3, 4]
        {R({4, 3}).t(), R({3, 4})},                         // transposed a
        {R({5, 6}).slice(1, 1, 6, 2), R({3}).unsqueeze(0)}, // strided a: [5, 3]
        {R({2, 3, 4}).permute({2, 0, 1}), R({4, 2, 3}).slice(0, 0, 4)},  // [4, 2, 3]
        {R({}), R({2, 3})},                                 // 0-d
        {R({1, 4}).expand({3, 4}), R({3, 4}).t().t()},      // expanded a
        {R({0, 3}), R({3})},                                // empty
        {R({200, 300}), R({300, 200}).t()},                 // large enough to run in parallel
    };
    for (const Op& op : ops)
      for (size_t c = 0; c < cases.size(); ++c) {
        INFO(op.name << " " << dtype_name(dt) << " case " << c << ": "
                     << shape_str(cases[c].a.shape()) << " with " << shape_str(cases[c].b.shape()));
        check_ref(op.fn(cases[c].a, cases[c].b), naive_binary(ref(cases[c].a), ref(cases[c].b), op.ref),
                  0, dt == DType::f32 ? 1e-6 : 0);
      }
  }
  // i64 arithmetic is exact.
  Tensor ia = Tensor::from_vector(std::vector<int64_t>{7, -3, 10}, {3, 1});
  Tensor ib = Tensor::from_vector(std::vector<int64_t>{2, 5});
  CHECK((ia * ib).to_i64_vector() == std::vector<int64_t>{14, 35, -6, -15, 20, 50});
  CHECK((ia - ib).to_i64_vector() == std::vector<int64_t>{5, 2, -5, -8, 8, 5});
  CHECK((ia + ib).dtype() == DType::i64);
}

TEST_CASE("scalar operators and unary ops match std::", "[ops][elementwise]") {
  Tensor x = Tensor::from_vector(std::vector<double>{-2.5, -0.5, 0.25, 1, 3}, {5}, DType::f64);
  const std::vector<double> xv = x.to_vector();
  auto map = [&](double (*f)(double)) {
    std::vector<double> o;
    for (double v : xv) o.push_back(f(v));
    return o;
  };
  auto mapl = [&](const std::function<double(double)>& f) {
    std::vector<double> o;
    for (double v : xv) o.push_back(f(v));
    return o;
  };
  check_close(x + 2.0, mapl([](double v) { return v + 2; }), 0, 1e-15);
  check_close(2.0 - x, mapl([](double v) { return 2 - v; }), 0, 1e-15);
  check_close(x - 2.0, mapl([](double v) { return v - 2; }), 0, 1e-15);
  check_close(x * 3.0, mapl([](double v) { return v * 3; }), 0, 1e-15);
  check_close(x / 4.0, mapl([](double v) { return v / 4; }), 0, 1e-15);
  check_close(3.0 / x, mapl([](double v) { return 3 / v; }), 0, 1e-15);
  check_close(-x, mapl([](double v) { return -v; }), 0, 0);
  check_close(exp(x), map(std::exp), 0, 1e-15);
  check_close(tanh(x), map(std::tanh), 0, 1e-15);
  check_close(abs(x), map(std::fabs), 0, 0);
  check_close(sin(x), map(std::sin), 0, 1e-15);
  check_close(cos(x), map(std::cos), 0, 1e-15);
  check_close(relu(x), mapl([](double v) { return v > 0 ? v : 0; }), 0, 0);
  check_close(pow(x, 2), mapl([](double v) { return v * v; }), 0, 1e-15);
  check_close(pow(x, 3), mapl([](double v) { return v * v * v; }), 0, 1e-14);
  Tensor p = abs(x) + 0.5;
  const std::vector<double> pv = p.to_vector();
  std::vector<double> lg, sq, p15;
  for (double v : pv) {
    lg.push_back(std::log(v));
    sq.push_back(std::sqrt(v));
    p15.push_back(std::pow(v, 1.5));
  }
  check_close(log(p), lg, 0, 1e-15);
  check_close(sqrt(p), sq, 0, 1e-15);
  check_close(pow(p, 1.5), p15, 0, 1e-14);
  // Unary ops on a non-contiguous view.
  Tensor m = randn({4, 3}, DType::f64, 9).t();  // [3, 4]
  std::vector<double> want;
  for (double v : m.to_vector()) want.push_back(std::exp(v));
  check_close(exp(m), want, 0, 1e-15);
}

TEST_CASE("gelu is the exact erf form", "[ops][elementwise]") {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = Tensor::from_vector(std::vector<double>{-6, -3, -1, -0.5, 0, 0.5, 1, 2, 6}, {}, dt);
    std::vector<double> want;
    for (double v : x.to_vector()) want.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    check_close(gelu(x), want, dt == DType::f32 ? 1e-6 : 1e-15, dt == DType::f32 ? 1e-6 : 1e-14);
  }
  // Known values: gelu(1) = Phi(1), far from the tanh approximation's 0.841192.
  Tensor one = Tensor::scalar(1.0, DType::f64);
  CHECK(gelu(one).item() == Approx(0.8413447460685429).epsilon(1e-14));
  CHECK(gelu(-one).item() == Approx(-0.15865525393145707).epsilon(1e-13));
}

TEST_CASE("sigmoid is stable at +-100", "[ops][elementwise]") {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = Tensor::from_vector(std::vector<double>{-100, -20, 0, 20, 100}, {}, dt);
    const std::vector<double> y = sigmoid(x).to_vector();
    for (double v : y) CHECK(std::isfinite(v));
    CHECK(y[2] == 0.5);
    CHECK(y[4] == 1.0);
    CHECK(y[0] >= 0.0);
    CHECK(y[0] < 1e-40);
    CHECK(y[1] == Approx(1 / (1 + std::exp(20.0))).epsilon(1e-6));
    CHECK(y[3] == Approx(1 / (1 + std::exp(-20.0))).epsilon(1e-6));
    // Its gradient is finite too.
    Tensor xg = x.detach().requires_grad_();
    sigmoid(xg).sum().backward();
    for (double v : xg.grad().to_vector()) CHECK(std::isfinite(v));
  }
  CHECK(sigmoid(Tensor::scalar(-100, DType::f64)).item() ==
        Approx(std::exp(-100.0) / (1 + std::exp(-100.0))).epsilon(1e-12));
}

TEST_CASE("comparisons give 1/0 in the input dtype", "[ops][elementwise]") {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3, 2, 2, 0}, {2, 3}, DType::f64);
  Tensor b = Tensor::from_vector(std::vector<double>{2, 2, 1}, {3}, DType::f64);
  using F = std::function<double(double, double)>;
  const std::vector<std::pair<std::function<Tensor(const Tensor&, const Tensor&)>, F>> ops = {
      {eq, [](double x, double y) { return double(x == y); }},
      {ne, [](double x, double y) { return double(x != y); }},
      {lt, [](double x, double y) { return double(x < y); }},
      {le, [](double x, double y) { return double(x <= y); }},
      {gt, [](double x, double y) { return double(x > y); }},
      {ge, [](double x, double y) { return double(x >= y); }},
  };
  for (size_t k = 0; k < ops.size(); ++k) {
    INFO("comparison " << k);
    Tensor r = ops[k].first(a, b);
    CHECK(r.dtype() == DType::f64);
    CHECK_FALSE(r.requires_grad());
    check_ref(r, naive_binary(ref(a), ref(b), ops[k].second), 0, 0);
    // transposed operand
    check_ref(ops[k].first(a.t(), b.unsqueeze(1)), naive_binary(ref(a.t()), ref(b.unsqueeze(1)), ops[k].second), 0, 0);
  }
  Tensor i = Tensor::from_vector(std::vector<int64_t>{1, 5, 3});
  CHECK(lt(i, Tensor::scalar(3, DType::i64)).to_i64_vector() == std::vector<int64_t>{1, 0, 0});
  CHECK(lt(i, Tensor::scalar(3, DType::i64)).dtype() == DType::i64);
}

TEST_CASE("where and masked_fill broadcast", "[ops][elementwise]") {
  // cond: [2, 1], a: [3], b: [2, 3]
  Tensor cond = Tensor::from_vector(std::vector<double>{1, 0}, {2, 1}, DType::f32);
  Tensor a = Tensor::from_vector(std::vector<double>{10, 20, 30}, {3}, DType::f64);
  Tensor b = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  CHECK(where(cond, a, b).to_vector() == std::vector<double>{10, 20, 30, 4, 5, 6});
  // i64 condition and a transposed b
  Tensor ci = Tensor::from_vector(std::vector<int64_t>{0, 3, 0}, {3, 1});
  CHECK(where(ci, Tensor::scalar(-1, DType::f64), b.t()).to_vector() ==
        std::vector<double>{1, 4, -1, -1, 3, 6});

  // masked_fill: mask [1, 3] broadcast to x [2, 3]; -inf is allowed.
  Tensor mask = Tensor::from_vector(std::vector<double>{0, 1, 1}, {1, 3}, DType::f64);
  Tensor mf = masked_fill(b, mask, -std::numeric_limits<double>::infinity());
  const std::vector<double> v = mf.to_vector();
  CHECK(v[0] == 1);
  CHECK(v[3] == 4);
  CHECK(std::isinf(v[1]));
  CHECK(v[5] < 0);
  // Gradients: a gets cond, b gets 1 - cond (summed to their shapes).
  Tensor ag = a.detach().requires_grad_(), bg = b.detach().requires_grad_();
  where(cond, ag, bg).sum().backward();
  check_close(ag.grad(), {1, 1, 1}, 0, 0);
  check_close(bg.grad(), {0, 0, 0, 1, 1, 1}, 0, 0);
  Tensor xg = b.detach().requires_grad_();
  masked_fill(xg, mask, 0).sum().backward();
  check_close(xg.grad(), {1, 0, 0, 1, 0, 0}, 0, 0);
}

// ---------------------------------------------------------------- reductions

TEST_CASE("sum and mean over dim sets match the naive loop", "[ops][reduce]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    // x: [3, 4, 5] contiguous; xt: [5, 4, 3] transposed view
    Tensor x = randn({3, 4, 5}, dt, 300);
    Tensor xt = randn({3, 4, 5}, dt, 301).permute({2, 1, 0});
    const std::vector<Shape> dim_sets = {{}, {0}, {1}, {2}, {-1}, {0, 1}, {1, 2}, {0, 2}, {2, 0}, {0, 1, 2}};
    for (const Tensor& t : {x, xt})
      for (const Shape& dims : dim_sets)
        for (bool keepdim : {false, true}) {
          INFO(dtype_name(dt) << " " << shape_str(t.shape()) << " dims " << shape_str(dims)
                              << " keepdim " << keepdim);
          std::vector<int64_t> wd;
          if (dims.empty())
            wd = {0, 1, 2};
          else
            for (int64_t d : dims) wd.push_back(d < 0 ? d + 3 : d);
          std::sort(wd.begin(), wd.end());
          const Ref s = naive_sum(ref(t), wd, keepdim);
          check_ref(sum(t, dims, keepdim), s, tol, tol);
          int64_t count = 1;
          for (int64_t d : wd) count *= t.shape()[size_t(d)];
          Ref m = s;
          for (double& v : m.v) v /= double(count);
          check_ref(mean(t, dims, keepdim), m, tol, tol);
        }
  }
  // 4-D with two separated reduced dims: [2, 3, 4, 5] over {1, 3}
  Tensor y = randn({2, 3, 4, 5}, DType::f64, 302);
  check_ref(y.sum({1, 3}), naive_sum(ref(y), {1, 3}, false), 1e-12, 1e-12);
  check_ref(y.sum({0, 2}, true), naive_sum(ref(y), {0, 2}, true), 1e-12, 1e-12);
  // Three separated runs of reduced dims (reduced run by run, last first).
  Tensor z = randn({2, 3, 2, 3, 2, 3}, DType::f64, 303);
  check_ref(z.sum({0, 2, 4}), naive_sum(ref(z), {0, 2, 4}, false), 1e-12, 1e-12);
  check_ref(z.sum({0, 1, 3, 5}, true), naive_sum(ref(z), {0, 1, 3, 5}, true), 1e-12, 1e-12);
  // 0-d and empty inputs, i64
  CHECK(Tensor::scalar(4.5, DType::f64).sum().item() == 4.5);
  CHECK(Tensor::zeros({0, 3}).sum().item() == 0);
  check_close(Tensor::zeros({0, 3}).sum({0}), {0, 0, 0}, 0, 0);
  Tensor i = Tensor::arange(6).reshape({2, 3});
  CHECK(i.sum({1}).to_i64_vector() == std::vector<int64_t>{3, 12});
  CHECK(i.sum({1}).dtype() == DType::i64);
}

TEST_CASE("large f32 sums are accurate", "[ops][reduce]") {
  // 1M elements: a float accumulator would drift by ~1e-3 relative; we accumulate in double.
  Generator g(1000);
  Tensor x = Tensor::rand({1 << 20}, DType::f32, Device::cpu(), &g);
  const std::vector<double> v = x.to_vector();
  double want = 0;
  for (double e : v) want += e;
  CHECK(x.sum().item() == Approx(want).epsilon(1e-6));
  CHECK(x.mean().item() == Approx(want / double(v.size())).epsilon(1e-6));

  Tensor c = Tensor::full({1000000}, 0.1, DType::f32);
  CHECK(c.sum().item() == Approx(1000000.0 * double(0.1f)).epsilon(1e-7));

  // [1024, 1024] over each dim (the row path and the column path).
  Tensor m = x.reshape({1024, 1024});
  check_ref(m.sum({0}), naive_sum(ref(m), {0}, false), 1e-3, 1e-6);
  check_ref(m.sum({1}), naive_sum(ref(m), {1}, false), 1e-3, 1e-6);
  // A few long rows, split over threads: [2, 524288] over dim 1
  Tensor l = x.reshape({2, 1 << 19});
  check_ref(l.sum({1}), naive_sum(ref(l), {1}, false), 1e-3, 1e-6);
}

TEST_CASE("max, min and argmax pick the first extreme", "[ops][reduce]") {
  // x: [2, 4] with ties
  Tensor x = Tensor::from_vector(std::vector<double>{1, 3, 3, 0, 2, 2, -1, 2}, {2, 4}, DType::f64);
  CHECK(max(x, 1).to_vector() == std::vector<double>{3, 2});
  CHECK(argmax(x, 1).to_i64_vector() == std::vector<int64_t>{1, 0});
  CHECK(argmax(x, 1).dtype() == DType::i64);
  CHECK(min(x, 1).to_vector() == std::vector<double>{0, -1});
  CHECK(max(x, 0).to_vector() == std::vector<double>{2, 3, 3, 2});
  CHECK(argmax(x, 0).to_i64_vector() == std::vector<int64_t>{1, 0, 0, 1});
  CHECK(max(x, -1, true).shape() == Shape{2, 1});
  CHECK(argmax(x, 0, true).shape() == Shape{1, 4});
  // Transposed input.
  CHECK(argmax(x.t(), 0).to_i64_vector() == std::vector<int64_t>{1, 0});
  // The gradient of max goes to the first maximal entry only.
  Tensor xg = x.detach().requires_grad_();
  max(xg, 1).sum().backward();
  check_close(xg.grad(), {0, 1, 0, 0, 1, 0, 0, 0}, 0, 0);

  // Against a naive loop on random data: [3, 5, 4] over each dim.
  Tensor r = randn({3, 5, 4}, DType::f32, 400);
  const Ref rr = ref(r);
  for (int64_t d = 0; d < 3; ++d) {
    INFO("dim " << d);
    Shape os = r.shape();
    os.erase(os.begin() + d);
    std::vector<double> mx(size_t(shape_numel(os)), -INFINITY), mn(mx.size(), INFINITY), am(mx.size(), 0);
    size_t flat = 0;
    for_each_index(r.shape(), [&](const Shape& i) {
      Shape o = i;
      o.erase(o.begin() + d);
      int64_t off = 0;
      const Shape st = remora_test::rm_strides(os);
      for (size_t k = 0; k < o.size(); ++k) off += o[k] * st[k];
      const double v = rr.v[flat++];
      if (v > mx[size_t(off)]) {
        mx[size_t(off)] = v;
        am[size_t(off)] = double(i[size_t(d)]);
      }
      mn[size_t(off)] = std::min(mn[size_t(off)], v);
    });
    check_ref(max(r, d), {mx, os}, 0, 0);
    check_ref(min(r, d), {mn, os}, 0, 0);
    check_ref(argmax(r, d), {am, os}, 0, 0);
  }
  // A NaN wins, as in PyTorch.
  Tensor n = Tensor::from_vector(std::vector<double>{1, NAN, 3}, {}, DType::f64);
  CHECK(std::isnan(max(n, 0).item()));
  CHECK(argmax(n, 0).item() == 1);
}

// ---------------------------------------------------------------- softmax, layer_norm

namespace {
// log-softmax of each row of a [rows, cols] buffer, in double.
std::vector<double> naive_log_softmax_rows(const std::vector<double>& x, int64_t cols) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r * size_t(cols) < x.size(); ++r) {
    const double* p = x.data() + r * size_t(cols);
    double mx = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, p[j]);
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(p[j] - mx);
    for (int64_t j = 0; j < cols; ++j) out[r * size_t(cols) + size_t(j)] = p[j] - mx - std::log(s);
  }
  return out;
}
}  // namespace

TEST_CASE("softmax and log_softmax match the naive formula", "[ops][nn]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-6 : 1e-14;
    // x: [2, 3, 5] over each dim; dim != -1 goes through a transpose.
    Tensor x = randn({2, 3, 5}, dt, 500) * 3.0;
    for (int64_t d : {0, 1, 2, -1, -2}) {
      INFO(dtype_name(dt) << " dim " << d);
      const int64_t dd = d < 0 ? d + 3 : d;
      // Move dim dd last, compute rowwise, move back.
      Tensor moved = x.transpose(dd, 2).contiguous();
      std::vector<double> ls = naive_log_softmax_rows(moved.to_vector(), moved.size(-1));
      Tensor want_ls = Tensor::from_vector(ls, moved.shape(), DType::f64).transpose(dd, 2);
      check_close(log_softmax(x, d), want_ls.to_vector(), tol, tol);
      check_close(softmax(x, d), exp(want_ls).to_vector(), tol, tol);
    }
    // Large logits: no overflow.
    Tensor big = Tensor::from_vector(std::vector<double>{1000, 1001, 1002, -1000}, {1, 4}, dt);
    const std::vector<double> want = naive_log_softmax_rows({1000, 1001, 1002, -1000}, 4);
    const std::vector<double> sm = softmax(big, -1).to_vector();
    for (double v : sm) CHECK(std::isfinite(v));
    // f32 holds 1002.4 to ~6e-5 (its ulp), so the log-probabilities can be off by that much.
    check_close(log_softmax(big, -1), want, dt == DType::f32 ? 2e-4 : 1e-12, 1e-6);
    check_close(sm, {std::exp(want[0]), std::exp(want[1]), std::exp(want[2]), 0}, 1e-6, 1e-6);
    // Masked entries (-inf) get probability 0.
    Tensor masked = Tensor::from_vector(std::vector<double>{0, -INFINITY, 0}, {3}, dt);
    check_close(softmax(masked, 0), {0.5, 0, 0.5}, 1e-7, 0);
    // Non-contiguous input with a long row (parallel path): [64, 1024] transposed
    Tensor wide = randn({1024, 64}, dt, 501).t();
    Tensor wc = wide.contiguous();
    check_close(softmax(wide, 1), exp(Tensor::from_vector(naive_log_softmax_rows(wc.to_vector(), 1024),
                                                          {64, 1024}, DType::f64)).to_vector(),
                tol, 1e-5);
  }
}

TEST_CASE("layer_norm matches the naive formula", "[ops][nn]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    // x: [2, 3, 8] as a transposed view; w, b: [8]
    Tensor x = (randn({8, 3, 2}, dt, 600) * 2.0 + 1.0).permute({2, 1, 0});
    Tensor w = randn({8}, dt, 601), b = randn({8}, dt, 602);
    const double eps = 1e-5;
    const std::vector<double> xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
    std::vector<double> plain, affine_out, scale_only;
    for (size_t r = 0; r < 6; ++r) {
      double m = 0, v = 0;
      for (size_t j = 0; j < 8; ++j) m += xv[r * 8 + j];
      m /= 8;
      for (size_t j = 0; j < 8; ++j) v += (xv[r * 8 + j] - m) * (xv[r * 8 + j] - m);
      v /= 8;  // biased variance, as in PyTorch
      for (size_t j = 0; j < 8; ++j) {
        const double n = (xv[r * 8 + j] - m) / std::sqrt(v + eps);
        plain.push_back(n);
        affine_out.push_back(n * wv[j] + bv[j]);
        scale_only.push_back(n * wv[j]);
      }
    }
    INFO(dtype_name(dt));
    check_close(layer_norm(x, Tensor(), Tensor(), eps), plain, tol, tol);
    check_close(layer_norm(x, w, b, eps), affine_out, tol, tol);
    check_close(layer_norm(x, w, Tensor(), eps), scale_only, tol, tol);
    CHECK(layer_norm(x, w, b).shape() == Shape{2, 3, 8});
  }
  // A constant row normalises to 0 (not NaN) thanks to eps.
  Tensor c = Tensor::full({2, 4}, 3.0, DType::f32);
  check_close(layer_norm(c, Tensor(), Tensor()), std::vector<double>(8, 0.0), 0, 0);
}

// ---------------------------------------------------------------- dropout

TEST_CASE("dropout: identity when off, scaled mask when on", "[ops][nn]") {
  Tensor x = Tensor::ones({100000}, DType::f32);
  CHECK(dropout(x, 0.5, false).is_same(x));  // eval
  CHECK(dropout(x, 0.0, true).is_same(x));   // p = 0

  for (double p : {0.1, 0.5, 0.9}) {
    INFO("p = " << p);
    Generator g(77);
    const std::vector<double> y = dropout(x, p, true, &g).to_vector();
    size_t kept = 0;
    const double scale = double(float(1 / (1 - p)));
    for (double v : y) {
      if (v != 0) {
        ++kept;
        CHECK(v == Approx(scale).epsilon(1e-7));
      }
    }
    // 100k Bernoulli draws: the std of the kept fraction is < 0.002.
    CHECK(std::fabs(double(kept) / double(y.size()) - (1 - p)) < 0.01);
  }
  // Same seed, same mask; the generator advances between calls.
  Generator g1(5), g2(5), g3(6);
  Tensor small = Tensor::ones({1000}, DType::f64);
  std::vector<double> m1 = dropout(small, 0.3, true, &g1).to_vector();
  CHECK(m1 == dropout(small, 0.3, true, &g2).to_vector());
  CHECK(m1 != dropout(small, 0.3, true, &g3).to_vector());
  CHECK(m1 != dropout(small, 0.3, true, &g1).to_vector());
  // Applies to the values, not just ones; gradient is the same mask.
  Generator g4(8), g5(8);
  Tensor v = randn({50}, DType::f64, 700).requires_grad_();
  Tensor mask = dropout(Tensor::ones({50}, DType::f64), 0.4, true, &g4);
  Tensor y = dropout(v, 0.4, true, &g5);
  check_close(y, (v.detach() * mask).to_vector(), 0, 0);
  y.sum().backward();
  check_close(v.grad(), mask.to_vector(), 0, 0);
}

TEST_CASE("relu_dropout: dropout(relu(x)) bit for bit, values and gradient, keeping its mask bits",
          "[ops][nn]") {
  for (DType dt : {DType::f32, DType::f64}) {
    for (double p : {0.0, 0.1, 0.5}) {
      INFO(dtype_name(dt) << " p = " << p);
      // Odd size: a partial bit word. Zeros of both signs, a NaN (relu: 0) and
      // subnormals in the vector blocks and in the tail.
      std::vector<double> xv = randn({3, 1001}, dt, 901).to_vector();
      for (size_t i : {size_t(0), size_t(3000)}) {
        xv[i] = 0.0;
        xv[i + 1] = -0.0;
        xv[i + 2] = std::nan("");
      }
      xv[5] = 1e-40;
      xv[6] = -1e-40;
      Tensor x = Tensor::from_vector(xv, {3, 1001}, dt);
      Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
      Generator g1(11), g2(11);
      Tensor ya = dropout(relu(a), p, true, &g1);
      Tensor yb = relu_dropout(b, p, true, &g2);
      CHECK(ya.to_vector() == yb.to_vector());
      CHECK(g1.offset() == g2.offset());  // the generator advanced alike
      Tensor probe = randn({3, 1001}, dt, 902);
      sum(mul(ya, probe)).backward();
      sum(mul(yb, probe)).backward();
      // The same gradient; zeros may differ in sign (+0 for a dropped
      // positive x, where the pair gives probe * 0).
      const std::vector<double> ga = a.grad().to_vector(), gb = b.grad().to_vector();
      REQUIRE(ga.size() == gb.size());
      size_t diff = 0;
      for (size_t i = 0; i < ga.size(); ++i) diff += ga[i] != gb[i];
      CHECK(diff == 0);
    }
  }
  // The input is left as it was, also when the caller's tensor is its only handle.
  {
    Tensor h = affine(randn({4, 70}, DType::f32, 904), 1.0, 0.0);
    const std::vector<double> before = h.to_vector();
    Tensor y = relu_dropout(h, 0.5, true);
    CHECK(h.to_vector() == before);
  }
  // Eval: relu.
  Tensor x = randn({100}, DType::f32, 903);
  CHECK(relu_dropout(x, 0.5, false).to_vector() == relu(x).to_vector());
  CHECK_THROWS_WITH(relu_dropout(x, 1.0, true), Catch::Contains("p must be in [0, 1)"));
}

// ---------------------------------------------------------------- cross_entropy

TEST_CASE("cross_entropy matches naive log-softmax NLL", "[ops][nn]") {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    // logits: [N = 6, C = 5]; targets with ignored rows
    Tensor logits = randn({6, 5}, dt, 800) * 2.0;
    const std::vector<double> ls = naive_log_softmax_rows(logits.to_vector(), 5);
    for (int64_t ignore : {int64_t(-100), int64_t(2)}) {
      INFO(dtype_name(dt) << " ignore_index " << ignore);
      const std::vector<int64_t> tv = {0, 4, -100, 2, 1, 2};
      Tensor target = Tensor::from_vector(tv);
      bool has_invalid = false;
      std::vector<double> none;
      double total = 0;
      int64_t count = 0;
      for (size_t n = 0; n < tv.size(); ++n) {
        if (tv[n] == ignore) {
          none.push_back(0);
          continue;
        }
        if (tv[n] < 0) {
          has_invalid = true;
          break;
        }
        const double l = -ls[n * 5 + size_t(tv[n])];
        none.push_back(l);
        total += l;
        ++count;
      }
      if (has_invalid) {
        // -100 is a real (out-of-range) target when ignore_index is 2.
        CHECK_THROWS_AS(cross_entropy(logits, target, ignore), Error);
        continue;
      }
      check_close(cross_entropy(logits, target, ignore, Reduction::none), none, tol, tol);
      CHECK(cross_entropy(logits, target, ignore, Reduction::none).shape() == Shape{6});
      CHECK(cross_entropy(logits, target, ignore, Reduction::sum).item() == Approx(total).epsilon(tol));
      CHECK(cross_entropy(logits, target, ignore, Reduction::mean).item() ==
            Approx(total / double(count)).epsilon(tol));
      // Gradient of the mean: (softmax - onehot) / count on kept rows, 0 on ignored rows.
      Tensor lg = logits.detach().requires_grad_();
      cross_entropy(lg, target, ignore).backward();
      std::vector<double> want(30, 0.0);
      for (size_t n = 0; n < 6; ++n) {
        if (tv[n] == ignore) continue;
        for (size_t c = 0; c < 5; ++c)
          want[n * 5 + c] = (std::exp(ls[n * 5 + c]) - (int64_t(c) == tv[n] ? 1 : 0)) / double(count);
      }
      check_close(lg.grad(), want, tol, tol);
    }
    // With ignore_index = 2, valid targets only.
    Tensor t2 = Tensor::from_vector(std::vector<int64_t>{0, 4, 2, 2, 1, 3});
    double total = 0;
    int cnt = 0;
    const std::vector<int64_t> t2v = t2.to_i64_vector();
    for (size_t n = 0; n < 6; ++n)
      if (t2v[n] != 2) {
        total += -ls[n * 5 + size_t(t2v[n])];
        ++cnt;
      }
    CHECK(cross_entropy(logits, t2, 2).item() == Approx(total / cnt).epsilon(tol));

    // [B, T, C] logits with [B, T] targets; large logits stay finite.
    Tensor l3 = randn({2, 3, 4}, dt, 801) * 500.0;
    Tensor t3 = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {2, 3});
    const std::vector<double> ls3 = naive_log_softmax_rows(l3.to_vector(), 4);
    std::vector<double> want3;
    for (size_t n = 0; n < 6; ++n) want3.push_back(-ls3[n * 4 + size_t(t3.to_i64_vector()[n])]);
    Tensor none3 = cross_entropy(l3, t3, -100, Reduction::none);
    CHECK(none3.shape() == Shape{2, 3});
    check_close(none3, want3, dt == DType::f32 ? 1e-3 : 1e-10, tol);
  }
}

// ---------------------------------------------------------------- gathers, shape ops

TEST_CASE("embedding returns rows; the padding row gets no gradient", "[ops][nn]") {
  // weight: [V = 5, D = 3], ids: [2, 3]
  Tensor w = randn({5, 3}, DType::f64, 900).requires_grad_();
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 0, 1, 4, 0, 3}, {2, 3});
  Tensor e = embedding(w, ids, /*padding_idx=*/0);
  REQUIRE(e.shape() == Shape{2, 3, 3});
  const std::vector<int64_t> idv = ids.to_i64_vector();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t d = 0; d < 3; ++d)
        CHECK(e.at({i, j, d}) == w.at({idv[size_t(i * 3 + j)], d}));  // padding row returned as is
  // Gradient: counts of each id (weighted by g), zero for the padding row.
  Tensor g = randn({2, 3, 3}, DType::f64, 901);
  e.backward(g);
  std::vector<double> want(15, 0.0);
  const std::vector<double> gv = g.to_vector();
  for (size_t k = 0; k < 6; ++k)
    if (idv[k] != 0)
      for (size_t d = 0; d < 3; ++d) want[size_t(idv[k]) * 3 + d] += gv[k * 3 + d];
  check_close(w.grad(), want, 1e-14, 0);
  // Without padding_idx, row 0 gets its gradient.
  Tensor w2 = w.detach().requires_grad_();
  embedding(w2, ids).sum().backward();
  check_close(w2.grad(), {2, 2, 2, 2, 2, 2, 0, 0, 0, 1, 1, 1, 1, 1, 1}, 0, 0);
  // Transposed weight view works too.
  Tensor wt = w.detach().t().contiguous().t();  // same values, strided as [5, 3]^T^T
  check_close(embedding(wt, ids), e.detach(), 0, 0);
}

TEST_CASE("index_select gathers along any dim and scatters gradients", "[ops][shape]") {
  // x: [3, 4]
  Tensor x = Tensor::arange(12, DType::f64).reshape({3, 4});
  Tensor i0 = Tensor::from_vector(std::vector<int64_t>{2, 0, 2});
  CHECK(index_select(x, 0, i0).to_vector() == std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  Tensor i1 = Tensor::from_vector(std::vector<int64_t>{3, 1});
  CHECK(index_select(x, 1, i1).to_vector() == std::vector<double>{3, 1, 7, 5, 11, 9});
  CHECK(index_select(x, -1, i1).shape() == Shape{3, 2});
  CHECK(index_select(x.t(), 0, i1).to_vector() == std::vector<double>{3, 7, 11, 1, 5, 9});
  CHECK(index_select(x, 0, Tensor::from_vector(std::vector<int64_t>{})).shape() == Shape{0, 4});
  // Duplicate indices accumulate in the gradient.
  Tensor xg = x.detach().requires_grad_();
  index_select(xg, 0, i0).sum().backward();
  check_close(xg.grad(), {1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2}, 0, 0);
  Tensor xg1 = x.detach().requires_grad_();
  index_select(xg1, 1, Tensor::from_vector(std::vector<int64_t>{1, 1, 0})).sum().backward();
  check_close(xg1.grad(), {1, 2, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0}, 0, 0);
}

TEST_CASE("cat, stack and chunk", "[ops][shape]") {
  Tensor a = Tensor::arange(6, DType::f32).reshape({2, 3});
  Tensor b = Tensor::arange(6, 10, 1, DType::f32).reshape({2, 2});
  Tensor c1 = cat({a, b}, 1);  // [2, 5]
  CHECK(c1.shape() == Shape{2, 5});
  CHECK(c1.to_vector() == std::vector<double>{0, 1, 2, 6, 7, 3, 4, 5, 8, 9});
  Tensor c0 = cat({a, a.slice(0, 1, 2)}, 0);  // [3, 3]
  CHECK(c0.to_vector() == std::vector<double>{0, 1, 2, 3, 4, 5, 3, 4, 5});
  // Transposed inputs: [3, 2] + [3, 2] -> [3, 4]
  CHECK(cat({a.t(), a.t() * 2.0}, -1).to_vector() ==
        std::vector<double>{0, 3, 0, 6, 1, 4, 2, 8, 2, 5, 4, 10});
  CHECK(cat({a, Tensor::zeros({0, 3})}, 0).to_vector() == a.to_vector());

  Tensor s0 = stack({a, a * 2.0}, 0);  // [2, 2, 3]
  CHECK(s0.shape() == Shape{2, 2, 3});
  CHECK(s0.at({1, 1, 2}) == 10);
  Tensor s2 = stack({a, a * 2.0}, 2);  // [2, 3, 2]
  CHECK(s2.shape() == Shape{2, 3, 2});
  CHECK(s2.to_vector() == std::vector<double>{0, 0, 1, 2, 2, 4, 3, 6, 4, 8, 5, 10});
  CHECK(stack({a, a}, -1).shape() == Shape{2, 3, 2});

  // chunk: 7 into 3 -> sizes 3, 3, 1; views of the input
  Tensor v = Tensor::arange(7, DType::f32);
  std::vector<Tensor> ch = chunk(v, 3, 0);
  REQUIRE(ch.size() == 3);
  CHECK(ch[0].to_vector() == std::vector<double>{0, 1, 2});
  CHECK(ch[1].to_vector() == std::vector<double>{3, 4, 5});
  CHECK(ch[2].to_vector() == std::vector<double>{6});
  std::vector<Tensor> ch1 = chunk(a, 3, 1);
  REQUIRE(ch1.size() == 3);
  CHECK(ch1[2].to_vector() == std::vector<double>{2, 5});
  CHECK(chunk(v, 1, 0)[0].to_vector() == v.to_vector());
  // cat(chunk(x)) == x
  CHECK(cat(chunk(a, 2, 1), 1).to_vector() == a.to_vector());
}

TEST_CASE("tril and triu", "[ops][shape]") {
  // x: [2, 3, 4], batch of 2
  Tensor x = Tensor::arange(1, 25, 1, DType::f64).reshape({2, 3, 4});
  const std::vector<double> xv = x.to_vector();
  for (int64_t diag : {-1, 0, 1, 2, -5, 5}) {
    INFO("diagonal " << diag);
    std::vector<double> lo, up;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          const double v = xv[size_t(b * 12 + i * 4 + j)];
          lo.push_back(j - i <= diag ? v : 0);
          up.push_back(j - i >= diag ? v : 0);
        }
    check_close(tril(x, diag), lo, 0, 0);
    check_close(triu(x, diag), up, 0, 0);
    check_close(tril(x.transpose(1, 2), diag).transpose(1, 2), triu(x, -diag).to_vector(), 0, 0);
  }
  // The causal mask of attention: [T, T] lower-triangular ones.
  CHECK(tril(Tensor::ones({3, 3})).to_vector() == std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1});
}
