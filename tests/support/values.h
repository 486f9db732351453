// Small helpers for elementwise tests: tensors from values, and value checks that handle NaN/inf.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "tapegraph.h"
#include <gtest/gtest.h>

namespace tg::testing {

inline const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A tensor of the given dtype holding `v` (converted) with sizes `s` (1-D when omitted).
inline Tensor make(std::vector<double> v, DType d = kFloat64, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return from_vector(v, s).to(d);
}

inline std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

inline void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const std::vector<double> got = vals(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i] << ", expected nan";
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], tol * (1 + std::abs(expected[i]))) << "element " << i;
    }
  }
}

// The values ((i * 7 + seed * 13) % 17 - 8) / 10 in row-major order, as `dtype`: inputs that a
// PyTorch script rebuilds exactly as
//   torch.tensor([((i * 7 + seed * 13) % 17 - 8) / 10 for i in range(n)], dtype=torch.float64)
inline Tensor pattern(const Shape& sizes, int seed, DType dtype = kFloat64) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 7 + seed * 13) % 17 - 8) / 10;
  return from_vector(v, sizes).to(dtype);
}

inline const std::vector<DType> kNumeric = {kInt32, kInt64, kFloat32, kFloat64};
inline const std::vector<DType> kAll = {kBool, kInt32, kInt64, kFloat32, kFloat64};

}  // namespace tg::testing
