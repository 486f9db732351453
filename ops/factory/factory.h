// Factories: tensors made from sizes, values, ranges, host data, or random draws.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace tg {

// Uninitialized tensor.
Tensor empty(const Shape& sizes, TensorOptions options = {});
// Uninitialized tensor with the given strides (storage sized to fit them).
Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions options = {});
Tensor zeros(const Shape& sizes, TensorOptions options = {});
Tensor ones(const Shape& sizes, TensorOptions options = {});
Tensor full(const Shape& sizes, Scalar value, TensorOptions options = {});
// [0, end) with step 1; dtype int64 unless options say otherwise.
Tensor arange(int64_t end, TensorOptions options = {});
// [start, end) with `step`; the element count is ceil((end - start) / step).
Tensor arange(double start, double end, double step = 1, TensorOptions options = {});
// Uniform on [0, 1).
Tensor rand(const Shape& sizes, TensorOptions options = {});
// Standard normal.
Tensor randn(const Shape& sizes, TensorOptions options = {});
// Uniform integers on [low, high); dtype int64 unless options say otherwise.
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options = {});
// A tensor holding a copy of host data (row-major), checked against the sizes.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, TensorOptions options = {});
// A 1-D tensor from a list of values: tensor({1.f, 2.f, 3.f}).
template <typename T>
Tensor tensor(std::initializer_list<T> values, TensorOptions options = {}) {
  return from_vector(std::vector<T>(values), {static_cast<int64_t>(values.size())}, options);
}
// A 0-dim tensor holding `value` (dtype from the value unless given).
Tensor scalar_tensor(Scalar value, TensorOptions options);
Tensor scalar_tensor(Scalar value);

// The `_like` forms take sizes, dtype and device from `t`.
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
Tensor randint_like(const Tensor& t, int64_t low, int64_t high);

// Seeds the global Philox generator (every device draws from the same seed and offset stream).
void manual_seed(uint64_t seed);

}  // namespace tg
