// Scalar arguments of compiled functions that are not guarded by value (PyTorch's analogue: passing
// a 0-dim tensor, or torch._dynamo.mark_dynamic): a new value reuses the compiled graph.
#pragma once

#include <optional>
#include <type_traits>

#include "tensor/tensor.h"

namespace tg {

// A number passed to a compiled function as a 0-dim CPU tensor, a graph input, instead of a host
// value baked into the trace and guarded by value. The traced function takes it as a Tensor
// parameter; the graph is guarded on its dtype and shape (as any tensor input), never on its value.
// It converts to that Tensor too, so the uncompiled function takes the same call.
struct DynamicScalar {
  double value = 0.0;
  DType dtype = kFloat64;
  // The 0-dim CPU tensor holding value (made anew on every call).
  Tensor tensor() const;
  operator Tensor() const { return tensor(); }
};

// Declares `value` dynamic: float64 for floating-point numbers, int64 for integers (exact up to
// 2^53, as the value is held as a double), bool for bools (or `dtype` when given), e.g. f(x, tg::dynamic(alpha)) with f compiled from
// [](const Tensor& x, const Tensor& alpha) { return x * alpha; }.
template <typename T>
  requires std::is_arithmetic_v<T>
DynamicScalar dynamic(T value, std::optional<DType> dtype = std::nullopt) {
  const DType natural = std::is_same_v<T, bool> ? kBool : std::is_integral_v<T> ? kInt64 : kFloat64;
  return DynamicScalar{static_cast<double>(value), dtype.value_or(natural)};
}

}  // namespace tg
