// SPDX-License-Identifier: BSD-3-Clause
// libtorch's tensor indices (torch::indexing), for Tensor::index and
// Tensor::index_put_ (core/tensor.h):
//
//   using namespace remora::indexing;
//   Tensor y = x.index({Slice(0, 2), 1, None, Ellipsis});  // x[0:2, 1, None, ...]
//   x.index_put_({Slice(), 0}, 7.0);                         // x[:, 0] = 7
//   Tensor pos = x.index({x > 0});                           // boolean mask: 1-D
//
// An index is an integer (drops its dim), a Slice(start, stop, step) (each may
// be None; negative values count from the end), None (a new dim of size 1),
// Ellipsis (as many full dims as needed), a bool tensor (a mask over the next
// mask.dim() dims, which it replaces by one dim of the selected elements), or an
// integer tensor (the positions along its dim, replaced by the index's shape).
// At most one tensor index per call (libtorch broadcasts several together).
#pragma once
#include <cstdint>
#include <optional>

namespace remora {
namespace indexing {

// Slice's bounds and the None index are std::nullopt, as in libtorch.
constexpr std::nullopt_t None = std::nullopt;

struct EllipsisIndexType {
  explicit constexpr EllipsisIndexType(int) {}
};
constexpr EllipsisIndexType Ellipsis{0};

// [start, stop) every step; None bounds mean the whole dim (step >= 1).
struct Slice {
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start, stop, step;
};

class TensorIndex {
 public:
  enum class Kind { integer, slice, none, ellipsis, tensor };
  TensorIndex(std::nullopt_t) : kind_(Kind::none) {}                 // NOLINT: implicit
  TensorIndex(EllipsisIndexType) : kind_(Kind::ellipsis) {}          // NOLINT
  TensorIndex(int64_t i) : kind_(Kind::integer), integer_(i) {}      // NOLINT
  TensorIndex(int i) : kind_(Kind::integer), integer_(i) {}          // NOLINT
  TensorIndex(Slice s) : kind_(Kind::slice), slice_(s) {}            // NOLINT
  TensorIndex(const Tensor& t) : kind_(Kind::tensor), tensor_(t) {}  // NOLINT
  TensorIndex(const char* s);  // "..." is Ellipsis (libtorch's spelling); anything else an Error

  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace indexing

// torch::indexing spellings at remora:: too, as the torch namespace has them
// through `using namespace torch::indexing`.
using indexing::Ellipsis;
using indexing::Slice;
using indexing::TensorIndex;

}  // namespace remora
