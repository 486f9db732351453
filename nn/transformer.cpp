#include "nn/transformer.h"

#include "ops/unary.h"

namespace tg::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions opts,
                                                 TensorOptions options)
    : opts_(std::move(opts)) {
  TG_CHECK(opts_.activation == "relu" || opts_.activation == "gelu",
           "[TransformerEncoderLayer] activation should be relu/gelu, not ", opts_.activation);
  TG_CHECK(opts_.dim_feedforward > 0, "[TransformerEncoderLayer] dim_feedforward must be positive, got ",
           opts_.dim_feedforward);
  self_attn_ = register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, opts_.dropout,
                                                                                 opts_.bias, opts_.batch_first, options));
  linear1_ = register_module("linear1", std::make_shared<Linear>(d_model, opts_.dim_feedforward, opts_.bias, options));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(opts_.dropout));
  linear2_ = register_module("linear2", std::make_shared<Linear>(opts_.dim_feedforward, d_model, opts_.bias, options));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(Shape{d_model}, opts_.layer_norm_eps, true, opts_.bias,
                                                                options));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(Shape{d_model}, opts_.layer_norm_eps, true, opts_.bias,
                                                                options));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(opts_.dropout));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(opts_.dropout));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask, bool is_causal) {
  return dropout1_->forward(self_attn_->attend(x, x, x, mask, is_causal));
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  Tensor h = linear1_->forward(x);
  h = opts_.activation == "gelu" ? gelu(h) : relu(h);
  return dropout2_->forward(linear2_->forward(dropout_->forward(h)));
}

Tensor TransformerEncoderLayer::encode(const Tensor& src, const Tensor& src_mask, bool is_causal) {
  Tensor x = src;
  if (opts_.norm_first) {
    x = x + self_attention_block(norm1_->forward(x), src_mask, is_causal);
    return x + feed_forward_block(norm2_->forward(x));
  }
  x = norm1_->forward(x + self_attention_block(x, src_mask, is_causal));
  return norm2_->forward(x + feed_forward_block(x));
}

}  // namespace tg::nn
