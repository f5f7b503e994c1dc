// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// libtorch's tensor indices (torch::indexing), for Tensor::index and
/// Tensor::index_put_ (core/tensor.h):
///
/// \code
///   using namespace remora::indexing;
///   Tensor y = x.index({Slice(0, 2), 1, None, Ellipsis});  // x[0:2, 1, None, ...]
///   x.index_put_({Slice(), 0}, 7.0);                         // x[:, 0] = 7
///   Tensor pos = x.index({x > 0});                           // boolean mask: 1-D
/// \endcode
///
/// An index is an integer (drops its dim), a Slice(start, stop, step) (each may
/// be None; negative values count from the end), None (a new dim of size 1),
/// Ellipsis (as many full dims as needed), a bool tensor (a mask over the next
/// mask.dim() dims, which it replaces by one dim of the selected elements), or an
/// integer tensor (the positions along its dim, replaced by the index's shape).
/// At most one tensor index per call (libtorch broadcasts several together).
#pragma once
#include <cstdint>
#include <optional>

#include "tensor.h"

namespace remora {
/// libtorch's tensor indices (torch::indexing): None, Ellipsis, Slice, TensorIndex.
namespace indexing {

/// Slice's bounds and the None index are std::nullopt, as in libtorch.
/// As an index, None inserts a new dim of size 1.
constexpr std::nullopt_t None = std::nullopt;

/// The type of Ellipsis.
struct EllipsisIndexType {
  /// Constructs the tag (only Ellipsis needs one).
  explicit constexpr EllipsisIndexType(int) {}
};
/// The index that stands for as many full dims as needed (Python's `...`).
constexpr EllipsisIndexType Ellipsis{0};

/// [start, stop) every step; None bounds mean the whole dim (step >= 1).
/// Negative bounds count from the end; bounds are clamped to the dim, and
/// stop < start gives an empty dim. A step below 1 is an Error when the index
/// is applied. Slice() is the whole dim, Python's `:`.
struct Slice {
  /// A slice from start (default 0) to stop (default the dim's size) every
  /// step (default 1).
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start(start), stop(stop), step(step) {}
  /// \var start
  /// First position (None: 0; negative: from the end).
  /// \var stop
  /// One past the last position (None: the dim's size; negative: from the end).
  /// \var step
  /// Distance between positions, at least 1 (None: 1).
  //
  std::optional<int64_t> start, stop, step;
};

/// One index of Tensor::index / Tensor::index_put_: an integer, a Slice, None,
/// Ellipsis or a tensor (bool mask or integer positions). Converts implicitly
/// from each of these, so a braced list of them is an index list.
class TensorIndex {
 public:
  /// Which index a TensorIndex holds.
  enum class Kind { integer, slice, none, ellipsis, tensor };
  /// None: a new dim of size 1.
  TensorIndex(std::nullopt_t) : kind_(Kind::none) {}                 // NOLINT: implicit
  /// Ellipsis: as many full dims as needed.
  TensorIndex(EllipsisIndexType) : kind_(Kind::ellipsis) {}          // NOLINT
  /// An integer: selects position i of its dim and drops the dim (negative: from the end).
  TensorIndex(int64_t i) : kind_(Kind::integer), integer_(i) {}      // NOLINT
  /// An integer: selects position i of its dim and drops the dim (negative: from the end).
  TensorIndex(int i) : kind_(Kind::integer), integer_(i) {}          // NOLINT
  /// A slice of its dim.
  TensorIndex(Slice s) : kind_(Kind::slice), slice_(s) {}            // NOLINT
  /// A tensor index: a b8 mask or integer positions (see the file's description).
  TensorIndex(const Tensor& t) : kind_(Kind::tensor), tensor_(t) {}  // NOLINT
  /// "..." is Ellipsis (libtorch's spelling); anything else is an Error.
  TensorIndex(const char* s);  // "..." is Ellipsis (libtorch's spelling); anything else an Error

  /// Which index this is.
  Kind kind() const { return kind_; }
  /// The position (kind() == integer; 0 otherwise).
  int64_t integer() const { return integer_; }
  /// The slice (kind() == slice; Slice() otherwise).
  const Slice& slice() const { return slice_; }
  /// The index tensor (kind() == tensor; undefined otherwise).
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
