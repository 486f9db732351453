#include "nn/embedding.h"

#include "nn/init.h"
#include "ops/embedding.h"
#include "ops/factory.h"

namespace tg::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                     TensorOptions options)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim), padding_idx_(padding_idx) {
  TG_CHECK(num_embeddings > 0 && embedding_dim > 0, "[Embedding] num_embeddings and embedding_dim must be positive, got ",
           num_embeddings, " and ", embedding_dim);
  if (padding_idx_) {
    TG_CHECK(*padding_idx_ < num_embeddings && *padding_idx_ >= -num_embeddings, "[Embedding] padding_idx ",
             *padding_idx_, " must be within num_embeddings (", num_embeddings, ")");
    if (*padding_idx_ < 0) *padding_idx_ += num_embeddings;
  }
  options.dtype = options.dtype_or(kFloat32);
  options.requires_grad = false;
  Tensor w = empty({num_embeddings, embedding_dim}, options);
  init::normal_(w);
  if (padding_idx_) w.select(0, *padding_idx_).fill_(0);
  weight_ = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight_, indices, padding_idx_); }

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings_) + ", " + std::to_string(embedding_dim_);
  if (padding_idx_) s += ", padding_idx=" + std::to_string(*padding_idx_);
  return s;
}

}  // namespace tg::nn
