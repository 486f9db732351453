// amin's instances for bool and the integers (ops/reduce/cuda/reduce_extremum.cuh).
#include "ops/reduce/cuda/reduce_extremum.cuh"

namespace tg::cuda::detail {

void amin_reduce_exact(const Tensor& x, const ReducePlan& plan, Tensor& out) {
  TG_DISPATCH_EXACT(x.dtype(), "amin", [&] { extremum_reduce<false, scalar_t>(x, plan, out); });
}

}  // namespace tg::cuda::detail
