// The CUDA launcher of var on top of the reduction engine.
#include <algorithm>

#include "ops/reduce/cuda/reduce.h"
#include "ops/reduce/cuda/reduce_access.cuh"
#include "ops/reduce/cuda/reduce_engine.cuh"
#include "ops/reduce/reduce_functors.h"

namespace tg::cuda {
namespace {

// (x - mean[o])^2, the second pass of var.
template <typename T>
struct SquaredDeviationLoad {
  const T* ptr;
  const T* means;
  __host__ __device__ T operator()(int64_t off, int64_t o, int64_t) const {
    const T d = ptr[off] - means[o];
    return d * d;
  }
};

}  // namespace

void var_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out, int64_t correction) {
  TG_DISPATCH_FLOAT_DOUBLE(x.dtype(), "var", [&] {
    const scalar_t* src = x.data_ptr<scalar_t>();
    // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2. The
    // means are mean's own engine pass (reduce_sum.cu), whose kernels this file need not compile.
    Tensor means = empty({std::max<int64_t>(1, plan.n_out)}, {.dtype = x.dtype(), .device = x.device()});
    sum_reduce_engine(x, plan, means, /*mean=*/true);
    const auto divisor = static_cast<scalar_t>(std::max<int64_t>(0, plan.n_red - correction));
    detail::reduce(plan, scalar_t(0), SquaredDeviationLoad<scalar_t>{src, means.data_ptr<scalar_t>()}, SumCombine{},
                   detail::ValueStore<scalar_t>{out.data_ptr<scalar_t>(), divisor, true}, x.device());
  });
}

}  // namespace tg::cuda
