// The CUDA launcher of amin (ops/reduce/cuda/reduce_extremum.cuh).
#include "ops/reduce/cuda/reduce_extremum.cuh"

namespace tg::cuda {

void amin_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out) { detail::extremum_reduce<false>(x, plan, out); }

}  // namespace tg::cuda
