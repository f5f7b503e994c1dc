// SPDX-License-Identifier: BSD-3-Clause
// Bad inputs throw remora::Error whose message names the op and the offending
// shapes / dtypes / values (DESIGN.md: "an error says what was wrong").
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "helpers.h"
#include "../backends/backend.h"

using namespace remora;
using remora_test::contains;
using remora_test::error_of;



TEST_CASE("broadcast and dtype mismatches name the op and both shapes", "[errors]") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  CHECK_ERROR(add(a, b), "add", "[2, 3]", "[4]", "broadcast");
  CHECK_ERROR(a * Tensor::zeros({3, 3}), "mul", "[2, 3]", "[3, 3]");
  CHECK_ERROR(where(Tensor::ones({5}), a, a), "where", "[5]");
  CHECK_ERROR(masked_fill(a, Tensor::ones({4, 2, 3}), 0), "masked_fill", "[4, 2, 3]", "[2, 3]");
  CHECK_ERROR(Tensor::zeros({2}).expand({3, 4}), "expand", "[2]", "[3, 4]");
  {
    NoGradGuard ng;
    CHECK_ERROR(Tensor::zeros({3}).add_(Tensor::zeros({2, 3})), "add_", "[2, 3]", "[3]");
    CHECK_ERROR(Tensor::zeros({3}).copy_(Tensor::zeros({4})), "copy_", "[4]", "[3]");
  }
  // f32 + f64
  Tensor f = Tensor::zeros({2}, DType::f32), d = Tensor::zeros({2}, DType::f64);
  CHECK_ERROR(f + d, "add", "f32", "f64");
  CHECK_ERROR(matmul(Tensor::zeros({2, 2}, DType::f32), Tensor::zeros({2, 2}, DType::f64)),
              "matmul", "f32", "f64");
  CHECK_ERROR(cat({f, d}, 0), "cat", "f32", "f64");
  CHECK_ERROR(layer_norm(Tensor::zeros({2, 4}), Tensor::ones({4}, DType::f64), Tensor()),
              "layer_norm", "f32", "f64");
  // Floating-only ops on integers.
  CHECK_ERROR(exp(Tensor::arange(3)), "exp", "i64");
  CHECK_ERROR(matmul(Tensor::arange(4).reshape({2, 2}), Tensor::arange(4).reshape({2, 2})),
              "matmul", "i64");
  CHECK_ERROR(Tensor::randn({2}, DType::i64), "randn", "i64");
}

TEST_CASE("matmul shape errors", "[errors]") {
  CHECK_ERROR(matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})), "matmul", "[2, 3]", "[4, 5]",
              "3 vs 4");
  CHECK_ERROR(matmul(Tensor::zeros({3}), Tensor::zeros({4})), "matmul", "[1, 3]", "[4, 1]");
  CHECK_ERROR(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4})), "matmul", "[2]", "[3]");
  CHECK_ERROR(matmul(Tensor::scalar(1), Tensor::zeros({2})), "matmul", "at least 1 dim");
  CHECK_ERROR(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})), "linear", "[2, 3]", "[4, 5]");
  CHECK_ERROR(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}), Tensor::zeros({5})), "linear",
              "bias", "[5]");
}

TEST_CASE("reshape and view errors", "[errors]") {
  Tensor x = Tensor::zeros({2, 3});
  CHECK_ERROR(x.reshape({4}), "reshape", "[4]", "[2, 3]", "6 elements");
  CHECK_ERROR(x.reshape({-1, -1}), "reshape", "-1");
  CHECK_ERROR(x.reshape({4, -1}), "reshape", "[4, -1]");
  CHECK_ERROR(x.view({7}), "view", "[7]");
  CHECK_ERROR(x.t().view({6}), "view", "[3, 2]", "reshape");
  CHECK_ERROR(x.permute({0, 0}), "permute", "repeated");
  CHECK_ERROR(x.permute({0}), "permute", "[2, 3]");
  CHECK_ERROR(Tensor::from_vector(std::vector<double>{1, 2, 3}, {2, 2}), "from_vector", "[2, 2]");
  CHECK_ERROR(Tensor::zeros({2, -1}), "negative", "[2, -1]");
}

TEST_CASE("out-of-range dims and indices", "[errors]") {
  Tensor x = Tensor::zeros({2, 3});
  CHECK_ERROR(x.sum({2}), "sum", "dim 2", "2 dims");
  CHECK_ERROR(x.sum({-3}), "sum", "dim -3");
  CHECK_ERROR(x.sum({1, 1}), "sum", "twice");
  CHECK_ERROR(mean(x, {5}), "mean", "dim 5");
  CHECK_ERROR(x.transpose(0, 2), "transpose", "dim 2");
  CHECK_ERROR(softmax(x, 2), "softmax", "dim 2");
  CHECK_ERROR(log_softmax(x, -3), "log_softmax", "dim -3");
  CHECK_ERROR(max(x, 4), "max", "dim 4");
  CHECK_ERROR(argmax(x, 2), "argmax", "dim 2");
  CHECK_ERROR(x.slice(3, 0, 1), "slice", "dim 3");
  CHECK_ERROR(x.slice(0, 0, 1, 0), "slice", "step");
  CHECK_ERROR(x.select(1, 3), "select", "index 3", "[2, 3]");
  CHECK_ERROR(x.narrow(1, 2, 2), "narrow", "[2, 3]");
  CHECK_ERROR(x.unsqueeze(3), "unsqueeze", "dim 3");
  CHECK_ERROR(x.size(2), "size", "dim 2", "[2, 3]");
  CHECK_ERROR(x.at({0, 3}), "at", "index 3", "[2, 3]");
  CHECK_ERROR(x.at({0}), "at", "1 indices", "[2, 3]");
  CHECK_ERROR(cat({x, Tensor::zeros({3, 3})}, 1), "cat", "[3, 3]", "[2, 3]");
  CHECK_ERROR(cat({x}, 2), "cat", "dim 2");
  CHECK_ERROR(cat({}, 0), "cat", "at least one");
  CHECK_ERROR(stack({x, Tensor::zeros({3, 2})}, 0), "stack", "[3, 2]", "[2, 3]");
  CHECK_ERROR(chunk(x, 0, 0), "chunk", "chunks");
  CHECK_ERROR(tril(Tensor::zeros({3})), "tril", "[3]");
  CHECK_ERROR(max(Tensor::zeros({0, 2}), 0), "max", "empty", "[0, 2]");
  CHECK_ERROR(sum_to(x, {3, 3}), "sum_to", "[2, 3]", "[3, 3]");
  CHECK_ERROR(set_num_threads(0), "set_num_threads");
}

TEST_CASE("nn op argument errors", "[errors]") {
  // layer_norm: x [2, 4], weight must be [4]
  Tensor x = Tensor::zeros({2, 4});
  CHECK_ERROR(layer_norm(x, Tensor::ones({3}), Tensor()), "layer_norm", "[4]", "[2, 4]", "[3]");
  CHECK_ERROR(layer_norm(x, Tensor::ones({4}), Tensor::zeros({5})), "layer_norm", "[5]");
  CHECK_ERROR(layer_norm(x, Tensor::ones({2, 4}), Tensor()), "layer_norm", "[2, 4]");
  CHECK_ERROR(layer_norm(Tensor::scalar(1), Tensor(), Tensor()), "layer_norm", "scalar");

  // cross_entropy: logits [2, 5], target i64 [2]
  Tensor logits = Tensor::zeros({2, 5});
  CHECK_ERROR(cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{1, 7})),
              "cross_entropy", "target 7", "[0, 5)");
  CHECK_ERROR(cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{-1, 0})),
              "cross_entropy", "target -1");
  CHECK_ERROR(cross_entropy(logits, Tensor::zeros({2})), "cross_entropy", "i64", "f32");
  CHECK_ERROR(cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{1, 2, 3})),
              "cross_entropy", "[3]", "[2, 5]", "[2]");
  CHECK_ERROR(cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{1, 2}, {2, 1})),
              "cross_entropy", "[2, 1]");
  CHECK_ERROR(cross_entropy(Tensor::arange(10).reshape({2, 5}),
                            Tensor::from_vector(std::vector<int64_t>{1, 2})),
              "cross_entropy", "i64");

  // embedding: weight [5, 3]
  Tensor w = Tensor::zeros({5, 3});
  CHECK_ERROR(embedding(w, Tensor::from_vector(std::vector<int64_t>{0, 9})), "embedding",
              "index 9", "[0, 5)");
  CHECK_ERROR(embedding(w, Tensor::from_vector(std::vector<int64_t>{-2})), "embedding", "-2");
  CHECK_ERROR(embedding(w, Tensor::zeros({2})), "embedding", "i64", "f32");
  CHECK_ERROR(embedding(Tensor::zeros({5}), Tensor::from_vector(std::vector<int64_t>{0})),
              "embedding", "[5]");

  // index_select: x [3, 4]
  Tensor xs = Tensor::zeros({3, 4});
  CHECK_ERROR(index_select(xs, 0, Tensor::zeros({2})), "index_select", "i64", "f32");
  CHECK_ERROR(index_select(xs, 0, Tensor::from_vector(std::vector<int64_t>{3})), "index_select",
              "index 3", "[0, 3)");
  CHECK_ERROR(index_select(xs, 1, Tensor::from_vector(std::vector<int64_t>{0, 1}, {1, 2})),
              "index_select", "1-D", "[1, 2]");
  CHECK_ERROR(index_select(xs, 2, Tensor::from_vector(std::vector<int64_t>{0})), "index_select",
              "dim 2");

  // dropout
  CHECK_ERROR(dropout(Tensor::ones({3}), 1.0, true), "dropout", "p");
  CHECK_ERROR(dropout(Tensor::ones({3}), -0.1, true), "dropout", "p");
  // sin/cos have no gradient
  CHECK_ERROR(sin(Tensor::ones({2}, DType::f64).requires_grad_()), "sin", "gradient");
}

TEST_CASE("autograd misuse errors", "[errors][autograd]") {
  CHECK_ERROR(Tensor::arange(3).requires_grad_(), "requires_grad_", "i64");
  Tensor x = Tensor::ones({2}, DType::f64).requires_grad_();
  Tensor y = x * 2.0;
  CHECK_ERROR(y.requires_grad_(false), "requires_grad_", "leaf");
  CHECK_ERROR(y.backward(), "backward", "[2]", "scalar");
  CHECK_ERROR(y.backward(Tensor::ones({2}, DType::f32)), "backward", "f32", "f64");
  CHECK_ERROR(Tensor::ones({1}).backward(), "backward", "does not require grad");
  CHECK_ERROR(x.set_grad(Tensor::ones({3}, DType::f64)), "set_grad", "[3]", "[2]");
  CHECK_ERROR(backward({y.sum()}, {}), "backward", "1 roots", "0 gradients");
  Tensor z = exp(x).sum();
  z.backward();
  CHECK_ERROR(z.backward(), "sum", "retain_graph");  // the first node reached names itself
}

TEST_CASE("device errors are clear, never a crash", "[errors]") {
  // Without a usable CUDA device (a build without the CUDA backend, or a machine
  // without a GPU or driver); with one, tests/test_cuda.cpp covers the errors.
  if (!cuda_is_available()) {
    CHECK_ERROR(Tensor::zeros({2}, DType::f32, Device::cuda()), "cuda:0", "CUDA");
    CHECK_ERROR(Tensor::empty({3, 4}, DType::f32, Device::cuda()), "CUDA");
    CHECK_ERROR(Tensor::randn({2}, DType::f32, Device::cuda(1)), "cuda:1", "CUDA");
    CHECK_ERROR(Tensor::from_vector(std::vector<double>{1}, {1}, DType::f32, Device::cuda()), "CUDA");
    CHECK_ERROR(Tensor::ones({2}).to(Device::cuda()), "CUDA");
    // Zero-size tensors allocate nothing, but still must not pretend to live on CUDA.
    CHECK_ERROR(Tensor::empty({0}, DType::f32, Device::cuda()), "CUDA");
  }

  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::cuda(2).str() == "cuda:2");
  CHECK_ERROR(Device::parse("gpu"), "gpu", "cpu, cuda or cuda:N");
  CHECK_ERROR(Device::parse("cuda:"), "cuda:", "cuda:N");
  CHECK_ERROR(Device::parse("cuda:x1"), "cuda:x1");
  CHECK_ERROR(Device::parse("cuda:-1"), "cuda:-1");
  CHECK_ERROR(Device::parse("cuda:99999999999999999999"), "cuda:99999999999999999999");
  CHECK_ERROR(Device::parse(""), "device");
}

TEST_CASE("element access and undefined tensors", "[errors]") {
  CHECK_ERROR(Tensor::zeros({2, 2}).item(), "item", "[2, 2]");
  CHECK_ERROR(Tensor::zeros({0}).item(), "item", "[0]");
  Tensor u;
  CHECK_FALSE(u.defined());
  CHECK(u.str() == "undefined");
  CHECK_ERROR(u.shape(), "undefined");
  CHECK_ERROR(u.dtype(), "undefined");
  CHECK_ERROR(u.numel(), "undefined");
  CHECK_ERROR(u.item(), "undefined");
  CHECK_ERROR(u.to_vector(), "undefined");
  CHECK_ERROR(u.reshape({1}), "reshape", "undefined");
  CHECK_ERROR(u.detach(), "undefined");
  CHECK_ERROR(u.requires_grad_(), "undefined");
  CHECK_ERROR(u.backward(), "undefined");
  CHECK_ERROR(u.at({0}), "undefined");
  CHECK_ERROR(add(u, Tensor::ones({1})), "add", "undefined");
  CHECK_ERROR(Tensor::ones({1}) * u, "mul", "undefined");
  CHECK_ERROR(matmul(u, Tensor::ones({1})), "matmul", "undefined");
  CHECK_ERROR(sum(u), "sum", "undefined");
  CHECK_ERROR(softmax(u, 0), "softmax", "undefined");
  CHECK_ERROR(exp(u), "exp", "undefined");
  CHECK_ERROR(cat({Tensor::ones({1}), u}, 0), "cat", "undefined");
  CHECK_ERROR(index_select(Tensor::ones({2}), 0, u), "index_select", "undefined");
  CHECK_ERROR(u.contiguous(), "contiguous", "undefined");
  CHECK_ERROR(u.to(DType::f64), "undefined");
  CHECK_ERROR(u.grad(), "undefined");
  CHECK_FALSE(u.requires_grad());
}
