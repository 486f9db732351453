// The CUDA side of the fused attention ops (ops/attention/flash_attention.cpp): cuDNN 9's fused
// scaled-dot-product attention, forward and backward, through cudnn-frontend graphs.
#pragma once

#include <string>

#include "ops/random/random.h"
#include "tensor/shape.h"

#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg {

// What a fused attention call computes besides its operands: the scale of q k^T, the causal mask
// (col > row masked, aligned at the top left as PyTorch's is_causal) and the dropout probability.
struct FlashAttentionParams {
  double scale = 1.0;
  bool causal = false;
  double dropout_p = 0.0;
};

// Strides of [B, H, T, D] laid out as [B, T, H, D]: the layout the fused ops write their outputs
// and gradients in, so that merging the heads back ([B, T, H*D]) is a view, not a copy.
inline Shape bshd_strides(const Shape& sizes) {
  const int64_t H = sizes[1], T = sizes[2], D = sizes[3];
  return {T * H * D, D, H * D, 1};
}

// The metadata of a [B, H, T, D] tensor laid out as [B, T, H, D] (bshd_strides).
inline TensorMeta bshd_meta(const Shape& sizes, DType dtype, Device device) {
  return {.sizes = sizes, .strides = bshd_strides(sizes), .offset = 0, .dtype = dtype, .device = device};
}

#ifdef TG_WITH_CUDA
namespace cuda {

// Whether cuDNN builds the forward (and, with `backward`, the backward) graph for these operands
// [B, H, L, D] / [B, H, S, D] / [B, H, S, Dv] and the optional additive bias [B|1, H|1, L, S];
// builds and caches them, so later calls (and graph capture) build nothing. On false, `why` says
// what cuDNN answered.
bool flash_attention_supported(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v, const TensorMeta* bias,
                               const FlashAttentionParams& p, bool backward, std::string* why);

// O [B, H, L, Dv] and the float32 logsumexp of each score row, stats [B, H, L, 1]. With dropout,
// `rng` (int64 [2] on the device: seed, offset) holds cuDNN's Philox seed and offset.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                             const FlashAttentionParams& p, const Tensor& rng, const Tensor& o, const Tensor& stats);

// dq, dk, dv from the forward's operands, its output o and stats, the output's gradient do_
// (laid out as o) and, with dropout, the forward's rng. The gradients may be laid out as o is, or be
// strided views (of one packed [B, L, 3 * H * D] buffer, say); where cuDNN does not write a layout,
// they are computed as o is laid out and copied.
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& do_,
                              const Tensor& stats, const Tensor& bias, const Tensor& rng,
                              const FlashAttentionParams& p, const Tensor& dq, const Tensor& dk, const Tensor& dv);

// Forgets the built graphs, so the next call of each shape builds again (or loads the plan from the
// on-disk cache): what a new process would do.
void clear_flash_attention_plans();

// Writes `state` (seed, offset) into rng (int64 [2] on the device) with one tiny kernel. Inside a
// CUDA graph being recorded, the kernel reads the replay's seed and offset shift instead, so every
// replay draws fresh dropout masks; `blocks` Philox blocks are noted as drawn.
void write_philox_state(const Tensor& rng, PhiloxState state, uint64_t blocks);

}  // namespace cuda
#endif

}  // namespace tg
