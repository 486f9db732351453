// Transformer layers and stacks (torch.nn.TransformerEncoderLayer, TransformerDecoderLayer,
// TransformerEncoder, TransformerDecoder): attention and feed-forward blocks, each with residual,
// dropout and LayerNorm. Masks follow MultiheadAttention's: bool true = not attended, float added.
#pragma once

#include <memory>
#include <string>

#include "nn/activation.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/transformer/attention.h"

namespace tg::nn {

// Constructor options of torch.nn.TransformerEncoderLayer / TransformerDecoderLayer (besides d_model and nhead).
struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};
using TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

// torch.nn.Transformer.generate_square_subsequent_mask: [sz, sz] float, -inf above the diagonal, 0 elsewhere.
Tensor generate_square_subsequent_mask(int64_t sz, TensorOptions options = {});

// torch.nn.TransformerEncoderLayer with its submodule names (self_attn, linear1, dropout, linear2,
// norm1, norm2, dropout1, dropout2); post-norm unless norm_first.
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions opts = {},
                          TensorOptions options = {});

  // PyTorch's forward(src, src_mask, src_key_padding_mask, is_causal): src [S, N, E] ([N, S, E]
  // when batch_first, [S, E] unbatched); the masks are MultiheadAttention's attn_mask and key_padding_mask.
  Tensor encode(const Tensor& src, const Tensor& src_mask = Tensor(), const Tensor& src_key_padding_mask = Tensor(),
                bool is_causal = false);
  Tensor forward(const Tensor& src) override { return encode(src); }
  std::string type_name() const override { return "TransformerEncoderLayer"; }
  // A new layer with the same configuration and a copy of this one's parameters (PyTorch's deepcopy).
  std::shared_ptr<TransformerEncoderLayer> clone_layer() const;

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& key_padding_mask, bool is_causal);
  Tensor feed_forward_block(const Tensor& x);

  int64_t d_model_, nhead_;
  TransformerEncoderLayerOptions opts_;
  TensorOptions options_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
};

// The masks of TransformerDecoderLayer::decode, as PyTorch's forward arguments after tgt and memory.
struct TransformerDecoderMasks {
  Tensor tgt_mask;                 // self-attention attn_mask [T, T] or [N*nhead, T, T]
  Tensor memory_mask;              // cross-attention attn_mask [T, S] or [N*nhead, T, S]
  Tensor tgt_key_padding_mask;     // [N, T]
  Tensor memory_key_padding_mask;  // [N, S]
  bool tgt_is_causal = false;      // hint that tgt_mask is causal (applies it when tgt_mask is absent)
  bool memory_is_causal = false;   // the same for memory_mask
};

// torch.nn.TransformerDecoderLayer with its submodule names (self_attn, multihead_attn, linear1,
// dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3); post-norm unless norm_first.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerDecoderLayerOptions opts = {},
                          TensorOptions options = {});

  // tgt [T, N, E] and memory [S, N, E] ([N, *, E] when batch_first) -> [T, N, E].
  Tensor decode(const Tensor& tgt, const Tensor& memory, const TransformerDecoderMasks& masks = {});
  // Throws: a decoder layer needs memory (call decode).
  Tensor forward(const Tensor& tgt) override;
  std::string type_name() const override { return "TransformerDecoderLayer"; }
  // A new layer with the same configuration and a copy of this one's parameters.
  std::shared_ptr<TransformerDecoderLayer> clone_layer() const;

 private:
  Tensor feed_forward_block(const Tensor& x);

  int64_t d_model_, nhead_;
  TransformerDecoderLayerOptions opts_;
  TensorOptions options_;
  std::shared_ptr<MultiheadAttention> self_attn_, multihead_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_, dropout3_;
  std::shared_ptr<LayerNorm> norm1_, norm2_, norm3_;
};

// torch.nn.TransformerEncoder: num_layers copies of encoder_layer (equal initial parameters, as
// PyTorch's deepcopy) under "layers", then the optional final "norm".
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  // PyTorch's forward(src, mask, src_key_padding_mask, is_causal): every layer gets the same masks.
  Tensor encode(const Tensor& src, const Tensor& mask = Tensor(), const Tensor& src_key_padding_mask = Tensor(),
                bool is_causal = false);
  Tensor forward(const Tensor& src) override { return encode(src); }
  std::string type_name() const override { return "TransformerEncoder"; }

 private:
  std::shared_ptr<ModuleList> layers_;
  std::shared_ptr<LayerNorm> norm_;
};

// torch.nn.TransformerDecoder: num_layers copies of decoder_layer under "layers", then the optional "norm".
class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerDecoderLayer& decoder_layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  // PyTorch's forward(tgt, memory, ...): every layer gets the same masks.
  Tensor decode(const Tensor& tgt, const Tensor& memory, const TransformerDecoderMasks& masks = {});
  // Throws: a decoder needs memory (call decode).
  Tensor forward(const Tensor& tgt) override;
  std::string type_name() const override { return "TransformerDecoder"; }

 private:
  std::shared_ptr<ModuleList> layers_;
  std::shared_ptr<LayerNorm> norm_;
};

}  // namespace tg::nn
