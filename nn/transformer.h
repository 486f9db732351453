// TransformerEncoderLayer: self-attention and a feed-forward block, each with residual, dropout and LayerNorm.
#pragma once

#include <memory>
#include <string>

#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/linear.h"
#include "nn/norm.h"

namespace tg::nn {

// Constructor options of torch.nn.TransformerEncoderLayer (besides d_model and nhead).
struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};

// torch.nn.TransformerEncoderLayer with its submodule names (self_attn, linear1, dropout, linear2,
// norm1, norm2, dropout1, dropout2); post-norm unless norm_first.
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions opts = {},
                          TensorOptions options = {});

  // src [S, N, E] ([N, S, E] when batch_first); src_mask as MultiheadAttention's attn_mask.
  Tensor encode(const Tensor& src, const Tensor& src_mask = Tensor(), bool is_causal = false);
  Tensor forward(const Tensor& src) override { return encode(src); }
  std::string type_name() const override { return "TransformerEncoderLayer"; }

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, bool is_causal);
  Tensor feed_forward_block(const Tensor& x);

  TransformerEncoderLayerOptions opts_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
};

}  // namespace tg::nn
