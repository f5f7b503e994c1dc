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

}  // namespace remora_test
