// SPDX-License-Identifier: BSD-3-Clause
// The libtorch-style Tensor API: code written as for libtorch, with only the
// namespace changed (namespace torch = remora), compiles and gives libtorch's
// values: method forms, comparison and logical operators with bool results,
// the bool / int32 / uint8 dtypes, indexing, TensorOptions and the free
// factories, printing, and the grad-mode guards.
#include <cstdio>
#include <sstream>

#include "helpers.h"

namespace torch = remora;
using namespace torch::indexing;
using torch::Tensor;
using torch::operator<<;  // a Shape is a std::vector: its << is found by this, not by ADL
using V = std::vector<double>;

TEST_CASE("tensor api: reductions and method forms as libtorch spells them", "[tensor_api]") {
  Tensor x = torch::tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}});
  CHECK(x.sum(1).to_vector() == V{9, 12});
  CHECK(x.sum({0, 1}).item<double>() == 21);
  CHECK(x.sum({}).item<double>() == 21);
  CHECK(x.mean(-1, /*keepdim=*/true).sizes() == torch::Shape{2, 1});
  CHECK(x.mean(-1, true).to_vector() == V{3, 4});
  auto [values, indices] = x.max(1);
  CHECK(values.to_vector() == V{5, 6});
  CHECK(indices.dtype() == torch::kLong);
  CHECK(indices.to_i64_vector() == std::vector<int64_t>{1, 2});
  Tensor mn, mi;
  std::tie(mn, mi) = x.min(0, /*keepdim=*/true);
  CHECK(mn.sizes() == torch::Shape{1, 3});
  CHECK(mn.to_vector() == V{1, 2, 3});
  CHECK(mi.to_i64_vector() == std::vector<int64_t>{0, 1, 0});
  CHECK(std::get<0>(x.max(-1)).to_vector() == V{5, 6});
  CHECK(x.argmax(1).to_i64_vector() == std::vector<int64_t>{1, 2});
  CHECK(x.argmin(1).to_i64_vector() == std::vector<int64_t>{0, 1});
  CHECK(x.argmax().item<int64_t>() == 5);
  CHECK(x.max().item<double>() == 6);
  CHECK(x.cumsum(1).to_vector() == V{1, 6, 9, 4, 6, 12});
  CHECK(torch::tensor({1, 2, 3}).cumsum(0).to_i64_vector() == std::vector<int64_t>{1, 3, 6});
  CHECK(x.norm().item<double>() == Approx(std::sqrt(91.0)));
  CHECK(x.norm(1, {1}).to_vector() == V{9, 12});
  {
    // At 0 the gradient is 0 (libtorch's), for every p; elsewhere x / |x|.
    for (double p : {2.0, 3.0}) {
      Tensor z = Tensor::zeros({2, 3}, remora::DType::f64).requires_grad_();
      z.norm(p).backward();
      CHECK(z.grad().to_vector() == V(6, 0.0));
    }
    Tensor y = Tensor::from_vector(std::vector<double>{3, 4, 0, 0}, {2, 2}).requires_grad_();
    y.norm(2, {1}).sum().backward();
    const V gy = y.grad().to_vector();
    CHECK(gy[0] == Approx(0.6));
    CHECK(gy[1] == Approx(0.8));
    CHECK(gy[2] == 0.0);
    CHECK(gy[3] == 0.0);
  }
  // var / std: unbiased by default, as libtorch.
  Tensor r = torch::tensor({1.0, 2.0, 3.0, 4.0});
  CHECK(r.var().item<double>() == Approx(5.0 / 3));
  CHECK(r.var(false).item<double>() == Approx(1.25));
  CHECK(r.std().item<double>() == Approx(std::sqrt(5.0 / 3)));
  CHECK(x.var(1).to_vector()[0] == Approx(4.0));
  CHECK(x.std(0, /*unbiased=*/true, /*keepdim=*/true).sizes() == torch::Shape{1, 3});
  auto [tv, ti] = x.topk(2);
  CHECK(tv.to_vector() == V{5, 3, 6, 4});
  CHECK(ti.to_i64_vector() == std::vector<int64_t>{1, 2, 2, 0});
  auto [sv, si] = x.sort(1, /*descending=*/false);
  CHECK(sv.to_vector() == V{1, 3, 5, 2, 4, 6});
  CHECK(si.to_i64_vector() == std::vector<int64_t>{0, 2, 1, 1, 0, 2});
  CHECK(std::get<0>(torch::tensor({3.0, 1.0, 2.0}).sort(0, true)).to_vector() == V{3, 2, 1});
  CHECK(x.clamp(2, 4).to_vector() == V{2, 4, 3, 4, 2, 4});
  CHECK(x.clamp(std::nullopt, 3).to_vector() == V{1, 3, 3, 3, 2, 3});
  CHECK(x.clamp_min(4).to_vector() == V{4, 5, 4, 4, 4, 6});
  CHECK(x.repeat({1, 2}).sizes() == torch::Shape{2, 6});
  CHECK(x.repeat({2, 1}).to_vector() == V{1, 5, 3, 4, 2, 6, 1, 5, 3, 4, 2, 6});
  CHECK(torch::ones({1, 3, 1}).squeeze().sizes() == torch::Shape{3});
  CHECK(torch::ones({3, 1}).expand_as(x.t()).sizes() == torch::Shape{3, 2});
  auto parts = x.chunk(3, 1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].to_vector() == V{3, 6});
  auto halves = x.split(2, 1);
  REQUIRE(halves.size() == 2);
  CHECK(halves[1].to_vector() == V{3, 6});
  CHECK(x.softmax(1).sum(1).allclose(torch::ones({2})));
  CHECK(x.log_softmax(-1).exp().sum(-1).allclose(torch::ones({2})));
  CHECK(torch::tensor({0.0}).gelu().item<double>() == 0);
  CHECK(x.allclose(x + 1e-9));
  CHECK_FALSE(x.allclose(x + 1e-3));
  CHECK(x.equal(x.clone()));
  CHECK_FALSE(x.equal(x.t()));
  // gather / scatter_add / index_select / masked_fill / where.
  Tensor idx = torch::tensor({{2, 0}, {1, 1}});
  CHECK(x.gather(1, idx).to_vector() == V{3, 1, 2, 2});
  Tensor acc = torch::zeros({2, 3}).scatter_add(1, idx, torch::ones({2, 2}));
  CHECK(acc.to_vector() == V{1, 0, 1, 0, 2, 0});
  CHECK(x.index_select(1, torch::tensor({2, 0})).to_vector() == V{3, 1, 6, 4});
  CHECK(x.masked_fill(x > 3, -1).to_vector() == V{1, -1, 3, -1, 2, -1});
  CHECK(x.masked_fill(x > 3, torch::tensor({0.5})).to_vector() == V{1, 0.5, 3, 0.5, 2, 0.5});
  CHECK(torch::where(x > 3, x, torch::zeros_like(x)).to_vector() == V{0, 5, 0, 4, 0, 6});
  CHECK(x.where(x > 3, torch::zeros_like(x)).to_vector() == V{0, 5, 0, 4, 0, 6});
  CHECK(x.masked_select(x > 3).to_vector() == V{5, 4, 6});
  CHECK(x.nonzero().sizes() == torch::Shape{6, 2});
}

TEST_CASE("tensor api: the values and gradients of gather, clamp, index and sort", "[tensor_api]") {
  Tensor x = torch::tensor({{1.0, -2.0, 3.0}, {0.5, 4.0, -1.0}}, torch::requires_grad());
  REQUIRE(x.requires_grad());
  Tensor y = x.gather(1, torch::tensor({{2, 2}, {0, 1}})).sum() + x.clamp(-1.5, 2).sum() +
             x.index({Slice(), 0}).sum() + std::get<0>(x.topk(1, 1)).sum();
  y.backward();
  // gather: x[0][2] twice, x[1][0], x[1][1]; clamp: 1 inside [-1.5, 2]; column 0; row maxima.
  //   (0,0): clamp, column | (0,2): gather x2, max | (1,0): gather, clamp, column
  //   (1,1): gather, max   | (1,2): clamp
  CHECK(x.grad().to_vector() == V{2, 0, 3, 3, 2, 1});
}

TEST_CASE("tensor api: in-place forms with scalars and tensors", "[tensor_api]") {
  Tensor x = torch::ones({2, 2});
  x.add_(1).mul_(3).sub_(1).div_(5);  // ((1 + 1) * 3 - 1) / 5 = 1
  CHECK(x.to_vector() == V{1, 1, 1, 1});
  x.add_(torch::tensor({1.0, 2.0}));
  x.mul_(torch::tensor({2.0, 1.0}));
  x.sub_(torch::ones({2}), 0.5);
  x.div_(torch::tensor({2.0}));
  CHECK(x.to_vector() == V{1.75, 1.25, 1.75, 1.25});
  x.clamp_(1.5, std::nullopt);
  CHECK(x.to_vector() == V{1.75, 1.5, 1.75, 1.5});
  x.zero_();
  CHECK(x.to_vector() == V{0, 0, 0, 0});
  x.fill_(2.5);
  x.copy_(x * 2);
  CHECK(x.to_vector() == V{5, 5, 5, 5});
  x.fill_(torch::tensor({7.0}));
  x += 1;
  x -= torch::ones({2, 2});
  x *= 2;
  x /= torch::full({2, 2}, 2.0);
  CHECK(x.to_vector() == V{7, 7, 7, 7});
  x.masked_fill_(torch::tensor({{true, false}, {false, true}}), 0);
  CHECK(x.to_vector() == V{0, 7, 7, 0});
  // Autograd's rule holds for every in-place form.
  Tensor p = torch::ones({2}, torch::TensorOptions().requires_grad(true));
  CHECK_ERROR(p.add_(1), "add_", "requires grad");
  CHECK_ERROR(p.mul_(torch::ones({2})), "mul_", "NoGradGuard");
  {
    torch::NoGradGuard ng;
    p.sub_(0.5);
  }
  CHECK(p.to_vector() == V{0.5, 0.5});
}

TEST_CASE("tensor api: comparisons and logic give bool tensors", "[tensor_api]") {
  Tensor a = torch::tensor({1.0, 2.0, 3.0});
  Tensor b = torch::tensor({3.0, 2.0, 1.0});
  Tensor eq = a == b;
  CHECK(eq.dtype() == torch::kBool);
  CHECK(eq.to_vector() == V{0, 1, 0});
  CHECK((a != b).to_vector() == V{1, 0, 1});
  CHECK((a < b).to_vector() == V{1, 0, 0});
  CHECK((a <= b).to_vector() == V{1, 1, 0});
  CHECK((a > b).to_vector() == V{0, 0, 1});
  CHECK((a >= b).to_vector() == V{0, 1, 1});
  CHECK((a > 1.5).to_vector() == V{0, 1, 1});
  CHECK((2 == a).to_vector() == V{0, 1, 0});
  CHECK((torch::tensor({1, 2, 3}) < 2.5).to_vector() == V{1, 1, 0});  // i64 against a fraction
  Tensor m = (a > 1) & (b > 1);
  CHECK(m.dtype() == torch::kBool);
  CHECK(m.to_vector() == V{0, 1, 0});
  CHECK(((a > 2) | (b > 2)).to_vector() == V{1, 0, 1});
  CHECK(((a > 1) ^ (b > 1)).to_vector() == V{1, 0, 1});
  CHECK((~(a > 1)).to_vector() == V{1, 0, 0});
  CHECK((!(a > 1)).to_vector() == V{1, 0, 0});
  CHECK(a.gt(b).logical_or(a.lt(b)).to_vector() == V{1, 0, 1});
  CHECK(torch::logical_not(torch::tensor({0.0, 2.0})).to_vector() == V{1, 0});
  CHECK((a > 0).all());
  CHECK_FALSE((a > 2).all());
  CHECK((a > 2).any());
  CHECK((a > 2).sum().item<int64_t>() == 1);  // bool sums in i64
  CHECK((a > 2).sum().dtype() == torch::kLong);
  CHECK(((a > 1) == (b > 1)).to_vector() == V{0, 1, 0});  // bool against bool
  CHECK(((a > 1).to(torch::kFloat) * a).to_vector() == V{0, 2, 3});
  CHECK_ERROR(~a, "operator~", "bool");
}

TEST_CASE("tensor api: bool, int32 and uint8 are storage dtypes", "[tensor_api]") {
  for (torch::DType dt : {torch::kBool, torch::kInt32, torch::kUInt8}) {
    INFO(torch::dtype_name(dt));
    Tensor z = torch::zeros({2, 3}, dt);
    CHECK(z.dtype() == dt);
    CHECK(z.element_size() == (dt == torch::kInt32 ? 4 : 1));
    CHECK(z.sum().item<int64_t>() == 0);
    Tensor o = torch::ones({2, 3}, torch::TensorOptions().dtype(dt));
    CHECK(o.sum().item<int64_t>() == 6);
    CHECK(o.to(torch::kFloat64).to_vector() == V{1, 1, 1, 1, 1, 1});
    CHECK(o.t().contiguous().to(torch::kInt64).to_i64_vector() == std::vector<int64_t>(6, 1));
    CHECK_ERROR(torch::ones({2}, dt).requires_grad_(), "requires_grad_", "floating");
  }
  Tensor i32 = torch::tensor({-3.0, 7.0, 2147483647.0}, torch::kFloat64).to(torch::kInt);
  CHECK(i32.dtype() == torch::kInt32);
  CHECK(i32.to_vector() == V{-3, 7, 2147483647});
  CHECK(i32.sum().item<int64_t>() == 2147483651LL);  // summed in i64, no wrap
  CHECK(i32[1].item<int>() == 7);
  Tensor u8 = torch::tensor({0.0, 200.0, 255.0}, torch::kByte);
  CHECK(u8.to_vector() == V{0, 200, 255});
  CHECK(u8.max().item<int64_t>() == 255);
  Tensor bf = torch::tensor({0.0, 0.5, -2.0}).to(torch::kBool);
  CHECK(bf.to_vector() == V{0, 1, 1});
  CHECK(bf[1].item<bool>());
  CHECK_FALSE(bf[0].item<bool>());
  CHECK(torch::tensor({true, false}).dtype() == torch::kBool);
  // safetensors: written as BOOL / I32 / U8, read back as such with keep_dtypes
  // (and widened to i64 without it, as before).
  const std::string path = "tensor_api_dtypes.safetensors";
  torch::save_safetensors(path, {{"b", bf}, {"i", i32}, {"u", u8}});
  torch::Safetensors st = torch::load_safetensors(path, /*keep_dtypes=*/true);
  CHECK(st.stored_dtypes.at("b") == "BOOL");
  CHECK(st.stored_dtypes.at("i") == "I32");
  CHECK(st.stored_dtypes.at("u") == "U8");
  CHECK(st.get("b").dtype() == torch::kBool);
  CHECK(st.get("i").dtype() == torch::kInt32);
  CHECK(st.get("u").dtype() == torch::kUInt8);
  CHECK(st.get("b").equal(bf));
  CHECK(st.get("i").equal(i32));
  CHECK(st.get("u").equal(u8));
  CHECK(torch::load_safetensors(path).get("i").dtype() == torch::kInt64);
  std::remove(path.c_str());
}

TEST_CASE("tensor api: indexing with Slice, None, Ellipsis, tensors and masks", "[tensor_api]") {
  Tensor x = torch::arange(24, torch::kFloat).reshape({2, 3, 4});
  CHECK(x[1][2][3].item<double>() == 23);
  CHECK(x[-1].sizes() == torch::Shape{3, 4});
  Tensor y = x.index({Slice(0, 2), 1, None, Ellipsis});
  CHECK(y.sizes() == torch::Shape{2, 1, 4});
  CHECK(y.to_vector() == V{4, 5, 6, 7, 16, 17, 18, 19});
  CHECK(x.index({Ellipsis, -1}).to_vector() == V{3, 7, 11, 15, 19, 23});
  CHECK(x.index({"...", Slice(None, None, 2)}).sizes() == torch::Shape{2, 3, 2});
  CHECK(x.index({0, Slice(1), Slice(-2, None)}).to_vector() == V{6, 7, 10, 11});
  CHECK(x.index({Slice(), torch::tensor({2, 0})}).sizes() == torch::Shape{2, 2, 4});
  CHECK(x.index({1, torch::tensor({-1})}).to_vector() == V{20, 21, 22, 23});
  // Boolean masks: over the leading dims, or the whole tensor.
  Tensor m = x.index({Slice(), Slice(), 0}) > 10;  // [2, 3]
  CHECK(x.index({m}).sizes() == torch::Shape{3, 4});
  CHECK(x.index({x > 20}).to_vector() == V{21, 22, 23});
  CHECK(x.index({m}).index({Slice(), 0}).to_vector() == V{12, 16, 20});
  // index_put_: views, tensors and masks.
  Tensor z = torch::zeros({3, 4});
  z.index_put_({Slice(), 0}, 7.0);
  z.index_put_({1, Slice(1, 3)}, torch::tensor({1.0, 2.0}));
  z.index_put_({torch::tensor({2}), Slice()}, 5.0);
  CHECK(z.to_vector() == V{7, 0, 0, 0, 7, 1, 2, 0, 5, 5, 5, 5});
  z.index_put_({z > 4}, -1.0);
  CHECK(z.to_vector() == V{-1, 0, 0, 0, -1, 1, 2, 0, -1, -1, -1, -1});
  CHECK_ERROR(x.index({0, 0, 0, 0}), "index", "too many indices");
  CHECK_ERROR(x.index({5}), "index", "out of range");
  CHECK_ERROR(x.index({torch::ones({3}, torch::kBool)}), "index", "mask");
  // Differentiable: the gradient lands where the indices read.
  Tensor w = torch::zeros({2, 3}, torch::TensorOptions().dtype(torch::kDouble).requires_grad(true));
  w.index({Slice(), 1}).sum().backward();
  CHECK(w.grad().to_vector() == V{0, 1, 0, 0, 1, 0});
  Tensor w2 = torch::ones({2, 3}, torch::requires_grad());
  Tensor sel = w2.index({torch::tensor({{true, false, true}, {false, false, true}})});
  CHECK(sel.sizes() == torch::Shape{3});
  (sel * 2).sum().backward();
  CHECK(w2.grad().to_vector() == V{2, 0, 2, 0, 0, 2});
  // t() of a 1-D tensor is the tensor itself, as libtorch's.
  CHECK(torch::tensor({1.0, 2.0}).t().sizes() == torch::Shape{2});
  // index_put_ has no history: on a tensor that requires grad it is refused.
  CHECK_ERROR(w2.index_put_({0}, 1.0), "index_put_", "requires grad");
  // index_put (out of place) is differentiable to self and to the value.
  Tensor base = torch::ones({2, 3}, torch::TensorOptions().dtype(torch::kDouble).requires_grad(true));
  Tensor val = torch::tensor({10.0, 20.0}, torch::TensorOptions().dtype(torch::kDouble).requires_grad(true));
  Tensor put = base.index_put({Slice(), 1}, val);
  CHECK(put.to_vector() == V{1, 10, 1, 1, 20, 1});
  CHECK(base.to_vector() == V{1, 1, 1, 1, 1, 1});  // self unchanged
  (put * torch::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, torch::kDouble)).sum().backward();
  CHECK(base.grad().to_vector() == V{1, 0, 3, 4, 0, 6});
  CHECK(val.grad().to_vector() == V{2, 5});
  // A broadcast value's gradient is summed over the places it filled.
  Tensor s0 = torch::tensor({3.0}, torch::TensorOptions().dtype(torch::kDouble).requires_grad(true));
  base.index_put({base.detach() > 0}, s0.reshape({})).sum().backward();
  CHECK(s0.grad().to_vector() == V{6});
}

TEST_CASE("tensor api: cumsum is a scan, exact for integers and long dims", "[tensor_api]") {
  // A long dim (a triangular product would need n^2 = 10^8 entries here).
  const int64_t n = 10000;
  Tensor x = torch::rand({3, n, 2}, torch::kDouble);
  Tensor c = x.cumsum(1);
  std::vector<double> xv = x.to_vector(), cv = c.to_vector();
  double worst = 0;
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t j = 0; j < 2; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < n; ++i) {
        acc += xv[size_t((o * n + i) * 2 + j)];
        worst = std::max(worst, std::abs(acc - cv[size_t((o * n + i) * 2 + j)]));
      }
    }
  CHECK(worst < 1e-9);
  // f32 sums are accumulated in double: the last of 10^4 values of 0.1 is 1000 to f32's rounding.
  Tensor t = torch::full({n}, 0.1, torch::kFloat32).cumsum(0);
  CHECK(std::abs(t.to_vector().back() - 1000.0) < 1e-3);
  // Integers stay exact beyond 2^53, and bools count in int64, as torch.
  const int64_t big = (int64_t(1) << 53) + 1;
  Tensor ints = Tensor::from_vector(std::vector<int64_t>{big, 1, 1}, {3}, torch::kLong);
  CHECK(ints.cumsum(0).to_i64_vector() == std::vector<int64_t>{big, big + 1, big + 2});
  Tensor b = torch::tensor({true, false, true, true});
  CHECK(b.cumsum(0).dtype() == torch::kLong);
  CHECK(b.cumsum(0).to_i64_vector() == std::vector<int64_t>{1, 1, 2, 3});
  // The gradient is the reversed scan: d(sum(cumsum(x) * w))/dx_i = sum_{k >= i} w_k.
  Tensor g = torch::ones({4}, torch::TensorOptions().dtype(torch::kDouble).requires_grad(true));
  (g.cumsum(0) * torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kDouble)).sum().backward();
  CHECK(g.grad().to_vector() == V{10, 9, 7, 4});
  // 16-bit inputs scan in f32 and round once.
  Tensor h = torch::full({300}, 1.0, torch::kBFloat16).cumsum(0);
  CHECK(h.dtype() == torch::kBFloat16);
  CHECK(h.to(torch::kFloat32).to_vector()[255] == 256);
}

TEST_CASE("tensor api: options, factories and from_blob", "[tensor_api]") {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).device(torch::kCPU).requires_grad(true);
  Tensor a = torch::Tensor::zeros({2, 3}, opts);
  CHECK(a.dtype() == torch::kDouble);
  CHECK(a.requires_grad());
  CHECK(a.is_leaf());
  CHECK(a.options().dtype() == torch::kFloat64);
  CHECK(a.options().device() == torch::Device(torch::kCPU));
  CHECK(torch::zeros({2}, torch::kFloat64).dtype() == torch::kDouble);
  CHECK(torch::ones({2}, torch::dtype(torch::kInt64)).to_i64_vector() == std::vector<int64_t>{1, 1});
  CHECK(torch::full({2}, 3.5).to_vector() == V{3.5, 3.5});
  CHECK(torch::empty({4, 2}).sizes() == torch::Shape{4, 2});
  CHECK(torch::randn({3, 3}, opts).requires_grad());
  Tensor u = torch::rand({1000});
  CHECK(u.min().item<double>() >= 0);
  CHECK(u.max().item<double>() < 1);
  CHECK(torch::arange(5).dtype() == torch::kLong);
  CHECK(torch::arange(5).to_i64_vector() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(torch::arange(1, 7, 2).to_i64_vector() == std::vector<int64_t>{1, 3, 5});
  CHECK(torch::arange(0.0, 1.0, 0.25).to_vector() == V{0, 0.25, 0.5, 0.75});
  CHECK(torch::arange(3, torch::kFloat).dtype() == torch::kFloat);
  CHECK(torch::linspace(0, 1, 5).to_vector() == V{0, 0.25, 0.5, 0.75, 1});
  CHECK(torch::eye(3).to_vector() == V{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(torch::eye(2, 3).sizes() == torch::Shape{2, 3});
  Tensor ri = torch::randint(-3, 4, {2000});
  CHECK(ri.dtype() == torch::kLong);
  CHECK(ri.min().item<int64_t>() == -3);
  CHECK(ri.max().item<int64_t>() == 3);
  CHECK(torch::randint(10, {5}).max().item<int64_t>() < 10);
  Tensor d = torch::tensor({1.0, 2.0}, torch::kFloat64);
  CHECK(torch::zeros_like(d).dtype() == torch::kDouble);
  CHECK(torch::ones_like(d).to_vector() == V{1, 1});
  CHECK(torch::full_like(d, 4).to_vector() == V{4, 4});
  CHECK(torch::empty_like(d).sizes() == d.sizes());
  CHECK(torch::randn_like(d).dtype() == torch::kDouble);
  CHECK(torch::zeros_like(d, torch::kInt32).dtype() == torch::kInt32);
  Tensor n = torch::tensor({{1, 2, 3}, {4, 5, 6}});
  CHECK(n.dtype() == torch::kLong);
  CHECK(n.sizes() == torch::Shape{2, 3});
  CHECK(torch::tensor({{1.5f, 2.5f}}).dtype() == torch::kFloat);
  CHECK_ERROR(torch::tensor({{1.0, 2.0}, {3.0}}), "tensor", "one length");
  CHECK(torch::scalar_tensor(2.0).dim() == 0);
  // from_blob: a view over the caller's memory; the deleter runs once, at the end.
  float buf[6] = {1, 2, 3, 4, 5, 6};
  {
    Tensor b = torch::from_blob(buf, {2, 3});
    CHECK(b.to_vector() == V{1, 2, 3, 4, 5, 6});
    b.mul_(2);  // writes land in buf
  }
  CHECK(buf[5] == 12);
  int deleted = 0;
  {
    Tensor b = torch::from_blob(buf, {3}, [&](void* p) {
      CHECK(p == buf);
      ++deleted;
    });
    Tensor v = b.slice(0, 1, 3);
    b = Tensor();
    CHECK(deleted == 0);  // the view still holds the memory
    CHECK(v.to_vector() == V{4, 6});
  }
  CHECK(deleted == 1);
  double dbuf[4] = {1, 2, 3, 4};
  Tensor col = torch::from_blob(dbuf, {2}, {2}, nullptr, torch::kDouble);  // every other element
  CHECK(col.to_vector() == V{1, 3});
  CHECK(torch::Device("cuda:1").index == 1);
  CHECK(torch::kFloat32 == torch::DType::f32);
  CHECK(torch::kByte == torch::kUInt8);
}

TEST_CASE("tensor api: printing as libtorch", "[tensor_api]") {
  std::ostringstream os;
  os << torch::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  CHECK(os.str() == " 1.0000 2.0000 3.0000\n 4.0000 5.0000 6.0000\n[ CPUFloatType{2,3} ] (f32)");
  std::ostringstream oi;
  oi << torch::tensor({1, 22});
  CHECK(oi.str() == "  1\n 22\n[ CPULongType{2} ] (i64)");
  std::ostringstream ob;
  ob << (torch::tensor({1.0}) > 0);
  CHECK(ob.str() == " 1\n[ CPUBoolType{1} ] (bool)");
  std::ostringstream o0;
  o0 << torch::scalar_tensor(2.5, torch::kDouble);
  CHECK(o0.str() == "2.5000\n[ CPUDoubleType{} ] (f64)");
  std::ostringstream o3;
  o3 << torch::arange(8).reshape({2, 2, 2});
  CHECK(o3.str() == "(1,.,.) = \n 0 1\n 2 3\n\n(2,.,.) = \n 4 5\n 6 7\n\n[ CPULongType{2,2,2} ] (i64)");
  // Long dims are cut to their first and last 3 entries.
  std::ostringstream big;
  big << torch::arange(100).reshape({10, 10});
  const std::string s = big.str();
  CHECK(s.find("...") != std::string::npos);
  CHECK(s.find("99") != std::string::npos);
  CHECK(s.find("55") == std::string::npos);
  CHECK(s.substr(s.size() - 28) == "[ CPULongType{10,10} ] (i64)");
  std::ostringstream meta;
  meta << torch::kFloat << " " << torch::Device(torch::kCUDA, 1) << " " << torch::Shape{2, 3};
  CHECK(meta.str() == "Float cuda:1 [2, 3]");
}

TEST_CASE("tensor api: grad-mode guards", "[tensor_api]") {
  Tensor w = torch::ones({2}, torch::requires_grad());
  {
    torch::InferenceMode guard;
    CHECK(torch::InferenceMode::is_enabled());
    CHECK_FALSE((w * 2).requires_grad());
    {
      torch::AutoGradMode on(true);
      CHECK((w * 2).requires_grad());
    }
    CHECK_FALSE((w * 2).requires_grad());
  }
  CHECK((w * 2).requires_grad());
  {
    torch::AutoGradMode off(false);
    CHECK_FALSE((w * 2).requires_grad());
  }
  {
    torch::NoGradGuard ng;
    CHECK_FALSE((w * 2).requires_grad());
  }
  CHECK_FALSE(torch::InferenceMode::is_enabled());
}
