// Transformer layers as PyTorch's: the same submodules, the same block order (post-norm unless
// norm_first), and masks passed through to MultiheadAttention unchanged (need_weights = false).
#include "nn/transformer/transformer.h"

#include <limits>

#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/index/masking.h"

namespace tg::nn {
namespace {

void check_options(const char* who, const TransformerEncoderLayerOptions& opts) {
  TG_CHECK(opts.activation == "relu" || opts.activation == "gelu", "[", who, "] activation should be relu/gelu, not ",
           opts.activation);
  TG_CHECK(opts.dim_feedforward > 0, "[", who, "] dim_feedforward must be positive, got ", opts.dim_feedforward);
}

std::shared_ptr<LayerNorm> make_norm(int64_t d_model, const TransformerEncoderLayerOptions& opts,
                                     const TensorOptions& options) {
  return std::make_shared<LayerNorm>(Shape{d_model}, opts.layer_norm_eps, true, opts.bias, options);
}

// Copies `from`'s parameters and buffers and training flag into `to` (a freshly built twin).
template <typename Layer>
std::shared_ptr<Layer> copy_into(std::shared_ptr<Layer> to, const Layer& from) {
  to->load_state_dict(from.state_dict());
  to->train(from.is_training());
  return to;
}

// The options a layer's parameters were made with (dtype and device of `like`).
TensorOptions options_of(const Tensor& like) { return {.dtype = like.dtype(), .device = like.device()}; }

}  // namespace

Tensor generate_square_subsequent_mask(int64_t sz, TensorOptions options) {
  options.dtype = options.dtype_or(kFloat32);
  const Tensor zero = scalar_tensor(0.0, options);
  const Tensor neg_inf = scalar_tensor(-std::numeric_limits<double>::infinity(), options);
  return where(triangle_mask(sz, sz, 0, true, options.device), zero, neg_inf);
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions opts,
                                                 TensorOptions options)
    : d_model_(d_model), nhead_(nhead), opts_(std::move(opts)), options_(options) {
  check_options("TransformerEncoderLayer", opts_);
  self_attn_ = register_module("self_attn", std::make_shared<MultiheadAttention>(
                                                d_model, nhead, opts_.dropout, opts_.bias, opts_.batch_first, options));
  linear1_ = register_module("linear1", std::make_shared<Linear>(d_model, opts_.dim_feedforward, opts_.bias, options));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(opts_.dropout));
  linear2_ = register_module("linear2", std::make_shared<Linear>(opts_.dim_feedforward, d_model, opts_.bias, options));
  norm1_ = register_module("norm1", make_norm(d_model, opts_, options));
  norm2_ = register_module("norm2", make_norm(d_model, opts_, options));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(opts_.dropout));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(opts_.dropout));
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone_layer() const {
  TensorOptions options = options_;
  if (!parameters().empty()) options = options_of(parameters().front());
  return copy_into(std::make_shared<TransformerEncoderLayer>(d_model_, nhead_, opts_, options), *this);
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask,
                                                     const Tensor& key_padding_mask, bool is_causal) {
  return dropout1_->forward(self_attn_->attend(x, x, x, mask, is_causal, key_padding_mask));
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  Tensor h = linear1_->forward(x);
  h = opts_.activation == "gelu" ? gelu(h) : relu(h);
  return dropout2_->forward(linear2_->forward(dropout_->forward(h)));
}

Tensor TransformerEncoderLayer::encode(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                                       bool is_causal) {
  Tensor x = src;
  if (opts_.norm_first) {
    x = x + self_attention_block(norm1_->forward(x), src_mask, src_key_padding_mask, is_causal);
    return x + feed_forward_block(norm2_->forward(x));
  }
  x = norm1_->forward(x + self_attention_block(x, src_mask, src_key_padding_mask, is_causal));
  return norm2_->forward(x + feed_forward_block(x));
}

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerDecoderLayerOptions opts,
                                                 TensorOptions options)
    : d_model_(d_model), nhead_(nhead), opts_(std::move(opts)), options_(options) {
  check_options("TransformerDecoderLayer", opts_);
  auto attention = [&] {
    return std::make_shared<MultiheadAttention>(d_model, nhead, opts_.dropout, opts_.bias, opts_.batch_first, options);
  };
  self_attn_ = register_module("self_attn", attention());
  multihead_attn_ = register_module("multihead_attn", attention());
  linear1_ = register_module("linear1", std::make_shared<Linear>(d_model, opts_.dim_feedforward, opts_.bias, options));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(opts_.dropout));
  linear2_ = register_module("linear2", std::make_shared<Linear>(opts_.dim_feedforward, d_model, opts_.bias, options));
  norm1_ = register_module("norm1", make_norm(d_model, opts_, options));
  norm2_ = register_module("norm2", make_norm(d_model, opts_, options));
  norm3_ = register_module("norm3", make_norm(d_model, opts_, options));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(opts_.dropout));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(opts_.dropout));
  dropout3_ = register_module("dropout3", std::make_shared<Dropout>(opts_.dropout));
}

std::shared_ptr<TransformerDecoderLayer> TransformerDecoderLayer::clone_layer() const {
  TensorOptions options = options_;
  if (!parameters().empty()) options = options_of(parameters().front());
  return copy_into(std::make_shared<TransformerDecoderLayer>(d_model_, nhead_, opts_, options), *this);
}

Tensor TransformerDecoderLayer::forward(const Tensor&) {
  TG_CHECK(false, "[TransformerDecoderLayer] needs memory: call decode(tgt, memory, masks)");
  return {};
}

Tensor TransformerDecoderLayer::feed_forward_block(const Tensor& x) {
  Tensor h = linear1_->forward(x);
  h = opts_.activation == "gelu" ? gelu(h) : relu(h);
  return dropout3_->forward(linear2_->forward(dropout_->forward(h)));
}

Tensor TransformerDecoderLayer::decode(const Tensor& tgt, const Tensor& memory, const TransformerDecoderMasks& m) {
  auto self_block = [&](const Tensor& x) {
    return dropout1_->forward(self_attn_->attend(x, x, x, m.tgt_mask, m.tgt_is_causal, m.tgt_key_padding_mask));
  };
  auto cross_block = [&](const Tensor& x) {
    return dropout2_->forward(
        multihead_attn_->attend(x, memory, memory, m.memory_mask, m.memory_is_causal, m.memory_key_padding_mask));
  };
  Tensor x = tgt;
  if (opts_.norm_first) {
    x = x + self_block(norm1_->forward(x));
    x = x + cross_block(norm2_->forward(x));
    return x + feed_forward_block(norm3_->forward(x));
  }
  x = norm1_->forward(x + self_block(x));
  x = norm2_->forward(x + cross_block(x));
  return norm3_->forward(x + feed_forward_block(x));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm) {
  TG_CHECK(num_layers > 0, "[TransformerEncoder] num_layers must be positive, got ", num_layers);
  layers_ = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers_->push_back(encoder_layer.clone_layer());
  if (norm) norm_ = register_module("norm", std::move(norm));
}

Tensor TransformerEncoder::encode(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask,
                                  bool is_causal) {
  Tensor x = src;
  for (size_t i = 0; i < layers_->size(); ++i) {
    auto& layer = static_cast<TransformerEncoderLayer&>((*layers_)[static_cast<int64_t>(i)]);
    x = layer.encode(x, mask, src_key_padding_mask, is_causal);
  }
  return norm_ ? norm_->forward(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& decoder_layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm) {
  TG_CHECK(num_layers > 0, "[TransformerDecoder] num_layers must be positive, got ", num_layers);
  layers_ = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers_->push_back(decoder_layer.clone_layer());
  if (norm) norm_ = register_module("norm", std::move(norm));
}

Tensor TransformerDecoder::forward(const Tensor&) {
  TG_CHECK(false, "[TransformerDecoder] needs memory: call decode(tgt, memory, masks)");
  return {};
}

Tensor TransformerDecoder::decode(const Tensor& tgt, const Tensor& memory, const TransformerDecoderMasks& masks) {
  Tensor x = tgt;
  for (size_t i = 0; i < layers_->size(); ++i) {
    auto& layer = static_cast<TransformerDecoderLayer&>((*layers_)[static_cast<int64_t>(i)]);
    x = layer.decode(x, memory, masks);
  }
  return norm_ ? norm_->forward(x) : x;
}

}  // namespace tg::nn
