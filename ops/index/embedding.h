// Embedding lookup: rows of a weight matrix selected by integer indices.
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace tg {

// weight[indices] with shape indices.sizes() + [embedding_dim]. Rows looked up at `padding_idx`
// get no gradient (as torch.nn.functional.embedding); the backward is an index_add (scatter-add).
// With max_norm, embedding_renorm_(weight, indices, *max_norm, norm_type) runs first: the weight is
// modified in place, as F.embedding does.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt,
                 std::optional<double> max_norm = std::nullopt, double norm_type = 2.0);

// torch.embedding_renorm_: under no_grad, every row of weight [num_embeddings, dim] that `indices`
// reference and whose norm_type-norm exceeds max_norm is scaled by max_norm / (norm + 1e-7). The
// rows are found with whole-table ops (no host synchronization, and compiled graphs functionalize
// the write like any in-place op), so a call costs O(num_embeddings * dim).
Tensor& embedding_renorm_(Tensor& weight, const Tensor& indices, double max_norm, double norm_type = 2.0);

}  // namespace tg
