// The CUDA side of the memory-efficient attention ops (ops/attention/efficient_attention.cpp): tiled
// kernels for float32 and float64 that keep only a tile of scores at a time, forward and backward.
#pragma once

#include "tensor/tensor.h"

namespace tg::cuda {

// o [B, H, L, Dv] = softmax(q k^T * scale) v, key j of row i masked where j > i with `causal` (top
// left, as PyTorch's is_causal), and lse [B, H, L] (contiguous) the log-sum-exp of each row's
// scaled scores. q [B, H, L, D], k [B, H, S, D], v [B, H, S, Dv] and o have unit strides along their
// last dim; D and Dv are at most 128; L and S at least 1.
void efficient_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                 const Tensor& o, const Tensor& lse);

// dq, dk, dv (laid out as any [B, H, T, D] with unit last strides) from the forward's operands, its
// o and lse and the output's gradient dout; `delta` [B, H, L] (contiguous) is scratch for the rows'
// sums of dout * o. Deterministic: each gradient element is summed by one thread in a fixed order.
void efficient_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                  const Tensor& dout, const Tensor& lse, double scale, bool causal, const Tensor& delta,
                                  const Tensor& dq, const Tensor& dk, const Tensor& dv);

}  // namespace tg::cuda
