// The reduction engine's device-wide path (ops/reduce/cuda/reduce_engine.cuh): one output over
// contiguous raw values goes to cub::DeviceReduce. Included by the files that reduce with a
// ValueLoad; the others leave CUB's device-wide headers out.
#pragma once

#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/tabulate_output_iterator.h>

#include "ops/reduce/cuda/reduce_engine.cuh"

namespace tg::cuda::detail {

// Adapts store(o, acc) to the (index, value) form of thrust's tabulate output iterator.
template <typename Store>
struct StoreAt {
  Store store;
  template <typename Acc>
  __host__ __device__ void operator()(int64_t o, Acc acc) const {
    store(o, acc);
  }
};

template <typename Input, typename Acc, typename Combine, typename Store>
void device_reduce(Input in, int64_t n, Acc init, Combine combine, Store store, Device device, cudaStream_t stream) {
  auto out = thrust::make_tabulate_output_iterator(StoreAt<Store>{store});
  size_t bytes = 0;
  TG_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, bytes, in, out, n, combine, init, stream));
  DeviceBuffer<char> temp(static_cast<int64_t>(bytes), device);
  TG_CUDA_CHECK(cub::DeviceReduce::Reduce(temp.ptr, bytes, in, out, n, combine, init, stream));
}

}  // namespace tg::cuda::detail
