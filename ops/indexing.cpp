// SPDX-License-Identifier: BSD-3-Clause
// Indexing: gather, scatter_add, masked_select, nonzero, repeat, and libtorch's
// Tensor::index / index_put_ with the indices of core/indexing.h.
#include <algorithm>

#include "internal.h"

namespace remora {

using namespace detail;

namespace indexing {
TensorIndex::TensorIndex(const char* s) : kind_(Kind::ellipsis) {
  REMORA_CHECK(s != nullptr && std::string(s) == "...",
               "TensorIndex: the only string index is \"...\" (Ellipsis), got \"" << (s ? s : "") << "\"");
}
}  // namespace indexing

namespace {

// The flat (row-major, contiguous x) position of every element of idx taken
// along dim: idx * stride(dim) + the position of its other coordinates.
Tensor flat_positions(const char* op, const Shape& xs, int64_t d, const Tensor& idx) {
  REMORA_CHECK(idx.dim() == int64_t(xs.size()),
               op << ": index " << shape_str(idx.shape()) << " must have as many dims as the input "
                  << shape_str(xs));
  for (size_t i = 0; i < xs.size(); ++i)
    REMORA_CHECK(int64_t(i) == d || idx.shape()[i] <= xs[i],
                 op << ": index " << shape_str(idx.shape()) << " is larger than the input " << shape_str(xs)
                    << " in dim " << i);
  NoGradGuard ng;
  Tensor ix = idx.detach().to(DType::i64);
  if (ix.device().is_cpu() && ix.numel()) {
    const std::vector<int64_t> v = ix.to_i64_vector();
    const auto mm = std::minmax_element(v.begin(), v.end());
    REMORA_CHECK(*mm.first >= 0 && *mm.second < xs[size_t(d)],
                 op << ": index " << (*mm.first < 0 ? *mm.first : *mm.second) << " is out of range [0, "
                    << xs[size_t(d)] << ") in dim " << d);
  }
  const Shape st = contiguous_strides(xs);
  Tensor pos = mul(ix, Tensor::scalar(double(st[size_t(d)]), DType::i64, ix.device()));
  for (size_t i = 0; i < xs.size(); ++i) {
    if (int64_t(i) == d || idx.shape()[i] == 1) continue;
    Shape rs(xs.size(), 1);
    rs[i] = idx.shape()[i];
    Tensor ar = Tensor::arange(0, double(idx.shape()[i]) * double(st[i]), double(st[i]), DType::i64, ix.device());
    pos = add(pos, ar.reshape(rs));
  }
  return pos.contiguous().reshape({-1});
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  check_defined("gather", x, "x");
  check_defined("gather", idx, "index");
  check_same_device("gather", x, idx);
  REMORA_CHECK(is_integral(idx.dtype()), "gather: index must be an integer tensor, got " << dtype_name(idx.dtype()));
  const int64_t d = wrap_dim("gather", dim, x.dim());
  if (x.dim() == 0) return x.clone();
  Tensor pos = flat_positions("gather", x.shape(), d, idx);
  return index_select(x.contiguous().reshape({-1}), 0, pos).reshape(idx.shape());
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src) {
  check_defined("scatter_add", x, "x");
  check_defined("scatter_add", idx, "index");
  check_defined("scatter_add", src, "src");
  check_same("scatter_add", x, src);
  check_same_device("scatter_add", x, idx);
  REMORA_CHECK(is_integral(idx.dtype()), "scatter_add: index must be an integer tensor, got " << dtype_name(idx.dtype()));
  REMORA_CHECK(src.shape() == idx.shape(), "scatter_add: src " << shape_str(src.shape()) << " and index "
                                                               << shape_str(idx.shape()) << " must have one shape");
  const int64_t d = wrap_dim("scatter_add", dim, x.dim());
  Tensor pos = flat_positions("scatter_add", x.shape(), d, idx);
  Tensor out = x.detach().contiguous().clone();
  Tensor sc = src.detach().contiguous();
  IndexArgs a;
  a.dt = x.dtype();
  a.outer = 1;
  a.r = out.numel();
  a.inner = 1;
  a.idx = pos.data_ptr<int64_t>();
  a.n_idx = pos.numel();
  a.src = sc.raw_data();
  a.dst = out.raw_data();
  if (a.n_idx) backend(x.device()).index_add(a);
  if (!any_requires_grad({x, src})) return out;
  Tensor ix = idx.detach();
  return record("scatter_add", {x, src}, out, [d, ix](std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0], gather(g[0], d, ix)};
  });
}

Tensor nonzero_positions(const Tensor& mask) {
  // Flat positions of the non-zero entries (host), as i64 on mask's device.
  const std::vector<double> v = mask.detach().to_vector();
  std::vector<int64_t> pos;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0) pos.push_back(int64_t(i));
  if (pos.empty()) return Tensor::empty({0}, DType::i64, mask.device());
  return Tensor::from_vector(pos, {}, DType::i64, mask.device());
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_defined("masked_select", x, "x");
  check_defined("masked_select", mask, "mask");
  check_same_device("masked_select", x, mask);
  const Shape s = broadcast_shapes("masked_select", x.shape(), mask.shape());
  Tensor pos = nonzero_positions(mask.detach().expand(s));
  return index_select(x.expand(s).contiguous().reshape({-1}), 0, pos);
}

Tensor repeat(const Tensor& x, const Shape& reps) {
  check_defined("repeat", x, "x");
  REMORA_CHECK(int64_t(reps.size()) >= x.dim(), "repeat: " << reps.size() << " repeats for a tensor with "
                                                            << x.dim() << " dims; give at least one per dim");
  for (int64_t r : reps) REMORA_CHECK(r >= 0, "repeat: repeats must be non-negative, got " << shape_str(reps));
  Shape xs(reps.size() - size_t(x.dim()), 1);
  xs.insert(xs.end(), x.shape().begin(), x.shape().end());
  // [.., s_i, ..] -> [.., 1, s_i, ..] expanded to [.., r_i, s_i, ..] -> [.., r_i * s_i, ..]
  Shape inter, exp, out;
  for (size_t i = 0; i < reps.size(); ++i) {
    inter.push_back(1);
    inter.push_back(xs[i]);
    exp.push_back(reps[i]);
    exp.push_back(xs[i]);
    out.push_back(reps[i] * xs[i]);
  }
  return x.reshape(inter).expand(exp).contiguous().reshape(out);
}

// ---- Tensor::index ----

namespace {

using indexing::TensorIndex;
using Kind = TensorIndex::Kind;

// Applies the basic indices (integers, slices, None, Ellipsis) and at most one
// tensor index; what the tensor index selects is left to `tensor_step`
// (its dim in the viewed result and the index), which returns the new tensor.
template <typename F>
Tensor apply_indices(const char* op, const Tensor& x, const std::vector<TensorIndex>& idx, F tensor_step) {
  int64_t consumed = 0, ellipses = 0, tensors = 0;
  for (const TensorIndex& i : idx) {
    if (i.kind() == Kind::integer || i.kind() == Kind::slice) consumed += 1;
    if (i.kind() == Kind::tensor) {
      consumed += i.tensor().dtype() == DType::b8 ? i.tensor().dim() : 1;
      ++tensors;
    }
    if (i.kind() == Kind::ellipsis) ++ellipses;
  }
  REMORA_CHECK(ellipses <= 1, op << ": at most one Ellipsis");
  REMORA_CHECK(tensors <= 1, op << ": one tensor index per call is supported (got " << tensors
                                << "); index one dim at a time");
  REMORA_CHECK(consumed <= x.dim(), op << ": too many indices (" << consumed << ") for a tensor with " << x.dim()
                                       << " dims " << shape_str(x.shape()));
  Tensor t = x;
  int64_t d = 0;  // the current dim of t
  for (size_t pos = 0; pos < idx.size(); ++pos) {
    const TensorIndex& i = idx[pos];
    if (!t.defined()) {  // the tensor step wrote in place (index_put_): only full dims may follow
      REMORA_CHECK(i.kind() == Kind::ellipsis ||
                       (i.kind() == Kind::slice && !i.slice().start && !i.slice().stop && !i.slice().step),
                   op << ": an index after a tensor index must be Slice() or Ellipsis here");
      continue;
    }
    switch (i.kind()) {
      case Kind::none:
        t = t.unsqueeze(d);
        ++d;
        break;
      case Kind::ellipsis:
        d += x.dim() - consumed;
        break;
      case Kind::integer: {
        const int64_t n = t.shape()[size_t(d)];
        const int64_t k = i.integer();
        REMORA_CHECK(k >= -n && k < n, op << ": index " << k << " is out of range for dim " << d << " of size "
                                          << n << " (shape " << shape_str(t.shape()) << ")");
        t = t.select(d, k);
        break;
      }
      case Kind::slice: {
        const int64_t n = t.shape()[size_t(d)];
        const int64_t step = i.slice().step.value_or(1);
        REMORA_CHECK(step >= 1, op << ": slice step must be positive, got " << step);
        auto clampi = [n](int64_t v) { return std::min(std::max(v < 0 ? v + n : v, int64_t(0)), n); };
        const int64_t start = clampi(i.slice().start.value_or(0));
        const int64_t stop = std::max(start, clampi(i.slice().stop.value_or(n)));
        if (!(start == 0 && stop == n && step == 1)) t = t.slice(d, start, stop, step);
        ++d;
        break;
      }
      case Kind::tensor: {
        const Tensor& ti = i.tensor();
        check_defined(op, ti, "index");
        t = tensor_step(t, d, ti);
        d += ti.dtype() == DType::b8 ? 1 : ti.dim();
        break;
      }
    }
  }
  return t;
}

// x with its dims [d, d + mask.dim()) replaced by one dim of the selected entries.
Tensor mask_select_dims(const char* op, const Tensor& t, int64_t d, const Tensor& mask) {
  const int64_t k = mask.dim();
  for (int64_t j = 0; j < k; ++j)
    REMORA_CHECK(mask.shape()[size_t(j)] == t.shape()[size_t(d + j)],
                 op << ": mask " << shape_str(mask.shape()) << " does not match the indexed dims of "
                    << shape_str(t.shape()) << " from dim " << d);
  if (k == 0) {  // a 0-d mask: a new dim of size 1 or 0
    Tensor u = t.unsqueeze(d);
    return mask.item() != 0 ? u : u.slice(d, 0, 0);
  }
  Shape merged(t.shape().begin(), t.shape().begin() + d);
  merged.push_back(-1);
  merged.insert(merged.end(), t.shape().begin() + d + k, t.shape().end());
  if (shape_numel(t.shape()) == 0) {
    merged[size_t(d)] = shape_numel(mask.shape());
  }
  Tensor flat = t.reshape(merged);
  return index_select(flat, d, nonzero_positions(mask));
}

Tensor index_tensor_step(const char* op, const Tensor& t, int64_t d, const Tensor& ti) {
  if (ti.dtype() == DType::b8) return mask_select_dims(op, t, d, ti);
  REMORA_CHECK(is_integral(ti.dtype()), op << ": a tensor index must be bool or integer, got "
                                           << dtype_name(ti.dtype()));
  const int64_t n = t.shape()[size_t(d)];
  Tensor ix = ti.to(DType::i64).contiguous().reshape({-1});
  // Negative positions count from the end, as torch.
  if (ix.device().is_cpu()) {
    std::vector<int64_t> v = ix.to_i64_vector();
    bool neg = false;
    for (int64_t& e : v) {
      REMORA_CHECK(e >= -n && e < n, op << ": index " << e << " is out of range for dim " << d << " of size " << n);
      if (e < 0) { e += n; neg = true; }
    }
    if (neg) ix = Tensor::from_vector(v, {int64_t(v.size())}, DType::i64, ix.device());
  }
  Tensor sel = index_select(t, d, ix.numel() ? ix : Tensor::empty({0}, DType::i64, t.device()));
  Shape s(t.shape().begin(), t.shape().begin() + d);
  s.insert(s.end(), ti.shape().begin(), ti.shape().end());
  s.insert(s.end(), t.shape().begin() + d + 1, t.shape().end());
  return sel.reshape(s);
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<indexing::TensorIndex>& indices) {
  check_defined("index", x, "self");
  return apply_indices("index", x, indices, [](const Tensor& t, int64_t d, const Tensor& ti) {
    return index_tensor_step("index", t, d, ti);
  });
}

Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> indices) const {
  return ::remora::index(*this, std::vector<indexing::TensorIndex>(indices));
}
Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const {
  return ::remora::index(*this, indices);
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& v) {
  check_defined("index_put_", *this, "self");
  check_defined("index_put_", v, "value");
  REMORA_CHECK(!(GradMode::is_enabled() && requires_grad()),
               "index_put_: in-place change of a tensor that requires grad (" << str()
                   << ") would corrupt autograd; wrap it in NoGradGuard or use the out-of-place index_put");
  NoGradGuard ng;
  Tensor self = *this;
  apply_indices("index_put_", self, indices, [&](const Tensor& t, int64_t d, const Tensor& ti) {
    // The tensor index writes in place here: t is a view of self. Positions
    // along dim d (a mask over the dims from d flattened, or integers).
    Tensor flat = t;
    Tensor pos;
    if (ti.dtype() == DType::b8) {
      const int64_t k = std::max<int64_t>(ti.dim(), 1);
      Tensor m = ti.dim() ? ti : ti.reshape({1});
      Tensor u = ti.dim() ? t : t.unsqueeze(d);
      Shape merged(u.shape().begin(), u.shape().begin() + d);
      merged.push_back(shape_numel(m.shape()));
      merged.insert(merged.end(), u.shape().begin() + d + k, u.shape().end());
      flat = u.view(merged);  // must be a view, so the writes land in self
      pos = nonzero_positions(m);
    } else {
      REMORA_CHECK(is_integral(ti.dtype()), "index_put_: a tensor index must be bool or integer, got "
                                                << dtype_name(ti.dtype()));
      pos = ti.to(DType::i64).contiguous().reshape({-1});
    }
    const std::vector<int64_t> p = pos.to_i64_vector();
    // The value broadcast to the selected part [.., len(p), ..].
    Shape sel = flat.shape();
    sel[size_t(d)] = int64_t(p.size());
    Tensor val = v.to(t.dtype()).to(t.device());
    REMORA_CHECK(broadcast_shapes("index_put_", sel, val.shape()) == sel,
                 "index_put_: value " << shape_str(val.shape()) << " does not broadcast to the indexed part "
                                      << shape_str(sel));
    if (val.dim() < int64_t(sel.size())) {
      Shape vs(sel.size() - size_t(val.dim()), 1);
      vs.insert(vs.end(), val.shape().begin(), val.shape().end());
      val = val.reshape(vs);
    }
    const int64_t n = flat.shape()[size_t(d)];
    for (size_t j = 0; j < p.size(); ++j) {
      const int64_t e = p[j] < 0 ? p[j] + n : p[j];
      REMORA_CHECK(e >= 0 && e < n, "index_put_: index " << p[j] << " is out of range for dim " << d
                                                         << " of size " << n);
      Tensor dst = flat.select(d, e);
      Tensor src = val.shape()[size_t(d)] == 1 ? val.select(d, 0) : val.select(d, int64_t(j));
      dst.copy_(src);
    }
    return Tensor();  // nothing follows a tensor index in what index_put_ writes
  });
  // Without a tensor index the indices make a view of self: write into it.
  bool has_tensor = false;
  for (const auto& i : indices) has_tensor = has_tensor || i.kind() == Kind::tensor;
  if (!has_tensor) {
    Tensor view = apply_indices("index_put_", self, indices,
                                [](const Tensor& t, int64_t, const Tensor&) { return t; });
    view.copy_(v.to(dtype()).to(device()));
  }
  return *this;
}
Tensor index_put(const Tensor& x, const std::vector<indexing::TensorIndex>& indices, const Tensor& v) {
  check_defined("index_put", x, "self");
  check_defined("index_put", v, "value");
  Tensor out, written;
  const bool needs_grad = any_requires_grad({x, v});  // before the guard turns grad mode off
  {
    NoGradGuard ng;
    out = x.detach().clone();
    out.index_put_(indices, v.detach());
    // 1 where the indices write (x's dtype: masks of any dtype work on every
    // device), for the backward only.
    if (needs_grad) {
      written = Tensor::zeros(x.shape(), x.dtype(), x.device());
      written.index_put_(indices, 1.0);
    }
  }
  const Shape vshape = v.shape();
  const DType vdt = v.dtype();
  return record("index_put", {x, v}, out, [indices, written, vshape, vdt](std::vector<Tensor>& g) {
    // x keeps its gradient where nothing was written; v gets the gradient of
    // the places it was written to, summed over its broadcast dims.
    Tensor gv = sum_to(index(g[0], indices), vshape);
    return std::vector<Tensor>{masked_fill(g[0], written, 0.0), is_floating(vdt) ? gv.to(vdt) : Tensor()};
  });
}

Tensor Tensor::index_put(std::initializer_list<indexing::TensorIndex> indices, const Tensor& v) const {
  return ::remora::index_put(*this, std::vector<indexing::TensorIndex>(indices), v);
}
Tensor Tensor::index_put(const std::vector<indexing::TensorIndex>& indices, const Tensor& v) const {
  return ::remora::index_put(*this, indices, v);
}
Tensor Tensor::index_put(std::initializer_list<indexing::TensorIndex> indices, double v) const {
  return ::remora::index_put(*this, std::vector<indexing::TensorIndex>(indices), Tensor::scalar(v, dtype(), device()));
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, double v) {
  return index_put_(indices, Tensor::scalar(v, dtype(), device()));
}
Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& v) {
  return index_put_(std::vector<indexing::TensorIndex>(indices), v);
}
Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, double v) {
  return index_put_(std::vector<indexing::TensorIndex>(indices), v);
}

}  // namespace remora
