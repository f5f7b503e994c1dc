// SPDX-License-Identifier: BSD-3-Clause
// core/ on its own: this program links remora_core (core/ and the backends)
// and nothing of ops/, nn/ or models/, so a core file that calls into ops/
// fails to link here. It exercises what core owns: storage and metadata,
// views, copies and dtype moves, the backward engine on core's own
// differentiable views, and safetensors.
#include <catch2/catch.hpp>

#include <vector>

#include "../../core/autograd.h"
#include "../../core/generator.h"
#include "../../core/safetensors.h"
#include "../../core/tensor_impl.h"
#include "../catch_session.h"

using namespace remora;

TEST_CASE("core alone: create and read tensors", "[core]") {
  Tensor e = Tensor::empty({2, 3}, DType::f64);
  CHECK(e.shape() == Shape{2, 3});
  CHECK(e.numel() == 6);
  CHECK(e.is_contiguous());
  CHECK(e.str() == "f64[2, 3] cpu");
  Tensor t = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.dtype() == DType::f32);
  CHECK(t.at({1, 2}) == 6);
  CHECK(t.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  Tensor i = Tensor::from_vector(std::vector<int64_t>{7}, {});
  CHECK(i.item<int64_t>() == 7);
  CHECK_THROWS_AS(Tensor::empty({-1}), Error);
}

TEST_CASE("core alone: views, copies and dtype moves", "[core]") {
  Tensor t = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  Tensor v = t.view({3, 2});
  CHECK(v.impl()->storage == t.impl()->storage);  // a view shares storage
  CHECK(t.reshape({-1}).shape() == Shape{6});
  CHECK(t.flatten().shape() == Shape{6});
  CHECK(t.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(t.unsqueeze(0).squeeze(0).shape() == Shape{2, 3});
  // A transposed view built by hand (transpose itself is an op): not contiguous,
  // so reshape and contiguous copy it into row-major order.
  Tensor tt = make_view(t, {3, 2}, {1, 3}, 0);
  CHECK_FALSE(tt.is_contiguous());
  CHECK(tt.contiguous().to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(tt.reshape({6}).to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK_THROWS_AS(tt.view({6}), Error);
  Tensor c = t.clone();
  CHECK(c.impl()->storage != t.impl()->storage);
  CHECK(c.to_vector() == t.to_vector());
  CHECK(t.to(DType::f32).dtype() == DType::f32);
  CHECK(t.to(DType::i64).to_i64_vector() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(t.to(Device::cpu()).is_same(t));
}

TEST_CASE("core alone: the backward engine on core's views", "[core]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  // Two paths from x (their gradients meet in x's buffer and are summed).
  Tensor a = x.to(DType::f64).reshape({6});
  Tensor b = x.view({3, 2});
  CHECK(a.grad_fn() != nullptr);
  backward({a, b},
           {Tensor::from_vector(std::vector<double>{1, 1, 1, 1, 1, 1}, {6}, DType::f64),
            Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2})});
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(x.grad().to_vector() == std::vector<double>{2, 3, 4, 5, 6, 7});
  // A second backward adds into the existing gradient, in place.
  Tensor held = x.grad();
  x.clone().flatten().backward(Tensor::from_vector(std::vector<double>{1, 1, 1, 1, 1, 1}, {6}));
  CHECK(held.to_vector() == std::vector<double>{3, 4, 5, 6, 7, 8});
  // A one-element root gets the implicit gradient 1.
  Tensor s = Tensor::from_vector(std::vector<double>{2}, {}).requires_grad_();
  s.reshape({1, 1}).backward();
  CHECK(s.grad().item() == 1);
  {
    NoGradGuard ng;
    CHECK_FALSE(x.reshape({6}).requires_grad());
  }
}

TEST_CASE("core alone: safetensors round trip and the generator", "[core]") {
  Tensor f = Tensor::from_vector(std::vector<double>{1.5, -2, 3.25, 4}, {2, 2});
  Tensor d = make_view(Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3},
                                           DType::f64), {3, 2}, {1, 3}, 0);
  Tensor i = Tensor::from_vector(std::vector<int64_t>{-3, 9}, {2});
  const std::string bytes = serialize_safetensors({{"f", f}, {"d", d}, {"i", i}}, {{"k", "v"}});
  Safetensors st = parse_safetensors(bytes);
  CHECK(st.metadata.at("k") == "v");
  CHECK(st.get("f").dtype() == DType::f32);
  CHECK(st.get("f").to_vector() == f.to_vector());
  CHECK(st.get("d").shape() == Shape{3, 2});
  CHECK(st.get("d").to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(st.get("i").to_i64_vector() == std::vector<int64_t>{-3, 9});
  Generator g(42), h(42);
  const double u = g.next_uniform();
  CHECK(u >= 0);
  CHECK(u < 1);
  CHECK(h.next_uniform() == u);
  CHECK(g.offset() == 1);
}

int main(int argc, char** argv) { return remora_test::run_catch(argc, argv); }
