// amax and amin on top of the reduction engine. Every dtype instantiates the engine's kernels and,
// where it reads raw values, CUB's device-wide reduction: reduce_amax.cu and reduce_amin.cu each
// hold one op's instances.
#pragma once

#include "ops/core/dispatch_groups.h"
#include "ops/reduce/cuda/reduce.h"
#include "ops/reduce/cuda/reduce_access.cuh"
#include "ops/reduce/cuda/reduce_device_wide.cuh"
#include "ops/reduce/reduce_functors.h"

namespace tg::cuda::detail {

// out[o] = max (kMax) or min over the reduced elements of x (of element type T), NaN propagating.
template <bool kMax, typename T>
void extremum_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out) {
  const ValueLoad<T> load{x.data_ptr<T>()};
  using acc_t = acc_type<T>;
  const ValueStore<T> store{out.data_ptr<T>(), acc_t(1), false};
  if constexpr (kMax) {
    reduce(plan, acc_t(max_identity<T>()), load, MaxCombine{}, store, x.device());
  } else {
    reduce(plan, acc_t(min_identity<T>()), load, MinCombine{}, store, x.device());
  }
}

}  // namespace tg::cuda::detail
