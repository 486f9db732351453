// The CUDA side of the fused attention ops (ops/flash_attention.cpp): cuDNN 9's fused
// scaled-dot-product attention, forward and backward, through cudnn-frontend graphs.
#pragma once

#include <string>

#include "tensor/shape.h"

#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg {

// What a fused attention call computes besides its operands: the scale of q k^T and the causal
// mask (col > row masked, aligned at the top left as PyTorch's is_causal).
struct FlashAttentionParams {
  double scale = 1.0;
  bool causal = false;
};

// Strides of [B, H, T, D] laid out as [B, T, H, D]: the layout the fused ops write their outputs
// and gradients in, so that merging the heads back ([B, T, H*D]) is a view, not a copy.
inline Shape bshd_strides(const Shape& sizes) {
  const int64_t H = sizes[1], T = sizes[2], D = sizes[3];
  return {T * H * D, D, H * D, 1};
}

#ifdef TG_WITH_CUDA
namespace cuda {

// Whether cuDNN builds the forward (and, with `backward`, the backward) graph for these operands
// [B, H, L, D] / [B, H, S, D] / [B, H, S, Dv] and the optional additive bias [B|1, H|1, L, S];
// builds and caches them, so later calls (and graph capture) build nothing. On false, `why` says
// what cuDNN answered.
bool flash_attention_supported(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v, const TensorMeta* bias,
                               const FlashAttentionParams& p, bool backward, std::string* why);

// O [B, H, L, Dv] and the float32 logsumexp of each score row, stats [B, H, L, 1].
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                             const FlashAttentionParams& p, const Tensor& o, const Tensor& stats);

// dq, dk, dv from the forward's operands, its output o and stats, and the output's gradient do_
// (laid out as o).
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& do_,
                              const Tensor& stats, const Tensor& bias, const FlashAttentionParams& p,
                              const Tensor& dq, const Tensor& dk, const Tensor& dv);

}  // namespace cuda
#endif

}  // namespace tg
