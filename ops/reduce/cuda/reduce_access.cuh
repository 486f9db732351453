// Stores shared by the CUDA reduction launchers (plugged into detail::reduce).
#pragma once

#include <cstdint>

#include "tensor/half.h"

namespace tg::cuda::detail {

// out[o] = acc, or acc / divisor when `divide` (mean, var); 16-bit outputs take a float accumulator.
template <typename T>
struct ValueStore {
  using Acc = acc_type<T>;
  T* out;
  Acc divisor;
  bool divide;
  __host__ __device__ void operator()(int64_t o, Acc acc) const { out[o] = static_cast<T>(divide ? acc / divisor : acc); }
};

}  // namespace tg::cuda::detail
