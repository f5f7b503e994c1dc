// SPDX-License-Identifier: BSD-3-Clause
// Small helpers shared by the unit tests (header only; not a test file).
#pragma once
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <remora/remora.h>

namespace remora_test {

// The bits of an f32, and the f32 of some bits.
inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// How close is close enough. The default kind is elementwise:
//   |got - want| <= atol + rtol * |want|   for every element;
// Tol::scaled(rtol) compares against the tensor's scale instead:
//   max |got - want| <= atol + rtol * max |want|
// so entries that cancel to ~0 do not demand impossible digits (the nn goldens).
struct Tol {
  double atol = 1e-5;
  double rtol = 1e-5;
  bool relative_to_max = false;
  static Tol elementwise(double atol, double rtol) { return {atol, rtol, false}; }
  static Tol scaled(double rtol, double atol = 0) { return {atol, rtol, true}; }
};

// The one closeness check of the suite. On failure, INFO names `what`, the first
// offending index (or the max error and scale) and both values. NaN never passes.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, Tol tol,
                        const std::string& what = "") {
  INFO(what);
  REQUIRE(got.size() == want.size());
  if (tol.relative_to_max) {
    double err = 0, scale = 0;
    bool nan = false;
    for (size_t i = 0; i < got.size(); ++i) {
      const double e = std::fabs(got[i] - want[i]);
      nan = nan || std::isnan(e);
      err = std::max(err, e);
      scale = std::max(scale, std::fabs(want[i]));
    }
    INFO("max abs error " << err << ", max |want| " << scale << ", rtol " << tol.rtol << ", atol " << tol.atol
                          << (nan ? " (NaN present)" : ""));
    CHECK((!nan && err <= tol.atol + tol.rtol * scale));
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double t = tol.atol + tol.rtol * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= t)) {
      INFO("index " << i << ": got " << got[i] << ", want " << want[i] << " (tol " << t << ")");
      CHECK(std::fabs(got[i] - want[i]) <= t);
      return;
    }
  }
  SUCCEED();
}

inline void check_close(const remora::Tensor& got, const remora::Tensor& want, Tol tol,
                        const std::string& what = "") {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(want.defined());
  REQUIRE(remora::shape_str(got.shape()) == remora::shape_str(want.shape()));
  check_close(got.to_vector(), want.to_vector(), tol, what);
}

inline void check_close(const remora::Tensor& got, const std::vector<double>& want, Tol tol,
                        const std::string& what = "") {
  REQUIRE(got.defined());
  check_close(got.to_vector(), want, tol, what);
}

// The (atol, rtol) spelling of check_close(got, want, Tol::elementwise(atol, rtol)),
// kept for the tests written before Tol.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want,
                        double atol = 1e-5, double rtol = 1e-5) {
  check_close(got, want, Tol::elementwise(atol, rtol));
}
inline void check_close(const remora::Tensor& got, const std::vector<double>& want,
                        double atol = 1e-5, double rtol = 1e-5) {
  check_close(got, want, Tol::elementwise(atol, rtol));
}
inline void check_close(const remora::Tensor& got, const remora::Tensor& want, double atol = 1e-5,
                        double rtol = 1e-5) {
  check_close(got, want, Tol::elementwise(atol, rtol));
}

// The one golden loader: opens REMORA_TEST_DATA-relative or absolute `path`, checks
// its metadata (format, version); a missing or stale file fails with a hint to run
// the generator script.
inline remora::Safetensors open_golden(const std::string& path, const std::string& format,
                                       const std::string& version, const std::string& script) {
  const std::string hint = "; regenerate with /usr/bin/python3 " + script;
  REMORA_CHECK(std::ifstream(path).good(), format << " goldens: " << path << " is missing" << hint);
  remora::Safetensors s = remora::load_safetensors(path);
  auto get = [&](const char* k) {
    auto it = s.metadata.find(k);
    return it == s.metadata.end() ? std::string("(none)") : it->second;
  };
  REMORA_CHECK(get("format") == format && get("version") == version,
               format << " goldens: " << path << " is stale (format " << get("format")
                      << ", version " << get("version") << "; this test expects " << format
                      << " v" << version << ")" << hint);
  return s;
}

#ifdef REMORA_TEST_DATA
// REMORA_TEST_DATA/<file> through open_golden, loaded once per test run.
inline const remora::Safetensors& golden_file(const std::string& file, const std::string& format,
                                              const std::string& script, const std::string& version = "1") {
  static std::map<std::string, remora::Safetensors> cache;
  auto it = cache.find(file);
  if (it == cache.end())
    it = cache.emplace(file, open_golden(std::string(REMORA_TEST_DATA) + "/" + file, format, version, script)).first;
  return it->second;
}
#endif

// Row-major strides of a shape (for naive references over to_vector() data).
inline std::vector<int64_t> rm_strides(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// The message of the remora::Error that f() throws, or "(no error)".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const remora::Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// Matches a remora::Error whose message contains every one of `parts`.
class ErrorContains : public Catch::MatcherBase<remora::Error> {
 public:
  explicit ErrorContains(std::vector<std::string> parts) : parts_(std::move(parts)) {}
  bool match(const remora::Error& e) const override {
    seen_ = e.what();
    for (const std::string& p : parts_)
      if (seen_.find(p) == std::string::npos) return false;
    return true;
  }
  std::string describe() const override {
    std::string d = "contains all of {";
    for (size_t i = 0; i < parts_.size(); ++i) d += (i ? ", \"" : "\"") + parts_[i] + "\"";
    return d + "} (message was: \"" + seen_ + "\")";
  }

 private:
  std::vector<std::string> parts_;
  mutable std::string seen_;
};

// Runs the float64 gradient check of registered case `c` in a section named
// after it, and checks that it passes having compared at least one Jacobian entry.
inline void check_gradcheck_case(const remora::GradcheckCase& c) {
  DYNAMIC_SECTION(c.name) {
    remora::GradcheckResult r = remora::gradcheck(c);
    INFO(c.name << ": " << r.message);
    CHECK(r.ok);
    CHECK(r.entries > 0);
  }
}

// A RemSpec from its head counts (docs/math.md#recurrence-encoding-matrices-rem).
inline remora::RemSpec spec_of(int64_t reg, int64_t cyc, int64_t dreg, int64_t dcyc, std::vector<int64_t> dil,
                               bool masked, int64_t max_distance = 0) {
  remora::RemSpec s;
  s.regular = reg;
  s.cyclic = cyc;
  s.dilated_regular = dreg;
  s.dilated_cyclic = dcyc;
  s.dilations = std::move(dil);
  s.masked = masked;
  s.max_distance = max_distance;
  return s;
}

}  // namespace remora_test

// CHECK_ERROR(expr, "part", ...): expr throws remora::Error containing every part.
#define CHECK_ERROR(expr, ...) \
  CHECK_THROWS_MATCHES(expr, ::remora::Error, ::remora_test::ErrorContains({__VA_ARGS__}))
