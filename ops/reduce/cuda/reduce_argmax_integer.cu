// argmax's instances for the integer dtypes (ops/reduce/cuda/reduce_argmax.cuh).
#include "ops/reduce/cuda/reduce_argmax.cuh"

namespace tg::cuda::detail {

void argmax_reduce_integer(const Tensor& x, const ReducePlan& plan, Tensor& out) {
  TG_DISPATCH_INTEGER(x.dtype(), "argmax", [&] { argmax_reduce_as<scalar_t>(x, plan, out); });
}

}  // namespace tg::cuda::detail
