// Stores shared by the CUDA reduction launchers (plugged into detail::reduce).
#pragma once

#include <cstdint>

namespace tg::cuda::detail {

// out[o] = acc, or acc / divisor when `divide` (mean, var).
template <typename T>
struct ValueStore {
  T* out;
  T divisor;
  bool divide;
  __host__ __device__ void operator()(int64_t o, T acc) const { out[o] = divide ? acc / divisor : acc; }
};

}  // namespace tg::cuda::detail
