// Embedding: a lookup table of num_embeddings vectors of size embedding_dim.
#pragma once

#include <optional>

#include "nn/module.h"

namespace tg::nn {

// weight [num_embeddings, embedding_dim] ~ N(0, 1) as torch.nn.Embedding, the padding row zeroed.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            TensorOptions options = {});
  // With max_norm, each forward first renormalizes in place the weight rows it looks up whose
  // norm_type-norm exceeds max_norm (ops/index/embedding.h: embedding_renorm_), as PyTorch's does.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
            std::optional<double> max_norm, double norm_type = 2.0, TensorOptions options = {});

  // Integer indices of any shape -> indices.sizes() + [embedding_dim].
  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;

  Tensor& weight() { return weight_; }
  std::optional<double> max_norm() const { return max_norm_; }
  double norm_type() const { return norm_type_; }

 private:
  int64_t num_embeddings_;
  int64_t embedding_dim_;
  std::optional<int64_t> padding_idx_;
  std::optional<double> max_norm_;
  double norm_type_ = 2.0;
  Tensor weight_;
};

}  // namespace tg::nn
