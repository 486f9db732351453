// CUDA kernels of linear_cross_entropy's per-row steps (see ops/loss/linear_cross_entropy_rows.h): one
// block per row for the log-sum-exp (a single pass with a running maximum), one thread per element
// for the gradient, or both in one block per row where the row fits in shared memory.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg::cuda {

// lse and loss of each row of logits; bad targets give NaN and a device error record.
void linear_cross_entropy_rows_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                       int64_t first_row, const Tensor& lse, const Tensor& loss);
// The softmax-minus-onehot of each row times its gradient, written over the logits.
void linear_cross_entropy_rows_backward(const Tensor& logits, const Tensor& lse, const Tensor& target,
                                        int64_t ignore_index, int64_t first_row, const Tensor& row_grad);
// Both steps in one pass over memory (each row kept in shared memory between them), with the same
// results: false (nothing queued) where a row does not fit twice per SM, its start is not 16-byte
// aligned, or the dtype is not float32, bfloat16 or float16.
bool linear_cross_entropy_rows_fused(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                     int64_t first_row, const Tensor& lse, const Tensor& loss, const Tensor& row_grad);
// out = unit * grad (grad a 0-dim tensor of unit's dtype on the device), converted to out's dtype
// in the same pass: unit float32 with out float32, bfloat16 or float16, or both float64. Contiguous.
// False (nothing queued) for other dtypes.
bool scale_gradient(const Tensor& unit, const Tensor& grad, const Tensor& out);

}  // namespace tg::cuda
