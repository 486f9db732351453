// The per-row steps of linear_cross_entropy between its matrix products, on a chunk of logits:
// the forward's log-sum-exp and loss, and the backward's softmax-minus-onehot rewritten in place.
// The logits are in the products' dtype (16-bit under autocast); the arithmetic is in float32 for
// 16-bit logits (float64 for float64), as cross_entropy's.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg {

// For each row r of logits [rows, V] (contiguous) with class target[r]: lse[r] = logsumexp of the
// row and loss[r] = lse[r] - logits[r, target[r]], or 0 when target[r] == ignore_index. lse and
// loss are contiguous [rows] of the accumulation dtype. A target outside [0, V) is an error (on
// CUDA: NaN, reported through the device error record); first_row numbers rows in such messages.
void linear_cross_entropy_rows_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                       int64_t first_row, const Tensor& lse, const Tensor& loss);
// In place: logits[r, c] = (exp(logits[r, c] - lse[r]) - (c == target[r])) * row_grad[r], or 0 on an
// ignored row. row_grad (accumulation dtype) holds one value per row, or a single value for all.
void linear_cross_entropy_rows_backward(const Tensor& logits, const Tensor& lse, const Tensor& target,
                                        int64_t ignore_index, int64_t first_row, const Tensor& row_grad);
// The forward's step, then the backward's on the same chunk, with the same results: on CUDA one pass
// over memory where a row fits in shared memory (for a row gradient known before the forward).
void linear_cross_entropy_rows_forward_backward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                                int64_t first_row, const Tensor& lse, const Tensor& loss,
                                                const Tensor& row_grad);

}  // namespace tg
