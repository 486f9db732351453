// Memory-efficient attention for float32 and float64 on CUDA: what scaled_dot_product_attention runs
// there instead of the composed path when nothing but causality masks the scores (PyTorch's
// efficient-attention kernel plays this part for float32). Nothing of size L x S is allocated,
// forward or backward; the saved state is O and the log-sum-exp of each score row.
#pragma once

#include <optional>
#include <string>

#include "tensor/tensor.h"

namespace tg {

// Why the memory-efficient kernels cannot take scaled_dot_product_attention's operands, or an empty
// string when they can: CUDA float32 or float64 q/k/v of 3 or 4 dims sharing their leading dims,
// non-empty, head dims up to 128, no mask and no dropout.
std::string efficient_attention_blocker(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                        double dropout_p);

// scaled_dot_product_attention on the memory-efficient kernels when they take the operands: always
// under SdpaKernel::kFused, under kAuto for heads of at least 256 x 256 scores (smaller ones compose
// faster), never under kComposed. nullopt means "another path".
std::optional<Tensor> memory_efficient_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& attn_mask, double dropout_p, bool is_causal,
                                                 double scale);

// The op itself: q [B, H, L, D], k [B, H, S, D], v [B, H, S, Dv] (float32 or float64, CUDA) to
// O [B, H, L, Dv] (laid out as [B, L, H, Dv], so merging the heads is a view); causal masks key j
// of row i where j > i.
Tensor efficient_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool is_causal);

}  // namespace tg
