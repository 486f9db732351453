// CUDA launchers for sum, mean and var on top of the reduction engine.
#include <algorithm>

#include "ops/reduce/cuda/column_sum.cuh"
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

// Sums (or means) of the columns of a row-major [rows, cols] matrix (a bias gradient) in one pass,
// where the general engine takes a partial pass and a final pass.
template <typename T>
__global__ void column_sum_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, T* __restrict__ out,
                                  acc_type<T> divisor) {
  using Acc = acc_type<T>;
  sum_block_columns<Acc>(
      rows, cols, [&](int64_t at) { return static_cast<Acc>(x[at]); },
      [&](int64_t j, Acc total) { out[j] = static_cast<T>(total / divisor); });
}

// True when `plan` sums the rows of a row-major matrix: outputs adjacent in memory, one reduced dim
// whose stride is the row length, and enough of both for the column kernel to fill the device.
bool is_column_sum(const ReducePlan& p) {
  return p.kept.ndim == 1 && p.kept.strides[0] == 1 && p.reduced.ndim == 1 && p.reduced.strides[0] == p.n_out &&
         p.n_out >= kSumColumns && p.n_red >= kSumRowGroups;
}

}  // namespace

void sum_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean) {
  TG_DISPATCH_NUMERIC(out.dtype(), mean ? "mean" : "sum", [&] {
    using acc_t = acc_type<scalar_t>;  // 16-bit floats sum in float
    if (is_floating_v<scalar_t> && is_column_sum(plan)) {
      column_sum_kernel<scalar_t><<<column_sum_blocks(plan.n_out), column_sum_threads(), 0, current_stream()>>>(
          x.data_ptr<scalar_t>(), plan.n_red, plan.n_out, out.data_ptr<scalar_t>(),
          mean ? static_cast<acc_t>(plan.n_red) : acc_t(1));
      TG_CUDA_CHECK_LAUNCH();
      return;
    }
    const detail::ValueStore<scalar_t> store{out.data_ptr<scalar_t>(), static_cast<acc_t>(plan.n_red), mean};
    detail::reduce(plan, acc_t(0), detail::ValueLoad<scalar_t>{x.data_ptr<scalar_t>()}, SumCombine{}, store,
                   x.device());
  });
}

void var_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out, int64_t correction) {
  TG_DISPATCH_FLOAT_DOUBLE(x.dtype(), "var", [&] {
    const scalar_t* src = x.data_ptr<scalar_t>();
    // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
    detail::DeviceBuffer<scalar_t> means(plan.n_out, x.device());
    detail::reduce(plan, scalar_t(0), detail::ValueLoad<scalar_t>{src}, SumCombine{},
                   detail::ValueStore<scalar_t>{means.ptr, static_cast<scalar_t>(plan.n_red), true}, x.device());
    const auto divisor = static_cast<scalar_t>(std::max<int64_t>(0, plan.n_red - correction));
    detail::reduce(plan, scalar_t(0), SquaredDeviationLoad<scalar_t>{src, means.ptr}, SumCombine{},
                   detail::ValueStore<scalar_t>{out.data_ptr<scalar_t>(), divisor, true}, x.device());
  });
}

}  // namespace tg::cuda
