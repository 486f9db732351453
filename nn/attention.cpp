#include "nn/attention.h"

#include "nn/init.h"
#include "ops/attention.h"
#include "ops/factory.h"
#include "ops/matmul.h"
#include "ops/split.h"
#include "ops/view.h"
#include "tensor/shape.h"

namespace tg::nn {

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                       bool batch_first, TensorOptions options)
    : embed_dim_(embed_dim), num_heads_(num_heads), dropout_(dropout), batch_first_(batch_first) {
  TG_CHECK(embed_dim > 0 && num_heads > 0, "[MultiheadAttention] embed_dim and num_heads must be positive, got ",
           embed_dim, " and ", num_heads);
  TG_CHECK(embed_dim % num_heads == 0, "[MultiheadAttention] embed_dim must be divisible by num_heads, got ",
           embed_dim, " and ", num_heads);
  TG_CHECK(dropout >= 0.0 && dropout < 1.0, "[MultiheadAttention] dropout must be in [0, 1), got ", dropout);
  options.dtype = options.dtype_or(kFloat32);
  options.requires_grad = false;
  Tensor w = empty({3 * embed_dim, embed_dim}, options);
  init::xavier_uniform_(w);
  in_proj_weight_ = register_parameter("in_proj_weight", w);
  if (bias) in_proj_bias_ = register_parameter("in_proj_bias", zeros({3 * embed_dim}, options));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, options));
  if (bias) init::zeros_(out_proj_->bias());
}

Tensor MultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                  const Tensor& attn_mask, bool is_causal) {
  for (const Tensor* t : {&query, &key, &value})
    TG_CHECK(t->dim() == 3 && t->size(2) == embed_dim_, "[MultiheadAttention] expected 3-D query/key/value with ",
             "last dim ", embed_dim_, " (embed_dim), got shape ", shape_str(t->sizes()));
  // Work in [N, L, E].
  const Tensor q_in = batch_first_ ? query : transpose(query, 0, 1);
  const Tensor k_in = batch_first_ ? key : transpose(key, 0, 1);
  const Tensor v_in = batch_first_ ? value : transpose(value, 0, 1);
  TG_CHECK(q_in.size(0) == k_in.size(0) && k_in.sizes() == v_in.sizes(), "[MultiheadAttention] query, key and ",
           "value must share the batch size and key/value their shape, got ", shape_str(query.sizes()), ", ",
           shape_str(key.sizes()), " and ", shape_str(value.sizes()));
  const int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1), E = embed_dim_, Hn = num_heads_;
  const TensorList w = chunk(in_proj_weight_, 3, 0);
  TensorList b = in_proj_bias_.defined() ? chunk(in_proj_bias_, 3, 0) : TensorList{Tensor(), Tensor(), Tensor()};
  auto heads = [&](const Tensor& x, int i, int64_t len) {  // [N, len, E] -> [N, Hn, len, E/Hn]
    return transpose(linear(x, w[static_cast<size_t>(i)], b[static_cast<size_t>(i)]).reshape({N, len, Hn, E / Hn}),
                     1, 2);
  };
  Tensor mask = attn_mask;
  if (mask.defined() && mask.dim() == 3) {
    TG_CHECK(mask.size(0) == N * Hn, "[MultiheadAttention] a 3-D attn_mask must be [N*num_heads, L, S] = [", N * Hn,
             ", ", L, ", ", S, "], got ", shape_str(mask.sizes()));
    mask = mask.reshape({N, Hn, mask.size(1), mask.size(2)});
  }
  const double p = is_training() ? dropout_ : 0.0;
  Tensor out = scaled_dot_product_attention(heads(q_in, 0, L), heads(k_in, 1, S), heads(v_in, 2, S), mask, p,
                                            is_causal && !mask.defined());
  out = out_proj_->forward(transpose(out, 1, 2).reshape({N, L, E}));
  return batch_first_ ? out : transpose(out, 0, 1);
}

}  // namespace tg::nn
