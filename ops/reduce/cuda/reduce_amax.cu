// The CUDA launcher of amax (ops/reduce/cuda/reduce_extremum.cuh).
#include "ops/reduce/cuda/reduce_extremum.cuh"

namespace tg::cuda {

void amax_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out) { detail::extremum_reduce<true>(x, plan, out); }

}  // namespace tg::cuda
