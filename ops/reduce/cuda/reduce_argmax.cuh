// argmax on top of the reduction engine; reduce_argmax.cu holds its instances.
#pragma once

#include <cstdint>

#include "ops/core/dispatch_groups.h"
#include "ops/reduce/cuda/reduce.h"
#include "ops/reduce/cuda/reduce_engine.cuh"
#include "ops/reduce/reduce_functors.h"

namespace tg::cuda::detail {

// (x[offset], r): a candidate maximum and its index over the reduced elements.
template <typename T>
struct IndexedLoad {
  const T* ptr;
  __host__ __device__ IndexedValue<T> operator()(int64_t off, int64_t, int64_t r) const {
    return IndexedValue<T>{ptr[off], r};
  }
};

// out[o] = the index of the winning candidate.
template <typename T>
struct IndexStore {
  int64_t* out;
  __host__ __device__ void operator()(int64_t o, IndexedValue<T> acc) const { out[o] = acc.index; }
};

// out[o] (int64) = the reduced index of the first maximum of x (of element type T).
template <typename T>
void argmax_reduce_as(const Tensor& x, const ReducePlan& plan, Tensor& out) {
  const IndexedValue<T> init{max_identity<T>(), INT64_MAX};
  reduce(plan, init, IndexedLoad<T>{x.data_ptr<T>()}, ArgMaxCombine{}, IndexStore<T>{out.data_ptr<int64_t>()},
         x.device());
}

}  // namespace tg::cuda::detail
