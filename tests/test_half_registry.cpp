// SPDX-License-Identifier: BSD-3-Clause
// [half_registry]: every case of the gradient-check registry (cases/) run
// in bf16 and in f16 on the CPU against the CPU in f64 (output and every
// input's gradient, the backward in the 16-bit type too), and on each
// accelerator the cases of its 16-bit kernels (the products) in bf16 against
// the CPU. Gradient checks themselves stay f64 ([gradcheck]).
//
// Tolerances (element passes when |got - ref| <= atol * max(1, max|ref|) +
// rtol * |ref|, as [backends]):
//  bf16  rtol 5e-2, atol 5e-2. bf16 keeps 8 significant bits: unit roundoff
//        u = 2^-8 = 3.9e-3 per stored result. Every op rounds its inputs
//        (converted from f64 once: u), its result (u) and, in backward, the
//        incoming gradient and each intermediate gradient (u each); the cases
//        chain up to ~6 such roundings, and products and reductions amplify
//        an input's relative error by the condition number of the sum
//        (cancellation), which atol, relative to the tensor's scale, absorbs.
//        ~6u = 2.3e-2 typical, with 2x headroom.
//  f16   rtol 1e-2, atol 1e-2: 11 significant bits, u = 2^-11 = 4.9e-4, the
//        same chains (8x tighter), where values stay inside f16's range.
// Ops whose kernels take no 16-bit input (the fused attention, the REM and
// SRU kernels, the fused optimizer steps) refuse it with an Error saying so
// (convert to f32); that is checked and they are listed, not compared.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "../cases/backend_compare.h"

using namespace remora;
using remora::cases::CompareResult;
using remora::cases::Tol;

namespace {

Tol half_tol(DType dt) { return dt == DType::bf16 ? Tol{5e-2, 5e-2} : Tol{1e-2, 1e-2}; }

// Cases not compared in a 16-bit type, and why.
struct Skip {
  const char* prefix;
  bool f16_only;
  const char* why;
};
const Skip kSkips[] = {
    {"max/rows_over_65535", false,
     "rounding to 16 bits makes ties among 65,536+ values; the gradient goes to the first maximal entry, "
     "which is then another element than in f64"},
    {"starsaber_layer/", true, "padding masks of -1e9 and more overflow f16's range (65504)"},
    {"cross_entropy/many_rows_odd_vocab", true, "the summed loss of 7*10^4 rows exceeds f16's range"},
    // f32's precision at large logits (tests/test_losses.cpp): in 16 bits the
    // inputs themselves move by up to half an ulp, 4 at 2,000 in bf16 (1e5 is
    // past f16's range), so the rows differ from f64's by units.
    {"log_softmax/large_logits", false, "logits near 2,000 and 1e5 are not representable to within units in 16 bits"},
    {"cross_entropy/large_logits", false, "logits near 2,000 are not representable to within units in 16 bits"},
    {"cross_entropy/near_certain", false, "logits near 2,000 are not representable to within units in 16 bits"},
};

// Ops computed in f32 from their 16-bit inputs (converted at the op boundary:
// the attention, its REM scan): their f32 kernels are compared by
// [backends]; here they must run (no throw) and their worst error is
// reported, since the inputs' and the result's roundings pass through
// softmax and long scans (errors up to ~0.5 of max|ref| in the long and
// masked cases).
bool f32_inside(const GradcheckCase& c) {
  return c.op.rfind("rsa_attention", 0) == 0 || c.op.rfind("rem_", 0) == 0;
}

bool skip_case(const GradcheckCase& c, DType dt, std::string* why) {
  if (c.huge) {
    *why = "huge";
    return true;
  }
  for (const Skip& s : kSkips)
    if (c.name.rfind(s.prefix, 0) == 0 && (!s.f16_only || dt == DType::f16)) {
      *why = s.why;
      return true;
    }
  return false;
}

// Ops that must run and match in both 16-bit types: the storage dtypes'
// contract (every elementwise op, reduction, row kernel, shape op, product).
const std::set<std::string> kMustRun = {
    "add", "sub", "mul", "div", "maximum", "minimum", "affine", "neg", "pow", "exp", "log", "sqrt", "tanh",
    "sigmoid", "relu", "gelu", "abs", "where", "sum", "mean", "max", "softmax", "log_softmax", "layer_norm",
    "cross_entropy", "matmul", "linear", "cat", "reshape", "transpose", "permute", "slice", "expand",
    "index_select"};

bool refused_clearly(const std::string& message) {
  return message.find("threw") != std::string::npos &&
         (message.find("16-bit") != std::string::npos || message.find("bf16") != std::string::npos ||
          message.find("f16") != std::string::npos || message.find("f32 or f64") != std::string::npos);
}

}  // namespace

TEST_CASE("half registry: every case in bf16 and f16 on the CPU against f64", "[half_registry]") {
  for (DType dt : {DType::bf16, DType::f16}) {
    std::map<std::string, int> ran, matched;
    std::set<std::string> refused_ops;
    int compared = 0, refused = 0;
    std::string loose;  // f32_inside cases past the tolerance
    for (const GradcheckCase& c : gradcheck_cases()) {
      std::string why;
      if (skip_case(c, dt, &why)) continue;
      const CompareResult r = cases::compare_case(c, Device::cpu(), dt, half_tol(dt));
      if (!r.ok && r.message.find("threw") != std::string::npos) {
        INFO(c.name << " in " << dtype_name(dt) << ": " << r.message);
        // A refusal names the dtype problem; anything else thrown is a bug.
        CHECK(refused_clearly(r.message));
        CHECK(kMustRun.count(c.op) == 0);
        refused_ops.insert(c.op);
        ++refused;
        continue;
      }
      ++compared;
      ++ran[c.op];
      if (f32_inside(c)) {
        if (!r.ok) loose += c.name + " (worst " + std::to_string(r.worst) + "x) ";
        continue;
      }
      INFO(c.name << " in " << dtype_name(dt) << ", worst " << r.worst << " of allowed\n" << r.message);
      CHECK(r.ok);
      if (r.ok) ++matched[c.op];
    }
    std::string list;
    for (const std::string& op : refused_ops) list += op + " ";
    WARN(dtype_name(dt) << ": " << compared << " cases compared, " << refused
                        << " refused 16-bit inputs (ops: " << list << "); computed in f32 inside and past "
                        << "the 16-bit tolerance: " << (loose.empty() ? "none" : loose));
    for (const std::string& op : kMustRun) {
      INFO(op << " in " << dtype_name(dt));
      CHECK(ran[op] > 0);
    }
    CHECK(compared > 100);
  }
}

TEST_CASE("half registry: the products in bf16 on every accelerator against the CPU", "[half_registry][backends]") {
  // cuBLAS bf16 gemm (CUBLAS_COMPUTE_32F) and the bf16 copies: the cases whose
  // op is matmul or linear. Never run until a GPU runs it (docs/precision.md).
  std::string why;
  const std::vector<Device> devs = cases::accelerators(&why);
  if (devs.empty()) {
    WARN("no accelerator: " << why);
    return;
  }
  for (Device dev : devs) {
    int compared = 0;
    for (const GradcheckCase& c : gradcheck_cases()) {
      if (c.huge || (c.op != "matmul" && c.op != "linear")) continue;
      const CompareResult r = cases::compare_case(c, dev, DType::bf16, half_tol(DType::bf16), Device::cpu(),
                                                  DType::bf16);
      INFO(dev.str() << ": " << c.name << " in bf16, worst " << r.worst << "\n" << r.message);
      CHECK(r.ok);
      ++compared;
    }
    CHECK(compared > 5);
  }
}
