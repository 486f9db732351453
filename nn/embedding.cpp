#include "nn/embedding.h"

#include <charconv>
#include <cmath>

#include "nn/init.h"
#include "ops/factory/factory.h"
#include "ops/index/embedding.h"

namespace tg::nn {
namespace {

// A double as Python's repr writes it: "1.0", "1.5", "1e-05", "inf".
std::string py_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                     TensorOptions options)
    : Embedding(num_embeddings, embedding_dim, padding_idx, std::nullopt, 2.0, options) {}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                     std::optional<double> max_norm, double norm_type, TensorOptions options)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim), padding_idx_(padding_idx), max_norm_(max_norm),
      norm_type_(norm_type) {
  TG_CHECK(num_embeddings > 0 && embedding_dim > 0,
           "[Embedding] num_embeddings and embedding_dim must be positive, got ", num_embeddings, " and ", embedding_dim);
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

Tensor Embedding::forward(const Tensor& indices) {
  return embedding(weight_, indices, padding_idx_, max_norm_, norm_type_);
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings_) + ", " + std::to_string(embedding_dim_);
  if (padding_idx_) s += ", padding_idx=" + std::to_string(*padding_idx_);
  if (max_norm_) s += ", max_norm=" + py_float(*max_norm_);
  if (norm_type_ != 2.0) s += ", norm_type=" + py_float(norm_type_);
  return s;
}

}  // namespace tg::nn
