// SPDX-License-Identifier: BSD-3-Clause
// Views, copies and dtype/device moves of a Tensor: reshape / view (and
// flatten, unsqueeze, squeeze), clone, contiguous, to(dtype), to(device).
// Storage-level operations whose backward is another of them, so core's own
// code (the backward engine, safetensors, element access) needs nothing from
// ops/. The other views (transpose, permute, slice, expand, ...) are in
// ops/shape.cpp.
#include <algorithm>

#include "strided.h"

namespace remora {

using namespace detail;

namespace {

// Strides that let `shape` view memory laid out as (old_shape, old_strides);
// false when no view exists (PyTorch's computeStride).
bool view_strides(const Shape& os, const Shape& ost, const Shape& ns, Shape* out) {
  Shape nst(ns.size());
  if (shape_numel(os) == 0 || os.empty()) {
    *out = contiguous_strides(ns);
    return true;
  }
  int64_t view_d = int64_t(ns.size()) - 1;
  int64_t chunk_base = ost.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t td = int64_t(os.size()) - 1; td >= 0; --td) {
    tensor_numel *= os[size_t(td)];
    if (td == 0 ||
        (os[size_t(td - 1)] != 1 && ost[size_t(td - 1)] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || ns[size_t(view_d)] == 1)) {
        nst[size_t(view_d)] = view_numel * chunk_base;
        view_numel *= ns[size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (td > 0) {
        chunk_base = ost[size_t(td - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return false;
  *out = nst;
  return true;
}

Shape infer_shape(const char* op, const Tensor& x, const Shape& s) {
  Shape out = s;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      REMORA_CHECK(infer < 0, op << ": only one -1 allowed in " << shape_str(s));
      infer = int64_t(i);
    } else {
      REMORA_CHECK(s[i] >= 0, op << ": negative size in " << shape_str(s));
      known *= s[i];
    }
  }
  if (infer >= 0) {
    REMORA_CHECK(known > 0 && x.numel() % known == 0,
                 op << ": cannot infer -1 in " << shape_str(s) << " for " << x.numel()
                    << " elements of " << shape_str(x.shape()));
    out[size_t(infer)] = x.numel() / known;
  }
  REMORA_CHECK(shape_numel(out) == x.numel(),
               op << ": shape " << shape_str(s) << " is invalid for a tensor of shape "
                  << shape_str(x.shape()) << " (" << x.numel() << " elements)");
  return out;
}

}  // namespace

Tensor Tensor::reshape(const Shape& s) const {
  const Tensor& x = *this;
  check_defined("reshape", x, "x");
  const Shape ns = infer_shape("reshape", x, s);
  Shape nst;
  if (!view_strides(x.shape(), x.strides(), ns, &nst)) return x.contiguous().view(ns);
  const Shape xs = x.shape();
  return view_op("reshape", x, ns, nst, x.offset(),
                 [xs](const Tensor& g) { return g.reshape(xs); });
}

Tensor Tensor::view(const Shape& s) const {
  check_defined("view", *this, "self");
  const Shape ns = infer_shape("view", *this, s);
  Shape nst;
  REMORA_CHECK(view_strides(shape(), strides(), ns, &nst),
               "view: shape " << shape_str(ns) << " is not compatible with the strides of "
                              << shape_str(shape()) << " " << shape_str(strides())
                              << "; use reshape() (which copies) or call contiguous() first");
  const Shape xs = shape();
  return view_op("view", *this, ns, nst, offset(),
                 [xs](const Tensor& g) { return g.reshape(xs); });
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim("flatten", start, dim()), e = wrap_dim("flatten", end, dim());
  REMORA_CHECK(s <= e, "flatten: start dim " << start << " is after end dim " << end);
  Shape ns(shape().begin(), shape().begin() + s);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i) n *= shape()[size_t(i)];
  ns.push_back(n);
  ns.insert(ns.end(), shape().begin() + e + 1, shape().end());
  return reshape(ns);
}
Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t dd = wrap_dim("unsqueeze", d, dim() + 1);
  Shape ns = shape();
  ns.insert(ns.begin() + dd, 1);
  return reshape(ns);
}
Tensor Tensor::squeeze(int64_t d) const {
  const int64_t dd = wrap_dim("squeeze", d, dim());
  if (shape()[size_t(dd)] != 1) return *this;
  Shape ns = shape();
  ns.erase(ns.begin() + dd);
  return reshape(ns);
}

// ---- copies, dtype and device moves ----

Tensor Tensor::clone() const {
  check_defined("clone", *this, "self");
  Tensor out = make_tensor(shape(), dtype(), device());
  copy_into(out, *this);
  return record("clone", {*this}, out, [](std::vector<Tensor>& g) { return g; });
}

Tensor Tensor::contiguous() const {
  check_defined("contiguous", *this, "x");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::to(DType dt) const {
  check_defined("to", *this, "self");
  if (dt == dtype()) return *this;
  Tensor out = make_tensor(shape(), dt, device());
  copy_into(out, *this);
  if (!is_floating(dt)) return out;
  const DType src = dtype();
  return record("to_dtype", {*this}, out, [src](std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].to(src)};
  });
}

Tensor Tensor::to(Device dev) const {
  check_defined("to", *this, "self");
  if (dev == device()) return *this;
  Tensor src = contiguous();
  Tensor out = make_tensor(shape(), dtype(), dev);
  const size_t nbytes = size_t(numel()) * dtype_size(dtype());
  if (device().is_cpu()) {
    backend(dev).copy_from_host(out.raw_data(), src.raw_data(), nbytes);
  } else if (dev.is_cpu()) {
    backend(device()).copy_to_host(out.raw_data(), src.raw_data(), nbytes);
  } else {  // device to device through the host
    std::vector<char> host(nbytes);
    backend(device()).copy_to_host(host.data(), src.raw_data(), nbytes);
    backend(dev).copy_from_host(out.raw_data(), host.data(), nbytes);
  }
  const Device from = device();
  return record("to_device", {*this}, out, [from](std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].to(from)};
  });
}

}  // namespace remora
