// The CUDA launcher of amax and its instances for every dtype (ops/reduce/cuda/reduce_extremum.cuh).
#include "ops/reduce/cuda/reduce_extremum.cuh"

namespace tg::cuda {

void amax_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out) {
  if (is_floating(x.dtype())) {
    TG_DISPATCH_FLOATING(x.dtype(), "amax", [&] { detail::extremum_reduce<true, scalar_t>(x, plan, out); });
  } else {
    TG_DISPATCH_EXACT(x.dtype(), "amax", [&] { detail::extremum_reduce<true, scalar_t>(x, plan, out); });
  }
}

}  // namespace tg::cuda
