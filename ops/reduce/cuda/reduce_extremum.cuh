// amax and amin on top of the reduction engine, instantiated by reduce_amax.cu and reduce_amin.cu
// (one file each: every dtype instantiates the engine's kernels and CUB's device-wide reduction).
#pragma once

#include "ops/reduce/cuda/reduce.h"
#include "ops/reduce/cuda/reduce_access.cuh"
#include "ops/reduce/cuda/reduce_engine.cuh"
#include "ops/reduce/reduce_functors.h"

namespace tg::cuda::detail {

// out[o] = max (kMax) or min over the reduced elements of x, NaN propagating.
template <bool kMax>
void extremum_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out) {
  TG_DISPATCH_ALL(x.dtype(), kMax ? "amax" : "amin", [&] {
    const ValueLoad<scalar_t> load{x.data_ptr<scalar_t>()};
    using acc_t = acc_type<scalar_t>;
    const ValueStore<scalar_t> store{out.data_ptr<scalar_t>(), acc_t(1), false};
    if constexpr (kMax) {
      reduce(plan, acc_t(max_identity<scalar_t>()), load, MaxCombine{}, store, x.device());
    } else {
      reduce(plan, acc_t(min_identity<scalar_t>()), load, MinCombine{}, store, x.device());
    }
  });
}

}  // namespace tg::cuda::detail
