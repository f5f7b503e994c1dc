// Small helpers shared by the unit tests (header only; not a test file).
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <remora/remora.h>

namespace remora_test {

// |a - b| <= atol + rtol * |b| for every element; on failure, INFO names the
// first offending index and both values.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want,
                        double atol = 1e-5, double rtol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      INFO("index " << i << ": got " << got[i] << ", want " << want[i] << " (tol " << tol << ")");
      CHECK(std::fabs(got[i] - want[i]) <= tol);
      return;
    }
  }
  SUCCEED();
}

inline void check_close(const remora::Tensor& got, const std::vector<double>& want,
                        double atol = 1e-5, double rtol = 1e-5) {
  check_close(got.to_vector(), want, atol, rtol);
}

inline void check_close(const remora::Tensor& got, const remora::Tensor& want, double atol = 1e-5,
                        double rtol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  check_close(got.to_vector(), want.to_vector(), atol, rtol);
}

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

// A RemSpec from its head counts (SPEC §1).
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
