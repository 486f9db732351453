// atomicAdd for every element type the scatter-style kernels accumulate into.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/half.h"

namespace tg::cuda {

// *p += v atomically (int64 through the unsigned 64-bit form, 16-bit floats through CUDA's own types).
template <typename T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else if constexpr (std::is_same_v<T, Half>) {
    atomicAdd(reinterpret_cast<__half*>(p), __ushort_as_half(v.bits));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __ushort_as_bfloat16(v.bits));
  } else {
    atomicAdd(p, v);
  }
}

}  // namespace tg::cuda
