// Sums and maxima across the lanes of a warp by butterfly shuffles: each group of kLanes consecutive
// lanes (a power of two up to 32, the whole warp by default) reduces on its own, and every lane of a
// group gets the group's result. All 32 lanes must take part.
#pragma once

namespace tg::cuda {

// The sum of v over the lanes of this lane's group.
template <int kLanes = 32, typename T>
__device__ __forceinline__ T lanes_sum(T v) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "a power of two up to 32");
#pragma unroll
  for (int o = kLanes / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The maximum of v over the lanes of this lane's group.
template <int kLanes = 32, typename T>
__device__ __forceinline__ T lanes_max(T v) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "a power of two up to 32");
#pragma unroll
  for (int o = kLanes / 2; o > 0; o /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace tg::cuda
