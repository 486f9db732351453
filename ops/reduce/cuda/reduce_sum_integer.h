// sum and mean's instances for the integer dtypes (reduce_sum_integer.cu), which reduce_sum.cu's
// launcher hands them.
#pragma once

#include "ops/reduce/reduce_plan.h"
#include "tensor/tensor.h"

namespace tg::cuda::detail {

// sum_reduce (ops/reduce/cuda/reduce.h) for int32 and int64 x and out: the reduction engine.
void sum_reduce_integer(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean);

}  // namespace tg::cuda::detail
