// The CUDA launcher of argmax on top of the reduction engine.
#include <cstdint>

#include "ops/reduce/cuda/reduce.h"
#include "ops/reduce/cuda/reduce_access.cuh"
#include "ops/reduce/cuda/reduce_engine.cuh"
#include "ops/reduce/reduce_functors.h"

namespace tg::cuda {
namespace {

// (x[offset], r): a candidate maximum and its index over the reduced elements.
template <typename T>
struct IndexedLoad {
  const T* ptr;
  __host__ __device__ IndexedValue<T> operator()(int64_t off, int64_t, int64_t r) const {
    return IndexedValue<T>{ptr[off], r};
  }
};

template <typename T>
struct IndexStore {
  int64_t* out;
  __host__ __device__ void operator()(int64_t o, IndexedValue<T> acc) const { out[o] = acc.index; }
};

}  // namespace

void argmax_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out) {
  TG_DISPATCH_NUMERIC(x.dtype(), "argmax", [&] {
    const IndexedValue<scalar_t> init{max_identity<scalar_t>(), INT64_MAX};
    detail::reduce(plan, init, IndexedLoad<scalar_t>{x.data_ptr<scalar_t>()}, ArgMaxCombine{},
                   IndexStore<scalar_t>{out.data_ptr<int64_t>()}, x.device());
  });
}

}  // namespace tg::cuda
