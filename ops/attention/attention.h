// Scaled dot-product attention: cuDNN's fused kernel where it applies (ops/attention/flash_attention.h), else
// composed from matmul, softmax and dropout.
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace tg {

// softmax(q k^T * scale + mask) v over q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev].
// A bool attn_mask keeps positions where it is true; a floating one is added to the scores.
// is_causal masks keys after each query (col > row); dropout_p drops attention weights.
// scale defaults to 1/sqrt(E). On CUDA, 16-bit operands run the fused kernel (no L x S scores in
// memory) whenever shapes, mask and dropout allow; SdpaKernelGuard forces either path.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

}  // namespace tg
