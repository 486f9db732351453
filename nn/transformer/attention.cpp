// MultiheadAttention as PyTorch's F.multi_head_attention_forward: masks are made additive (a bool
// mask's true becomes -inf) and summed, then either one scaled_dot_product_attention call or, when
// the weights are wanted, the composed softmax(q k^T / sqrt(d) + mask) v that yields them.
#include "nn/transformer/attention.h"

#include <cmath>
#include <limits>

#include "nn/init.h"
#include "ops/attention/attention.h"
#include "ops/core/autocast.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/factory/factory.h"
#include "ops/index/masking.h"
#include "ops/linalg/matmul.h"
#include "ops/norm/softmax.h"
#include "ops/random/dropout.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/split.h"
#include "ops/shape/view.h"
#include "tensor/shape.h"

namespace tg::nn {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// PyTorch's _canonical_mask: a bool mask (true = masked out) as an additive mask of dtype `dtype`
// (-inf where true, 0 elsewhere); a floating mask must already have that dtype.
Tensor canonical_mask(const Tensor& mask, const Tensor& query, const char* name) {
  if (!mask.defined()) return mask;
  TG_CHECK(mask.device() == query.device(), "[MultiheadAttention] expected ", name, " on ", query.device().str(),
           " (the query's device), got ", mask.device().str());
  if (mask.dtype() == kBool) {
    return masked_fill(zeros(mask.sizes(), {.dtype = query.dtype(), .device = query.device()}), mask, kNegInf);
  }
  TG_CHECK(mask.dtype() == query.dtype(), "[MultiheadAttention] expected ", name, " to be bool or ",
           dtype_name(query.dtype()), " (the query's dtype), got ", dtype_name(mask.dtype()));
  return mask;
}

}  // namespace

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
                                  const Tensor& attn_mask, bool is_causal, const Tensor& key_padding_mask) {
  return forward(query, key, value,
                 {.key_padding_mask = key_padding_mask, .need_weights = false, .attn_mask = attn_mask,
                  .is_causal = is_causal})
      .output;
}

MultiheadAttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                     const MultiheadAttentionArgs& args) {
  TG_CHECK(query.defined() && key.defined() && value.defined(), "[MultiheadAttention] query, key and value must be ",
           "defined");
  TG_CHECK(query.dim() == 2 || query.dim() == 3, "[MultiheadAttention] expected a 3-D (batched) or 2-D (unbatched) ",
           "query, got shape ", shape_str(query.sizes()));
  const bool batched = query.dim() == 3;
  for (const Tensor* t : {&key, &value})
    TG_CHECK(t->dim() == query.dim(), "[MultiheadAttention] for a ", query.dim(), "-D query, expected ",
             query.dim(), "-D key and value, got shapes ", shape_str(key.sizes()), " and ", shape_str(value.sizes()));
  for (const Tensor* t : {&query, &key, &value})
    TG_CHECK(t->size(-1) == embed_dim_, "[MultiheadAttention] expected query/key/value with last dim ", embed_dim_,
             " (embed_dim), got shape ", shape_str(t->sizes()));
  // Work in [N, L, E]; an unbatched input is a batch of one.
  auto batch_major = [&](const Tensor& t) {
    if (!batched) return t.unsqueeze(0);
    return batch_first_ ? t : transpose(t, 0, 1);
  };
  const Tensor q_in = batch_major(query), k_in = batch_major(key), v_in = batch_major(value);
  TG_CHECK(q_in.size(0) == k_in.size(0) && k_in.sizes() == v_in.sizes(), "[MultiheadAttention] query, key and ",
           "value must share the batch size and key/value their shape, got ", shape_str(query.sizes()), ", ",
           shape_str(key.sizes()), " and ", shape_str(value.sizes()));
  const int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1), E = embed_dim_, Hn = num_heads_;

  // Masks, made additive and broadcastable to the scores [N, Hn, L, S].
  Tensor mask = canonical_mask(args.attn_mask, query, "attn_mask");
  if (mask.defined()) {
    const Shape want3 = batched ? Shape{N * Hn, L, S} : Shape{Hn, L, S};
    TG_CHECK((mask.dim() == 2 && mask.sizes() == Shape{L, S}) || (mask.dim() == 3 && mask.sizes() == want3),
             "[MultiheadAttention] expected attn_mask of shape ", shape_str({L, S}), " or ", shape_str(want3),
             ", got ", shape_str(args.attn_mask.sizes()));
    if (mask.dim() == 3) mask = mask.reshape({N, Hn, L, S});
  } else if (args.is_causal && (args.key_padding_mask.defined() || args.need_weights)) {
    const Tensor zero = scalar_tensor(0.0, {.dtype = query.dtype(), .device = query.device()});
    const Tensor neg_inf = scalar_tensor(kNegInf, {.dtype = query.dtype(), .device = query.device()});
    mask = where(triangle_mask(L, S, 0, true, query.device()), zero, neg_inf);
  }
  if (args.key_padding_mask.defined()) {
    const Shape want = batched ? Shape{N, S} : Shape{S};
    TG_CHECK(args.key_padding_mask.sizes() == want, "[MultiheadAttention] expected key_padding_mask of shape ",
             shape_str(want), ", got ", shape_str(args.key_padding_mask.sizes()));
    const Tensor kpm = canonical_mask(args.key_padding_mask, query, "key_padding_mask").reshape({N, 1, 1, S});
    mask = mask.defined() ? add(mask, kpm) : kpm;
  }
  // The causal hint is used as such only when no mask stands for it.
  const bool causal = args.is_causal && !mask.defined();

  const TensorList w = chunk(in_proj_weight_, 3, 0);
  TensorList b = in_proj_bias_.defined() ? chunk(in_proj_bias_, 3, 0) : TensorList{Tensor(), Tensor(), Tensor()};
  auto heads = [&](const Tensor& x, int i, int64_t len) {  // [N, len, E] -> [N, Hn, len, E/Hn]
    return transpose(linear(x, w[static_cast<size_t>(i)], b[static_cast<size_t>(i)]).reshape({N, len, Hn, E / Hn}),
                     1, 2);
  };
  const Tensor qh = heads(q_in, 0, L), kh = heads(k_in, 1, S), vh = heads(v_in, 2, S);
  const double p = is_training() ? dropout_ : 0.0;
  MultiheadAttentionOutput result;
  Tensor out;
  if (!args.need_weights) {
    out = scaled_dot_product_attention(qh, kh, vh, mask, p, causal);
  } else {
    // PyTorch's need_weights path: baddbmm(mask, q * sqrt(1/d), k^T), softmax, dropout, bmm. The
    // mask joins the scores in their (autocast) dtype, as baddbmm's casts do.
    Tensor scores = matmul(mul(qh, Scalar(std::sqrt(1.0 / static_cast<double>(E / Hn)))), transpose(kh, -2, -1));
    if (mask.defined()) scores = add(scores, autocast::to_low(mask));
    Tensor weights = softmax(scores, -1);
    if (p > 0.0) weights = dropout(weights, p, true);
    out = matmul(weights, vh);
    result.attn_weights = args.average_attn_weights ? mean(weights, {1}) : weights;
    if (!batched) result.attn_weights = result.attn_weights.squeeze(0);
  }
  out = out_proj_->forward(transpose(out, 1, 2).reshape({N, L, E}));
  if (!batched) out = out.squeeze(0);
  else if (!batch_first_) out = transpose(out, 0, 1);
  result.output = out;
  return result;
}

}  // namespace tg::nn
