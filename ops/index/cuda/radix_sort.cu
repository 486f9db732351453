// CUB's radix sort of (key, position) pairs (ops/index/cuda/radix_sort.h).
#include "ops/index/cuda/radix_sort.h"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>

#include "ops/factory/factory.h"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {
namespace {

// Start of segment s in the batch's scratch.
struct RowStart {
  int n;
  __host__ __device__ int operator()(int s) const { return s * n; }
};

// `bytes` of scratch from the tensor allocator (a private pool while recording a graph).
void* scratch_bytes(Tensor& keep, size_t bytes, Device device) {
  keep = empty({std::max<int64_t>(1, static_cast<int64_t>(bytes))}, {.dtype = kBool, .device = device});
  return keep.raw_data();
}

}  // namespace

template <typename SortKey>
void sort_pairs(const SortKey* keys_in, SortKey* keys_out, const int* pos_in, int* pos_out, int64_t count,
                int64_t segments, int64_t n, int end_bit, Device device, cudaStream_t stream) {
  Tensor temp;
  size_t bytes = 0;
  if (segments == 1) {
    TG_CUDA_CHECK(
        cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, pos_in, pos_out, count, 0, end_bit, stream));
    void* t = scratch_bytes(temp, bytes, device);
    TG_CUDA_CHECK(
        cub::DeviceRadixSort::SortPairs(t, bytes, keys_in, keys_out, pos_in, pos_out, count, 0, end_bit, stream));
    return;
  }
  auto starts = thrust::make_transform_iterator(thrust::counting_iterator<int>(0), RowStart{static_cast<int>(n)});
  const int items = static_cast<int>(count), rows = static_cast<int>(segments);
  TG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, pos_in, pos_out, items,
                                                         rows, starts, starts + 1, 0, end_bit, stream));
  void* t = scratch_bytes(temp, bytes, device);
  TG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(t, bytes, keys_in, keys_out, pos_in, pos_out, items, rows,
                                                         starts, starts + 1, 0, end_bit, stream));
}

template void sort_pairs<uint16_t>(const uint16_t*, uint16_t*, const int*, int*, int64_t, int64_t, int64_t, int, Device,
                                   cudaStream_t);
template void sort_pairs<uint32_t>(const uint32_t*, uint32_t*, const int*, int*, int64_t, int64_t, int64_t, int, Device,
                                   cudaStream_t);
template void sort_pairs<uint64_t>(const uint64_t*, uint64_t*, const int*, int*, int64_t, int64_t, int64_t, int, Device,
                                   cudaStream_t);

}  // namespace tg::cuda
