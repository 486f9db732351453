// The table of every differentiable op, shared by the op-coverage and meta suites: each entry is a
// small function of float64 CPU inputs chosen away from the op's non-differentiable points. The
// table is compiled once, in op_cases.cpp.
#pragma once

#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace tg::testing {

// One op (or one form of an op) under test.
struct OpCase {
  std::string name;                     // the test name: letters, digits and '_'
  std::function<TensorList()> inputs;   // fresh float64 CPU inputs (index/bool inputs keep their dtype)
  TensorFn fn;
  bool twice = false;                   // its gradient depends on the inputs, so gradgradcheck applies
  double eps = 1e-6;                    // finite-difference step (larger for ops that round to float32)
  double atol = 1e-5;
  bool absolute_geometry = false;       // reads its input by absolute strides (as_strided): layout matters
  bool converts_dtype = false;          // its output dtype does not follow the inputs' dtype
};

// gtest prints parameters; the name is all that is useful.
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

namespace cases {

// Uniform float64 values in [lo, hi).
inline Tensor uniform(const Shape& s, double lo = -1.0, double hi = 1.0) {
  return random_tensor(s, kFloat64, false, lo, hi);
}
// Values in [0.5, 1.5): away from 0 for log, sqrt, division, negative powers.
inline Tensor positive(const Shape& s) { return uniform(s, 0.5, 1.5); }
// Magnitudes in [0.2, 1) with alternating signs: away from the kinks of abs, relu, sgn.
inline Tensor signed_away(const Shape& s) {
  std::vector<double> signs(static_cast<size_t>(shape_numel(s)));
  for (size_t i = 0; i < signs.size(); ++i) signs[i] = i % 2 ? -1.0 : 1.0;
  return uniform(s, 0.2, 1.0) * from_vector(signs, s);
}
inline Tensor index(std::vector<int64_t> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }
inline Tensor mask(std::vector<bool> v, const Shape& s) {
  return ne(from_vector(std::vector<int64_t>(v.begin(), v.end()), s), 0);
}

// An in-place variant runs on a non-leaf copy so that leaves requiring grad are never written.
inline Tensor fresh(const Tensor& x) { return x * 1.0; }

}  // namespace cases

// Every differentiable op of the library, with the inputs each is checked at (op_cases.cpp).
std::vector<OpCase> all_op_cases();

}  // namespace tg::testing
