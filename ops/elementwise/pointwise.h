// What one elementwise op computes, in a form a fusion can inline into a generated kernel.
#pragma once

#include <cstdint>

#include "ops/elementwise/elementwise.h"

namespace tg {

// Which functor table an elementwise op selects from (ops/elementwise/elementwise_select.h).
enum class PointwiseFamily : uint8_t {
  Unary,    // UnaryKind on one operand
  Binary,   // BinaryKind on two operands, or on one and a bound host scalar (params.side)
  Compare,  // CompareKind, bool result; also with a bound host scalar
  Where,    // cond ? a : b
  Convert,  // a cast to the result dtype (_to_copy, clone)
};

// The math of one out-of-place elementwise op: operands are converted to `compute`, the functor runs
// there, and its result is converted to the op's output dtype (as the CPU loops and CUDA launchers do).
struct PointwiseMath {
  PointwiseFamily family = PointwiseFamily::Unary;
  UnaryKind unary = UnaryKind::Neg;
  BinaryKind binary = BinaryKind::Add;
  CompareKind compare = CompareKind::Eq;
  DType compute = kFloat32;
  EwParams params;  // alpha, a bound host scalar and its side, pow's exponent, clamp's bounds
};

}  // namespace tg
