// Stable (key, position) pair sorts on CUB's radix sort, kept in their own translation unit: each
// key width instantiates CUB's whole family of sorting kernels, the heaviest part of topk's build.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/device.h"

namespace tg::cuda {

// Sorts `count` (key, position) pairs by the key's bits [0, end_bit): one device-wide sort when
// `segments` is 1, else `segments` rows of n sorted each on their own. Both are stable, so equal
// keys keep their positions' order. Scratch comes from the tensor allocator. Instantiated for
// uint16_t, uint32_t and uint64_t keys.
template <typename SortKey>
void sort_pairs(const SortKey* keys_in, SortKey* keys_out, const int* pos_in, int* pos_out, int64_t count,
                int64_t segments, int64_t n, int end_bit, Device device, cudaStream_t stream);

}  // namespace tg::cuda
