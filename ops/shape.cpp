// SPDX-License-Identifier: BSD-3-Clause
// Views (transpose, permute, slice, expand, as_strided), cat/stack, gathers,
// in-place updates, and the Tensor methods that forward to ops. reshape / view,
// clone, contiguous and the dtype/device moves are core's (core/views.cpp).
#include <algorithm>

#include "../core/generator.h"
#include "internal.h"

namespace remora {

using namespace detail;

Tensor reshape(const Tensor& x, const Shape& s) { return x.reshape(s); }

Tensor permute(const Tensor& x, const Shape& dims) {
  check_defined("permute", x, "x");
  REMORA_CHECK(int64_t(dims.size()) == x.dim(),
               "permute: " << shape_str(dims) << " has " << dims.size() << " dims, tensor "
                           << shape_str(x.shape()) << " has " << x.dim());
  Shape ns(dims.size()), nst(dims.size()), inv(dims.size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim("permute", dims[i], x.dim());
    REMORA_CHECK(inv[size_t(d)] < 0, "permute: dim " << d << " repeated in " << shape_str(dims));
    inv[size_t(d)] = int64_t(i);
    ns[i] = x.shape()[size_t(d)];
    nst[i] = x.strides()[size_t(d)];
  }
  return view_op("permute", x, ns, nst, x.offset(),
                 [inv](const Tensor& g) { return g.permute(inv); });
}

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  check_defined("transpose", x, "x");
  Shape perm(size_t(x.dim()));
  for (int64_t i = 0; i < x.dim(); ++i) perm[size_t(i)] = i;
  if (x.dim() == 0) return x;
  std::swap(perm[size_t(wrap_dim("transpose", a, x.dim()))],
            perm[size_t(wrap_dim("transpose", b, x.dim()))]);
  return permute(x, perm);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_defined("slice", x, "x");
  REMORA_CHECK(step >= 1, "slice: step must be >= 1, got " << step);
  const int64_t d = wrap_dim("slice", dim, x.dim());
  const int64_t n = x.shape()[size_t(d)];
  // Python semantics: negative bounds count from the end, then clamp.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::min(std::max<int64_t>(start, 0), n);
  end = std::min(std::max(end, start), n);
  Shape ns = x.shape(), nst = x.strides();
  ns[size_t(d)] = (end - start + step - 1) / step;
  nst[size_t(d)] *= step;
  const Shape xs = x.shape();
  return view_op("slice", x, ns, nst, x.offset() + start * x.strides()[size_t(d)],
                 [xs, d, start, end, step](const Tensor& g) {
                   Tensor z = Tensor::zeros(xs, g.dtype(), g.device());
                   copy_into(z.slice(d, start, end, step), g);
                   return z;
                 });
}

Tensor expand(const Tensor& x, const Shape& s) {
  check_defined("expand", x, "x");
  REMORA_CHECK(s.size() >= size_t(x.dim()),
               "expand: target " << shape_str(s) << " has fewer dims than " << shape_str(x.shape()));
  const size_t lead = s.size() - size_t(x.dim());
  Shape ns(s.size()), nst(s.size(), 0);
  for (size_t i = 0; i < s.size(); ++i) {
    if (i < lead) {
      REMORA_CHECK(s[i] >= 0, "expand: -1 is not allowed for new leading dims in " << shape_str(s));
      ns[i] = s[i];
      continue;
    }
    const int64_t xd = x.shape()[i - lead];
    const int64_t want = s[i] == -1 ? xd : s[i];
    REMORA_CHECK(xd == want || xd == 1, "expand: cannot expand " << shape_str(x.shape()) << " to "
                                                                 << shape_str(s) << " (dim " << i
                                                                 << ": " << xd << " -> " << want
                                                                 << ")");
    ns[i] = want;
    nst[i] = xd == want ? x.strides()[i - lead] : 0;
  }
  if (ns == x.shape()) return x;
  const Shape xs = x.shape();
  return view_op("expand", x, ns, nst, x.offset(), [xs](const Tensor& g) { return sum_to(g, xs); });
}

Tensor as_strided(const Tensor& x, const Shape& shape, const Shape& strides, int64_t offset) {
  check_defined("as_strided", x, "x");
  REMORA_CHECK(x.is_contiguous(), "as_strided: x must be contiguous (call contiguous() first)");
  REMORA_CHECK(shape.size() == strides.size(), "as_strided: shape " << shape_str(shape)
                                                                    << " and strides "
                                                                    << shape_str(strides)
                                                                    << " differ in length");
  int64_t last = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    REMORA_CHECK(shape[i] >= 0 && strides[i] >= 0,
                 "as_strided: negative size or stride in " << shape_str(shape) << " / "
                                                           << shape_str(strides));
    if (shape[i] > 0) last += (shape[i] - 1) * strides[i];
  }
  REMORA_CHECK(offset >= 0 && (shape_numel(shape) == 0 || last < x.numel()),
               "as_strided: the view reaches element " << last << " of a tensor with "
                                                       << x.numel() << " elements");
  const Shape xs = x.shape();
  return view_op("as_strided", x, shape, strides, x.offset() + offset,
                 [xs, shape, strides, offset](const Tensor& g) {
                   Tensor z = Tensor::zeros(xs, g.dtype(), g.device());
                   copy_into(make_view(z, shape, strides, offset), g);
                   return z;
                 });
}

Tensor contiguous(const Tensor& x) { return x.contiguous(); }

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  REMORA_CHECK(!xs.empty(), "cat: expected at least one tensor");
  const Tensor& x0 = xs[0];
  check_defined("cat", x0, "tensors[0]");
  const int64_t d = wrap_dim("cat", dim, x0.dim());
  Shape out_shape = x0.shape();
  out_shape[size_t(d)] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    check_defined("cat", xs[i], "tensors[i]");
    check_same("cat", x0, xs[i]);
    bool ok = xs[i].dim() == x0.dim();
    for (int64_t k = 0; ok && k < x0.dim(); ++k)
      ok = k == d || xs[i].shape()[size_t(k)] == x0.shape()[size_t(k)];
    REMORA_CHECK(ok, "cat: tensor " << i << " has shape " << shape_str(xs[i].shape())
                                    << ", which does not match " << shape_str(x0.shape())
                                    << " outside dim " << d);
    out_shape[size_t(d)] += xs[i].shape()[size_t(d)];
  }
  Tensor out = make_tensor(out_shape, x0.dtype(), x0.device());
  std::vector<int64_t> offs;
  int64_t off = 0;
  {
    NoGradGuard ng;
    for (const Tensor& x : xs) {
      const int64_t n = x.shape()[size_t(d)];
      copy_into(out.slice(d, off, off + n), x);
      offs.push_back(off);
      off += n;
    }
  }
  offs.push_back(off);
  return record("cat", xs, out, [offs, d](std::vector<Tensor>& g) {
    std::vector<Tensor> gs;
    for (size_t i = 0; i + 1 < offs.size(); ++i) gs.push_back(g[0].slice(d, offs[i], offs[i + 1]));
    return gs;
  });
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  REMORA_CHECK(!xs.empty(), "stack: expected at least one tensor");
  const int64_t d = wrap_dim("stack", dim, xs[0].dim() + 1);
  std::vector<Tensor> us;
  for (size_t i = 0; i < xs.size(); ++i) {
    REMORA_CHECK(xs[i].shape() == xs[0].shape(), "stack: tensor " << i << " has shape "
                                                                   << shape_str(xs[i].shape())
                                                                   << ", tensor 0 has "
                                                                   << shape_str(xs[0].shape()));
    us.push_back(xs[i].unsqueeze(d));
  }
  return cat(us, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  REMORA_CHECK(chunks >= 1, "chunk: chunks must be >= 1, got " << chunks);
  const int64_t d = wrap_dim("chunk", dim, x.dim());
  const int64_t n = x.shape()[size_t(d)], step = (n + chunks - 1) / chunks;
  // The parts' bounds: ceil(n / chunks) each, the last one shorter, as many as
  // that takes (fewer than `chunks` when n does not fill them); a size-0
  // dimension gives `chunks` empty parts, as in libtorch.
  std::vector<std::pair<int64_t, int64_t>> bounds;
  if (n == 0)
    bounds.assign(size_t(chunks), {0, 0});
  else
    for (int64_t s = 0; s < n; s += step) bounds.push_back({s, std::min(n, s + step)});
  std::vector<Tensor> out;
  if (!any_requires_grad({x})) {
    for (const auto& b : bounds) out.push_back(x.slice(d, b.first, b.second));
    return out;
  }
  // Views under ONE node: backward is one cat of the chunks' gradients (zeros
  // for a chunk the loss does not reach), not a zero-filled full-size gradient
  // per chunk (slice's backward) that the engine then adds up.
  std::vector<Shape> shapes;
  {
    NoGradGuard ng;
    Tensor xd = x.detach();
    for (const auto& b : bounds) {
      out.push_back(xd.slice(d, b.first, b.second));
      shapes.push_back(out.back().shape());
    }
  }
  if (out.empty()) return out;
  const DType dt = x.dtype();
  const Device dev = x.device();
  return record_optional_grads("chunk", {x}, out, [d, shapes, dt, dev](std::vector<Tensor>& g) {
    std::vector<Tensor> gs;
    for (size_t i = 0; i < shapes.size(); ++i)
      gs.push_back(g[i].defined() ? g[i] : Tensor::zeros(shapes[i], dt, dev));
    return std::vector<Tensor>{gs.size() == 1 ? gs[0] : cat(gs, d)};
  });
}

// Max / min over every element: the flat tensor's max over its one dim (0-d result;
// the gradient goes to the first extreme entry in row-major order).
Tensor max(const Tensor& x) {
  check_defined("max", x, "x");
  REMORA_CHECK(x.numel() > 0, "max: x has no elements (" << x.str() << ")");
  return max(x.reshape({-1}), 0);
}

Tensor min(const Tensor& x) {
  check_defined("min", x, "x");
  REMORA_CHECK(x.numel() > 0, "min: x has no elements (" << x.str() << ")");
  return min(x.reshape({-1}), 0);
}

namespace {
// Off the CPU the values are checked by the gather / scatter kernels instead
// (reading them here would be a host sync per call): a bad index is an Error
// at the next sync (e.g. .item()), and its entries are skipped.
void check_indices(const char* op, const Tensor& idx, int64_t limit) {
  REMORA_CHECK(idx.dtype() == DType::i64, op << ": indices must be i64, got " << idx.str());
  if (idx.numel() == 0 || !idx.device().is_cpu()) return;
  const std::vector<int64_t> v = idx.to_i64_vector();
  const auto mm = std::minmax_element(v.begin(), v.end());
  REMORA_CHECK(*mm.first >= 0 && *mm.second < limit,
               op << ": index " << (*mm.first < 0 ? *mm.first : *mm.second)
                  << " is out of range [0, " << limit << ")");
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  check_defined("index_select", x, "x");
  check_defined("index_select", idx, "index");
  check_same_device("index_select", x, idx);
  REMORA_CHECK(idx.dim() == 1, "index_select: index must be 1-D, got " << shape_str(idx.shape()));
  const int64_t d = wrap_dim("index_select", dim, x.dim());
  const int64_t r = x.shape()[size_t(d)];
  check_indices("index_select", idx, r);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape()[size_t(i)];
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[size_t(i)];
  Shape os = x.shape();
  os[size_t(d)] = idx.numel();
  Tensor xc = x.contiguous(), ic = idx.contiguous();
  Tensor out = make_tensor(os, x.dtype(), x.device());
  IndexArgs sel;
  sel.dt = x.dtype();
  sel.outer = outer;
  sel.r = r;
  sel.inner = inner;
  sel.idx = ic.data_ptr<int64_t>();
  sel.n_idx = idx.numel();
  sel.src = xc.raw_data();
  sel.dst = out.raw_data();
  backend(x.device()).index_select(sel);
  const Shape xs = x.shape();
  // ic stays alive with the closure: sel.idx points into it.
  return record("index_select", {x}, out, [xs, ic, sel](std::vector<Tensor>& g) {
    Tensor z = Tensor::zeros(xs, g[0].dtype(), g[0].device());
    Tensor gc = g[0].contiguous();
    IndexArgs add = sel;
    add.dt = z.dtype();
    add.src = gc.raw_data();
    add.dst = z.raw_data();
    backend(z.device()).index_add(add);
    return std::vector<Tensor>{z};
  });
}

Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx) {
  check_defined("embedding", weight, "weight");
  check_defined("embedding", ids, "ids");
  check_same_device("embedding", weight, ids);
  REMORA_CHECK(weight.dim() == 2, "embedding: weight must be [V, D], got " << shape_str(weight.shape()));
  const int64_t V = weight.size(0), D = weight.size(1);
  Tensor flat = ids.reshape({-1}).contiguous();
  check_indices("embedding", flat, V);
  Shape os = ids.shape();
  os.push_back(D);
  Tensor wc = weight.contiguous();
  Tensor out = make_tensor(os, weight.dtype(), weight.device());
  IndexArgs sel;
  sel.dt = weight.dtype();
  sel.r = V;
  sel.inner = D;
  sel.idx = flat.data_ptr<int64_t>();
  sel.n_idx = flat.numel();
  sel.src = wc.raw_data();
  sel.dst = out.raw_data();
  backend(weight.device()).index_select(sel);
  // As in PyTorch, the row at padding_idx is returned but receives no gradient.
  // flat stays alive with the closure: sel.idx points into it.
  return record("embedding", {weight}, out, [flat, V, D, padding_idx, sel](std::vector<Tensor>& g) {
    Tensor dw = Tensor::zeros({V, D}, g[0].dtype(), g[0].device());
    Tensor gc = g[0].contiguous();
    IndexArgs add = sel;
    add.dt = dw.dtype();
    add.src = gc.raw_data();
    add.dst = dw.raw_data();
    backend(dw.device()).index_add(add);
    if (padding_idx >= 0 && padding_idx < V) dw.select(0, padding_idx).zero_();
    return std::vector<Tensor>{dw};
  });
}

static Tensor tri(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  check_defined(op, x, "x");
  REMORA_CHECK(x.dim() >= 2, op << ": expected at least 2 dims, got " << shape_str(x.shape()));
  const int64_t R = x.size(-2), C = x.size(-1);
  Tensor i = Tensor::arange(R, DType::i64, x.device()).reshape({R, 1});
  Tensor j = Tensor::arange(C, DType::i64, x.device()).reshape({1, C});
  Tensor dj = sub(j, i);  // column - row
  Tensor keep = lower ? le(dj, Tensor::scalar(double(diagonal), DType::i64, x.device()))
                      : ge(dj, Tensor::scalar(double(diagonal), DType::i64, x.device()));
  return where(keep, x, Tensor::zeros({}, x.dtype(), x.device()));
}
Tensor tril(const Tensor& x, int64_t diagonal) { return tri("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return tri("triu", x, diagonal, false); }

// ---- in-place (no history) ----

static void check_inplace(const char* op, const Tensor& t) {
  check_defined(op, t, "self");
  REMORA_CHECK(!(GradMode::is_enabled() && t.requires_grad()),
               op << ": in-place change of a tensor that requires grad (" << t.str()
                  << ") would corrupt autograd; wrap it in NoGradGuard or use the out-of-place op");
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace("copy_", *this);
  copy_into(*this, src);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_inplace("fill_", *this);
  if (is_contiguous())
    backend(device()).fill(dtype(), raw_data(), numel(), value);
  else
    copy_into(*this, Tensor::scalar(value, dtype(), device()));
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace("add_", *this);
  check_same("add_", *this, other);
  REMORA_CHECK(broadcast_shapes("add_", shape(), other.shape()) == shape(),
               "add_: " << shape_str(other.shape()) << " does not broadcast to "
                        << shape_str(shape()));
  Tensor o = other;
  if (alpha != 1) {
    NoGradGuard ng;
    o = affine(other, alpha, 0);
  }
  BinaryArgs ba;
  ba.op = BinaryOp::add;
  ba.dt = dtype();
  ba.it = make_iter(*this, {*this, o});
  ba.out = raw_data();
  ba.a = raw_data();
  ba.b = o.raw_data();
  backend(device()).binary(ba);
  return *this;
}

Tensor& Tensor::mul_(double s) {
  check_inplace("mul_", *this);
  if (is_contiguous()) {
    UnaryArgs u;
    u.op = UnaryOp::affine;
    u.dt = dtype();
    u.n = numel();
    u.x = raw_data();
    u.out = raw_data();
    u.alpha = s;
    u.beta = 0;
    backend(device()).unary(u);
  } else {
    NoGradGuard ng;
    copy_into(*this, affine(*this, s, 0));
  }
  return *this;
}

// ---- Tensor methods beyond the op table ----

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  const int64_t dd = wrap_dim("narrow", d, dim());
  REMORA_CHECK(start >= 0 && length >= 0 && start + length <= shape()[size_t(dd)],
               "narrow: [" << start << ", " << start + length << ") is out of range for dim "
                           << dd << " of " << shape_str(shape()));
  return slice(dd, start, start + length);
}
Tensor Tensor::select(int64_t d, int64_t index) const {
  const int64_t dd = wrap_dim("select", d, dim());
  const int64_t n = shape()[size_t(dd)];
  REMORA_CHECK(index >= -n && index < n, "select: index " << index << " out of range for dim "
                                                          << dd << " of " << shape_str(shape()));
  if (index < 0) index += n;
  return slice(dd, index, index + 1).squeeze(dd);
}

}  // namespace remora
