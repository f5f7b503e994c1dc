// SPDX-License-Identifier: BSD-3-Clause
// [backends]: every case of the gradient-check registry (ops and models,
// cases/) on every available device other than the CPU, in f32 and in
// f64, against the CPU in f64: the output and the gradient of every input
// that requires grad. An op added to the registry is backend-checked with no
// further work. Without a GPU the device tests say so in a WARN and return;
// the comparison machinery and the f32 tolerance table are proven here on
// the CPU (CPU f32 against CPU f64, and deliberately wrong results).
// Forward-only cases (GradcheckCase::differentiable false: in-place updates
// such as the fused Adam step) compare their output only. [kernel_coverage]
// proves that the cases reach every entry of every kernel table.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "../backends/backend.h"
#include "../backends/kernels.h"
#include "../cases/backend_compare.h"

using namespace remora;
using remora::cases::CompareResult;
using remora::cases::Tol;

namespace {

// ---- Tolerances -------------------------------------------------------------
// Element passes when |got - ref| <= atol * max(1, max|ref|) + rtol * |ref|,
// the reference being the CPU in f64 (so the error measured is the device's
// own). f32 rows below; f64 uses the same rows scaled by kF64Scale.
//
// default  rtol 1e-4, atol 1e-5: f32's unit roundoff is 6e-8; elementwise ops
//          land within a few ulp and short reductions (softmax rows, small
//          gemms, REM scans over tens of keys) within 1e-6 relative. 1e-4 is
//          the bound the CUDA kernels were written against ("match the CPU to
//          1e-5 relative in f32", CMakeLists.txt) with room for different
//          summation orders; atol catches entries that cancel to ~0.
// f64      every row scaled by 1e-5: f64's unit roundoff (1.1e-16) is 2e-9 of
//          f32's, so the scaled bound leaves ~500x headroom for the device's
//          own summation order and libm (exp/log/tanh within a few ulp).
// TF32     (the gemm-based cases, matmul, linear, rsa_attention*, rnn, lstm,
//          starsaber, rerun in f32 with TF32 on) rtol 1e-2, atol 5e-3:
//          TF32 rounds the operands to 10-bit mantissas (u = 2^-11 = 4.9e-4
//          each), and a k-term dot product's error grows like sqrt(k) times that
//          relative to the operands' scale (k up to 4,099 here).
//          RSA attention with TF32 on runs the tensor-core FlashAttention
//          kernels (backends/cuda/cuda_flash.cu) for D = 64 and 128 (the
//          registry's d128_*, lk4100_*, *_large, carry_long and flash_* cases)
//          and cuBLAS TF32 on the composed path otherwise. The same rule holds,
//          derived for the flash kernels (f32 accumulation, so only the
//          operand roundings count; each rounded product carries <= 2u):
//          - scores: s = scale q.k over D terms with N(0,1) data; the D
//            rounding errors have random signs, so |ds| ~ 2u scale
//            sqrt(sum q_d^2 k_d^2) ~ 2u = 1e-3 (worst case, all aligned:
//            2u scale sum|q_d k_d| ~ 2u (2/pi) sqrt(D) = 7e-3 at D = 128);
//          - softmax: dP_ij / P_ij = ds_ij - sum_k P_ik ds_ik, at most 2 max|ds|;
//          - O = P v (P and v rounded again, 2u): |dO| <= (2 max|ds| + 2u)
//            times a P-weighted mean of |v|. With random signs these errors
//            average over the row like O itself does, so relative to max|O|
//            they stay ~ 2|ds| + 2u ~ 3e-3 (typical), inside atol 5e-3;
//          - backward chains two more rounded products (dP = dO v^T, then
//            dS k, dS^T q, P^T dO), each adding ~2u relative to its operands,
//            and dS = P (dP - Di) can cancel: entries near 0 are what atol,
//            relative to the tensor's max|ref|, is for. ~3 x 2u + 2|ds| ~ 5e-3
//            typical, the same order as atol; rtol 1e-2 covers the large entries.
//          The learned-bias gradients (dS summed to the bias shape) sum
//          independent errors, which grow like sqrt(n) as the sums themselves.
// The per-op rows (keyed by case name prefix, longest match wins) and why:
struct TolRow {
  const char* prefix;
  Tol tol;
  const char* why;
};
const TolRow kTolRows[] = {
    {"", {1e-4, 1e-5}, "default (see above)"},
    // Long reductions: f32 summation error grows with the length (~sqrt(n) u
    // for blocked sums, n u for sequential ones) relative to sum|x|, which for
    // N(0,1) data is ~sqrt(n) times the result; 10^7 terms.
    {"sum/full_10M", {1e-3, 1e-4}, "10^7-term sum; the result is ~sqrt(n) smaller than sum|x|"},
    {"mean/full_10M_2d", {1e-3, 1e-4}, "10^7-term mean, as sum/full_10M"},
    {"sum/bias_shaped_dim0", {1e-3, 1e-4}, "2*10^5-term column sums of N(0,1)"},
    {"linear/many_rows_bias", {1e-3, 1e-4}, "the bias gradient sums 10^5 rows"},
    {"cross_entropy/many_rows_odd_vocab", {1e-3, 1e-4}, "mean over 7*10^4 rows"},
    {"matmul/large_k", {1e-3, 1e-4}, "4,099-term dot products with cancellation"},
    // |lambda| near 1 over 3,000 keys: the scan sums ~3,000 barely damped
    // terms; f32 loses ~log10(3000) digits of the sum to rounding.
    {"rem_apply/large_eta_long_scan", {2e-3, 2e-4}, "3,000 barely damped terms per output"},
    {"rem_matrix/large_eta_long", {1e-3, 1e-4}, "lambda^n with n up to 1,200 at |lambda| ~ 1"},
    {"rsa_attention/lk4100_memory", {1e-3, 1e-4}, "4,100-key softmax and REM scan per row"},
    {"rsa_attention_reference/lk4100_memory", {1e-3, 1e-4}, "as rsa_attention/lk4100_memory"},
    {"rsa_attention/one_row_lk1500", {1e-3, 1e-4}, "1,500-key rows"},
    {"rsa_attention_reference/one_row_lk1500", {1e-3, 1e-4}, "1,500-key rows"},
    {"mul/over_2p31_elements", {1e-3, 1e-4}, "2^21-term column sums"},
    {"sru_recurrence/long_bidirectional", {1e-3, 1e-4}, "700 recurrent steps; errors compound"},
    // The recurrent models and StarSaber chain tens of ops, and the relevancy
    // cells' screening sums decide on f32 values (margins >= 1e-3 by design).
    // bf16 autocast cases: each operand rounded to bf16 (unit roundoff 2^-9 =
    // 2e-3), so a product is off by up to ~4e-3 relative and a 24-term dot
    // product's error (random signs) ~ sqrt(24) * 2e-3 ~ 1e-2 of sum |a_i b_i|,
    // which for N(0,1) data is ~sqrt(24) times the typical result: atol
    // against max|ref|, rtol for the larger entries.
    {"matmul/bf16_autocast", {2e-2, 1e-2}, "bf16 operands (2^-9 each), 24-term dot products"},
    {"linear/bf16_autocast", {2e-2, 1e-2}, "bf16 operands (2^-9 each), 24-term dot products"},
    // The attention on bf16 operands: the CPU keeps P and dS in f32, CUDA's
    // tensor-core kernels round them to bf16 (2^-9) for their products, over
    // up to 200 keys; outputs and gradients are averages of such products.
    {"rsa_attention/bf16_autocast", {3e-2, 2e-2}, "bf16 operands; P and dS bf16 on CUDA, f32 on the CPU"},
    {"relrnn/", {1e-3, 1e-4}, "screened recurrences: many chained ops"},
    {"rellstm/", {1e-3, 1e-4}, "screened recurrences: many chained ops"},
};
constexpr double kF64Scale = 1e-5;
const Tol kTf32{1e-2, 5e-3};

const TolRow& row_for(const std::string& name) {
  const TolRow* best = &kTolRows[0];
  for (const TolRow& r : kTolRows)
    if (name.rfind(r.prefix, 0) == 0 && std::string(r.prefix).size() > std::string(best->prefix).size()) best = &r;
  return *best;
}

Tol tol_for(const GradcheckCase& c, DType dt) {
  Tol t = row_for(c.name).tol;
  if (dt == DType::f64) t = {t.rtol * kF64Scale, t.atol * kF64Scale};
  return t;
}

bool uses_gemm(const GradcheckCase& c) {
  return c.op == "matmul" || c.op == "linear" || c.op.rfind("rsa_attention", 0) == 0 || c.op == "rnn" ||
         c.op == "lstm" || c.op.rfind("starsaber", 0) == 0;
}

// REMORA_BACKENDS_FILTER: the device walks below compare only the cases whose
// name contains it (empty: every case).
std::string case_filter() {
  const char* f = std::getenv("REMORA_BACKENDS_FILTER");
  return f ? f : "";
}
bool selected(const GradcheckCase& c, const std::string& filter) {
  return filter.empty() || c.name.find(filter) != std::string::npos;
}

// A markdown table of every comparison, for tools/scripts/gpu_check.sh's report
// (REMORA_BACKENDS_REPORT=path appends to it).
void report_row(const std::string& what, const GradcheckCase& c, DType dt, const CompareResult& r) {
  const char* path = std::getenv("REMORA_BACKENDS_REPORT");
  if (!path || !*path) return;
  std::ofstream f(path, std::ios::app);
  f << "| " << what << " | " << c.name << " | " << dtype_name(dt) << " | " << (r.ok ? "ok" : "FAIL") << " | "
    << r.worst << " | " << r.elements << " |\n";
}

void expect_match(const std::string& where, const GradcheckCase& c, DType dt, const CompareResult& r) {
  INFO(where << ": " << c.name << " in " << dtype_name(dt) << " (tolerance row '" << row_for(c.name).prefix
             << "'), worst " << r.worst << " of allowed\n"
             << r.message);
  CHECK(r.ok);
  CHECK(r.tensors > 0);
}

}  // namespace

// -----------------------------------------------------------------------------
// The harness, proven on the CPU (runs everywhere).

TEST_CASE("backends: CPU f32 matches CPU f64 on every case under the f32 tolerance table", "[backends]") {
  int compared = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.huge) continue;
    const CompareResult r = cases::compare_case(c, Device::cpu(), DType::f32, tol_for(c, DType::f32));
    report_row("cpu", c, DType::f32, r);
    expect_match("cpu", c, DType::f32, r);
    ++compared;
  }
  CHECK(compared > 100);
}

TEST_CASE("backends: the comparison finds wrong outputs, wrong gradients, NaN and throws", "[backends]") {
  GradcheckCase mm;
  for (const GradcheckCase& c : gradcheck_cases())
    if (c.name == "matmul/2d") mm = c;
  REQUIRE(mm.make);
  const Tol tol{1e-4, 1e-5};
  SECTION("identical instances match exactly") {
    CompareResult r = cases::compare_instances(mm.make(Device::cpu(), DType::f64), mm.make(Device::cpu(), DType::f64), tol);
    CHECK(r.ok);
    CHECK(r.worst == 0);
    CHECK(r.tensors == 3);  // output, two gradients
    CHECK(r.elements == 15 + 12 + 20);
  }
  SECTION("an output off by 1e-3 relative") {
    CaseInstance bad = mm.make(Device::cpu(), DType::f32);
    GradFn f = bad.fn;
    bad.fn = [f](const std::vector<Tensor>& x) { return f(x) * 1.001; };
    CompareResult r = cases::compare_instances(mm.make(Device::cpu(), DType::f64), bad, tol);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::Contains("output"));
  }
  SECTION("one gradient element wrong, the output right") {
    CaseInstance bad = mm.make(Device::cpu(), DType::f32);
    bad.fn = [](const std::vector<Tensor>& x) {
      Tensor y = matmul(x[0], x[1]);
      Tensor a = x[0].detach();
      // Adds zeros whose backward puts 0.5 into element (1, 2) of x[0]'s gradient.
      return add(y, record("leaky_zero", {x[0]}, (x[0].detach() * 0.0).sum({1}, true),
                           [a](std::vector<Tensor>& g) {
                             Tensor d = Tensor::zeros(a.shape(), a.dtype());
                             d.select(0, 1).select(0, 2).fill_(0.5);
                             return std::vector<Tensor>{d};
                           }));
    };
    CompareResult r = cases::compare_instances(mm.make(Device::cpu(), DType::f64), bad, tol);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::Contains("gradient of input 0") && Catch::Contains("[6]"));
    CHECK_THAT(r.message, !Catch::Contains("output"));
  }
  SECTION("NaN where the reference is finite; the same NaN passes") {
    CaseInstance bad = mm.make(Device::cpu(), DType::f32);
    bad.fn = [](const std::vector<Tensor>& x) { return log(matmul(x[0], x[1])); };
    CaseInstance ref = mm.make(Device::cpu(), DType::f64);
    CompareResult r = cases::compare_instances(ref, bad, tol);
    CHECK_FALSE(r.ok);
    ref.fn = bad.fn;
    ref = CaseInstance{mm.make(Device::cpu(), DType::f64).inputs, bad.fn};
    CHECK(cases::compare_instances(ref, bad, {1e-4, 1e-5}).ok);  // NaN at the same places
  }
  SECTION("a throw is a failure that says what threw") {
    CaseInstance bad = mm.make(Device::cpu(), DType::f32);
    bad.fn = [](const std::vector<Tensor>& x) { return matmul(x[1], x[1]); };
    CompareResult r = cases::compare_instances(mm.make(Device::cpu(), DType::f64), bad, tol);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::Contains("threw"));
  }
  SECTION("a different shape") {
    CaseInstance bad = mm.make(Device::cpu(), DType::f32);
    bad.fn = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]).t(); };
    CHECK_FALSE(cases::compare_instances(mm.make(Device::cpu(), DType::f64), bad, tol).ok);
  }
}

TEST_CASE("backends: the tolerance table resolves by longest prefix", "[backends]") {
  CHECK(std::string(row_for("sum/full_10M").prefix) == "sum/full_10M");
  CHECK(std::string(row_for("sum/all").prefix).empty());
  CHECK(std::string(row_for("relrnn/nu2_rho2_T7").prefix) == "relrnn/");
  for (const TolRow& r : kTolRows) {
    INFO("tolerance row '" << r.prefix << "'");
    CHECK(std::string(r.why).size() > 5);  // every row says why
    bool used = std::string(r.prefix).empty();
    for (const GradcheckCase& c : gradcheck_cases()) used = used || c.name.rfind(r.prefix, 0) == 0;
    CHECK(used);  // and applies to a case (a renamed case leaves no stale row)
  }
}

// -----------------------------------------------------------------------------
// Every entry of every kernel table (backends/kernels.h, REMORA_KERNEL_TABLES)
// is reached by a registry case, so the device walk below compares every
// device's table with the CPU's. Proven by instrumenting the CPU: each entry
// of each CPU table is replaced by a shim that counts its calls and forwards
// to the original, then the registry's cases run on the CPU (forward, and
// backward where differentiable) until every entry has been called.

namespace {

struct KernelEntry {
  std::string name;  // "RemKernels::scan"
  const int64_t* calls;
  bool present;      // non-null in the CPU table
};

// The counting shim of one table entry (a pointer to a function-pointer member).
template <auto Field>
struct CountingShim;
template <class K, class R, class... A, R (*K::*Field)(A...)>
struct CountingShim<Field> {
  static inline const K* original = nullptr;
  static inline int64_t calls = 0;
  static R call(A... a) {
    ++calls;
    return (original->*Field)(a...);
  }
};

template <auto Field, class K>
KernelEntry hook(const char* name, K& table, const K* original) {
  using S = CountingShim<Field>;
  S::original = original;
  S::calls = 0;
  const bool present = original->*Field != nullptr;
  if (present) table.*Field = &S::call;
  return {name, &S::calls, present};
}

// Every entry of each table, by name. A table added to REMORA_KERNEL_TABLES
// without a specialization here does not compile; an entry added to a table
// without a line here fails the size check in CpuTableHook.
template <class K>
struct TableEntries;
#define REMORA_HOOK(K, f) hook<&K::f>(#K "::" #f, t, o)
template <>
struct TableEntries<RemKernels> {
  static constexpr size_t kCount = 4;
  static std::vector<KernelEntry> hook_all(RemKernels& t, const RemKernels* o) {
    return {REMORA_HOOK(RemKernels, matrix), REMORA_HOOK(RemKernels, matrix_backward),
            REMORA_HOOK(RemKernels, scan), REMORA_HOOK(RemKernels, scan_backward)};
  }
};
template <>
struct TableEntries<SruKernels> {
  static constexpr size_t kCount = 2;
  static std::vector<KernelEntry> hook_all(SruKernels& t, const SruKernels* o) {
    return {REMORA_HOOK(SruKernels, forward), REMORA_HOOK(SruKernels, backward)};
  }
};
template <>
struct TableEntries<RsaKernels> {
  static constexpr size_t kCount = 3;
  static std::vector<KernelEntry> hook_all(RsaKernels& t, const RsaKernels* o) {
    return {REMORA_HOOK(RsaKernels, forward), REMORA_HOOK(RsaKernels, backward),
            REMORA_HOOK(RsaKernels, tensor_core_launches)};
  }
};
template <>
struct TableEntries<RelShiftKernels> {
  static constexpr size_t kCount = 2;
  static std::vector<KernelEntry> hook_all(RelShiftKernels& t, const RelShiftKernels* o) {
    return {REMORA_HOOK(RelShiftKernels, forward), REMORA_HOOK(RelShiftKernels, backward)};
  }
};
template <>
struct TableEntries<OptimKernels> {
  static constexpr size_t kCount = 1;
  static std::vector<KernelEntry> hook_all(OptimKernels& t, const OptimKernels* o) {
    return {REMORA_HOOK(OptimKernels, adam)};
  }
};
#undef REMORA_HOOK

// Entries a CPU table may leave null, and why (the test checks nothing else is).
const std::map<std::string, std::string> kNullOnCpu = {
    {"RsaKernels::tensor_core_launches", "a count of tensor-core launches; the CPU has none"},
};

// Puts the instrumented copy of the CPU's table K in the registry for its
// lifetime (the original back on destruction).
template <class K>
class CpuTableHook {
 public:
  explicit CpuTableHook(std::vector<KernelEntry>& entries)
      : original_(detail::kernel_slot<K>(DeviceType::cpu)) {
    static_assert(sizeof(K) == TableEntries<K>::kCount * sizeof(void (*)()),
                  "a kernel table gained an entry: name it in TableEntries");
    if (!original_) {
      entries.push_back({std::string(K::kFeature) + " (no CPU table)", nullptr, false});
      return;
    }
    table_ = *original_;
    for (KernelEntry& e : TableEntries<K>::hook_all(table_, original_)) entries.push_back(e);
    detail::kernel_slot<K>(DeviceType::cpu) = &table_;
  }
  ~CpuTableHook() {
    if (original_) detail::kernel_slot<K>(DeviceType::cpu) = original_;
  }
  CpuTableHook(const CpuTableHook&) = delete;
  CpuTableHook& operator=(const CpuTableHook&) = delete;

 private:
  const K* original_;
  K table_{};
};

}  // namespace

TEST_CASE("backends: devices and kernel tables are registered per DeviceType, not in fixed slots",
          "[backends]") {
  // A device type no library registers: the registry has room for it, and a
  // factory registered for it serves backend() as the CPU's does.
  const DeviceType other = static_cast<DeviceType>(kMaxDeviceTypes - 1);
  backend(Device::cpu());  // the host is registered by the first lookup
  const DeviceFactory host = device_factory(DeviceType::cpu);
  REQUIRE(host != nullptr);
  REQUIRE(device_factory(other) == nullptr);
  CHECK_THROWS_WITH(backend(Device{other, 0}), Catch::Contains("no backend is registered"));
  register_device(other, host);
  CHECK(&backend(Device{other, 0}) == &backend(Device::cpu()));
  register_device(other, nullptr);
  CHECK(device_factory(other) == nullptr);
  CHECK(detail::kernel_slot<RemKernels>(other) == nullptr);
  CHECK_THROWS_WITH(register_device(static_cast<DeviceType>(kMaxDeviceTypes), host),
                    Catch::Contains("beyond"));
}

TEST_CASE("backends: every entry of every kernel table is reached by a registry case", "[backends][kernel_coverage]") {
  std::vector<KernelEntry> entries;
  {
#define REMORA_HOOK_TABLE(K) CpuTableHook<K> hook_##K(entries);
    REMORA_KERNEL_TABLES(REMORA_HOOK_TABLE)
#undef REMORA_HOOK_TABLE
    const auto all_reached = [&] {
      for (const KernelEntry& e : entries)
        if (e.present && *e.calls == 0) return false;
      return true;
    };
    for (const GradcheckCase& c : gradcheck_cases()) {
      if (all_reached()) break;
      if (c.huge) continue;
      INFO("case " << c.name);
      CaseInstance inst = c.make(Device::cpu(), DType::f32);
      const Tensor out = inst.fn(inst.inputs);
      if (out.requires_grad()) out.backward(Tensor::ones(out.shape(), out.dtype(), out.device()));
    }
  }
  REQUIRE(entries.size() >= 12);
  for (const KernelEntry& e : entries) {
    INFO(e.name);
    if (!e.present) {
      INFO("null in the CPU table: implement it on the CPU (the reference), or list it in kNullOnCpu");
      CHECK(kNullOnCpu.count(e.name) == 1);
      continue;
    }
    INFO("no registry case calls this kernel on the CPU, so no device's version is compared with it: add a "
         "case in cases/ that reaches it");
    CHECK(*e.calls > 0);
  }
}

TEST_CASE("backends: on the CPU the fused RSA attention matches its composed reference on every case",
          "[backends][rsa]") {
  // Each rsa_attention/<v> case against rsa_attention_reference/<v>, in f64, on
  // the reference case's inputs: the output and every gradient. (The device
  // comparisons above check each path against the CPU; this ties the two CPU
  // paths together, including the mask edges the flash kernels skip blocks on.)
  std::map<std::string, const GradcheckCase*> reference;
  for (const GradcheckCase& c : gradcheck_cases())
    if (c.op == "rsa_attention_reference") reference[c.name.substr(c.name.find('/') + 1)] = &c;
  int compared = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.op != "rsa_attention" || c.huge) continue;
    const auto it = reference.find(c.name.substr(c.name.find('/') + 1));
    if (it == reference.end()) continue;
    const GradcheckCase& r = *it->second;
    const CaseInstance want = r.make(Device::cpu(), DType::f64);
    const CaseInstance got{r.make(Device::cpu(), DType::f64).inputs, c.make(Device::cpu(), DType::f64).fn};
    const CompareResult res = cases::compare_instances(want, got, tol_for(c, DType::f64));
    INFO(c.name << " against " << r.name << ": worst " << res.worst << " of allowed\n" << res.message);
    CHECK(res.ok);
    CHECK(res.tensors > 0);
    ++compared;
  }
  CHECK(compared >= 20);
}

// -----------------------------------------------------------------------------
// On every device (skipped with a WARN without one).

TEST_CASE("backends: every registry case matches the CPU on every device, in f32 and f64", "[backends][cuda]") {
  std::string why;
  const std::vector<Device> devs = cases::accelerators(&why);
  if (devs.empty()) {
    WARN("skipped: no device other than the CPU: " << why);
    return;
  }
  // REMORA_BACKENDS_SKIP_LARGE=1: only the small, Jacobian-sized cases;
  // REMORA_BACKENDS_FILTER=text: only the cases whose name contains text
  // (tools/scripts/gpu_check.sh --sanitize runs the flash_ cases under compute-sanitizer).
  const char* small_env = std::getenv("REMORA_BACKENDS_SKIP_LARGE");
  const bool small_only = small_env && std::string(small_env) == "1";
  const std::string filter = case_filter();
  const bool tf32 = cuda_tf32();
  set_cuda_tf32(false);
  for (Device dev : devs) {
    int compared = 0, failed = 0;
    for (const GradcheckCase& c : gradcheck_cases()) {
      if (c.huge || (small_only && c.backend_only) || !selected(c, filter)) continue;
      for (DType dt : {DType::f32, DType::f64}) {
        const CompareResult r = cases::compare_case(c, dev, dt, tol_for(c, dt));
        report_row(dev.str(), c, dt, r);
        expect_match(dev.str(), c, dt, r);
        ++compared;
        failed += !r.ok;
      }
    }
    const std::string which = filter.empty() ? "" : " (cases matching '" + filter + "')";
    std::printf("backends: %s: %d comparisons, %d failed%s%s\n", dev.str().c_str(), compared, failed,
                small_only ? " (small cases only)" : "", which.c_str());
    CHECK(compared > (filter.empty() ? 200 : 0));
  }
  set_cuda_tf32(tf32);
}

TEST_CASE("backends: gemm-based cases with TF32 on", "[backends][cuda]") {
  std::string why;
  const std::vector<Device> devs = cases::accelerators(&why);
  if (devs.empty()) {
    WARN("skipped: no device other than the CPU: " << why);
    return;
  }
  const bool tf32 = cuda_tf32();
  set_cuda_tf32(true);
  const bool small_only = std::getenv("REMORA_BACKENDS_SKIP_LARGE") != nullptr;
  const std::string filter = case_filter();
  for (Device dev : devs) {
    // The tensor-core RSA kernels must have run for the D = 64 / 128 cases
    // (not a silent fallback to the FP32 reference kernels).
    const RsaKernels* rk = detail::kernel_slot<RsaKernels>(dev.type) ? &kernels<RsaKernels>(dev) : nullptr;
    const bool counts = rk && rk->tensor_core_launches;
    const int64_t before = counts ? rk->tensor_core_launches() : 0;
    for (const GradcheckCase& c : gradcheck_cases()) {
      if (c.huge || !uses_gemm(c) || (small_only && c.backend_only) || !selected(c, filter)) continue;
      // bf16 autocast cases already run at bf16 (TF32 on their own): their rows above.
      if (c.name.find("bf16_autocast") != std::string::npos) continue;
      const CompareResult r = cases::compare_case(c, dev, DType::f32, kTf32);
      report_row(dev.str() + " tf32", c, DType::f32, r);
      expect_match(dev.str() + " tf32", c, DType::f32, r);
      // f64 never uses TF32: still exact to the f64 table.
      if (c.op == "matmul") expect_match(dev.str() + " tf32", c, DType::f64,
                                         cases::compare_case(c, dev, DType::f64, tol_for(c, DType::f64)));
    }
    if (counts) {
      const int64_t ran = rk->tensor_core_launches() - before;
      std::printf("backends: %s tf32: %lld tensor-core RSA attention launches\n", dev.str().c_str(),
                  (long long)ran);
      // The D = 64 / 128 attention cases are backend-only (skipped with SKIP_LARGE).
      if (!small_only) CHECK(ran > 0);
    }
  }
  set_cuda_tf32(tf32);
}

TEST_CASE("backends: tensors over 2^31 elements (int64 indexing)", "[backends][cuda][huge]") {
  std::string why;
  const std::vector<Device> devs = cases::accelerators(&why);
  if (devs.empty()) {
    WARN("skipped: no device other than the CPU: " << why);
    return;
  }
  for (Device dev : devs)
    for (const GradcheckCase& c : gradcheck_cases()) {
      if (!c.huge) continue;
      CompareResult r;
      try {
        r = cases::compare_case(c, dev, DType::f32, tol_for(c, DType::f32));
      } catch (const std::exception& e) {
        WARN("skipped " << c.name << " on " << dev.str() << ": " << e.what());
        continue;
      }
      // Memory-aware: a device (or host) that cannot hold it skips, saying so.
      if (!r.ok && (r.message.find("out of memory") != std::string::npos ||
                    r.message.find("bad_alloc") != std::string::npos)) {
        WARN("skipped " << c.name << " on " << dev.str() << " (memory): " << r.message);
        continue;
      }
      report_row(dev.str(), c, DType::f32, r);
      expect_match(dev.str(), c, DType::f32, r);
    }
}
