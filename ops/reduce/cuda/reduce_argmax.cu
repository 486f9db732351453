// The CUDA launcher of argmax and its instances for every numeric dtype (ops/reduce/cuda/reduce_argmax.cuh).
#include "ops/reduce/cuda/reduce_argmax.cuh"

namespace tg::cuda {

void argmax_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out) {
  if (is_floating(x.dtype())) {
    TG_DISPATCH_FLOATING(x.dtype(), "argmax", [&] { detail::argmax_reduce_as<scalar_t>(x, plan, out); });
  } else {
    TG_DISPATCH_INTEGER(x.dtype(), "argmax", [&] { detail::argmax_reduce_as<scalar_t>(x, plan, out); });
  }
}

}  // namespace tg::cuda
