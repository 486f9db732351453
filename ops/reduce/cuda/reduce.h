// CUDA launchers for the reductions (CUB device-wide and segmented reductions plus strided kernels).
// Inputs may be strided; outputs are contiguous and already allocated on the same device.
#pragma once

#include <cstdint>

#include "ops/reduce/reduce_plan.h"
#include "tensor/tensor.h"

namespace tg::cuda {

// out[o] = sum (mean when `mean`) over the plan's reduced elements of x; x and out share a dtype.
void sum_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean);
// sum_reduce of a floating dtype through the general engine alone (never the column-sum kernel),
// for callers whose sums must add in the engine's order whatever the layout: softmax and var.
void sum_reduce_engine(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean);
// out[o] = max over the reduced elements, NaN propagating (reduce_amax.cu).
void amax_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out);
// out[o] = min over the reduced elements, NaN propagating (reduce_amin.cu).
void amin_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out);
// amax_reduce or amin_reduce.
inline void minmax_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out, bool is_max) {
  if (is_max) {
    amax_reduce(x, plan, out);
  } else {
    amin_reduce(x, plan, out);
  }
}
// out[o] (int64) = the reduced index of the first maximum; the plan must be in logical order
// (reduce_argmax.cu).
void argmax_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out);
// out[o] = sum of squared deviations from the mean over the reduced elements / max(0, n - correction).
void var_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out, int64_t correction);

}  // namespace tg::cuda
