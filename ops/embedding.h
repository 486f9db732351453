// Embedding lookup: rows of a weight matrix selected by integer indices.
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace tg {

// weight[indices] with shape indices.sizes() + [embedding_dim]. Rows looked up at `padding_idx`
// get no gradient (as torch.nn.functional.embedding); the backward is an index_add (scatter-add).
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace tg
