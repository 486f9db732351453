// sum and mean's instances for the integer dtypes (ops/reduce/cuda/reduce_sum_integer.h).
#include "ops/reduce/cuda/reduce_sum_integer.h"

#include "ops/core/dispatch_groups.h"
#include "ops/reduce/cuda/reduce_access.cuh"
#include "ops/reduce/cuda/reduce_device_wide.cuh"
#include "ops/reduce/reduce_functors.h"

namespace tg::cuda::detail {

void sum_reduce_integer(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean) {
  TG_DISPATCH_INTEGER(out.dtype(), mean ? "mean" : "sum", [&] {
    const ValueStore<scalar_t> store{out.data_ptr<scalar_t>(), static_cast<scalar_t>(plan.n_red), mean};
    reduce(plan, scalar_t(0), ValueLoad<scalar_t>{x.data_ptr<scalar_t>()}, SumCombine{}, store, x.device());
  });
}

}  // namespace tg::cuda::detail
