// How ops without 16-bit kernels serve float16 and bfloat16: their kernel runs on float32 copies of
// the 16-bit operands and the results are rounded back, the float computation PyTorch's kernels do
// internally for these dtypes (softmax, losses, norms, optimizer steps, ...).
#pragma once

#include "ops/core/op.h"

namespace tg {

// When an input or output of `op` is float16/bfloat16: runs op.eval on float32 copies of those
// tensors, then writes the results into `outputs` and into the inputs the op writes in place, and
// returns true. Returns false, doing nothing, when no operand is a 16-bit float.
bool eval_widened(const Op& op, const TensorList& inputs, TensorList& outputs);

}  // namespace tg
