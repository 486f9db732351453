// Multi-tensor launches (one grid over the chunks of many tensors, their table passed by value):
// which tensor a block works on.
#pragma once

namespace tg::cuda {

// The last of `count` tensors whose first block (first_block, ascending) is at or before `block`.
__device__ __forceinline__ int tensor_of_block(const int* first_block, int count, int block) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first_block[mid] <= block) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace tg::cuda
