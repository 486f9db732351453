// MultiheadAttention: packed q/k/v projections, scaled dot-product attention per head, output projection.
#pragma once

#include <memory>

#include "nn/linear.h"
#include "nn/module.h"

namespace tg::nn {

// The arguments of torch.nn.MultiheadAttention.forward after query, key and value, with its defaults.
// Masks follow the module's convention (not F.scaled_dot_product_attention's): a bool mask is true
// where attention is NOT allowed; a floating mask (of the query's dtype) is added to the scores.
struct MultiheadAttentionArgs {
  Tensor key_padding_mask;           // [N, S] ([S] unbatched): true ignores that key
  bool need_weights = true;          // also return the attention weights (then the composed path runs)
  Tensor attn_mask;                  // [L, S] or [N*num_heads, L, S] ([num_heads, L, S] unbatched)
  bool average_attn_weights = true;  // weights averaged over heads [N, L, S], else per head [N, num_heads, L, S]
  // A hint that attn_mask is the causal mask; without an attn_mask it applies the causal mask
  // (col > row masked) where PyTorch raises.
  bool is_causal = false;
};

// What MultiheadAttention::forward returns, as PyTorch's (attn_output, attn_output_weights).
struct MultiheadAttentionOutput {
  Tensor output;        // [L, N, E] ([N, L, E] when batch_first, [L, E] unbatched)
  Tensor attn_weights;  // undefined unless need_weights; after dropout, as PyTorch returns them
};

// torch.nn.MultiheadAttention with kdim = vdim = embed_dim: in_proj_weight [3E, E] (xavier
// uniform), in_proj_bias [3E] (zeros), out_proj Linear(E, E) with a zero bias.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false, TensorOptions options = {});

  // PyTorch's forward: query [L, N, E] ([N, L, E] when batch_first, or unbatched [L, E]), key and
  // value [S, N, E] likewise.
  MultiheadAttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const MultiheadAttentionArgs& args = {});
  // The attention output alone (need_weights = false): masks as in MultiheadAttentionArgs.
  Tensor attend(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = Tensor(),
                bool is_causal = false, const Tensor& key_padding_mask = Tensor());
  // Self-attention: attend(x, x, x).
  Tensor forward(const Tensor& x) override { return attend(x, x, x); }
  std::string type_name() const override { return "MultiheadAttention"; }

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }

 private:
  int64_t embed_dim_;
  int64_t num_heads_;
  double dropout_;
  bool batch_first_;
  Tensor in_proj_weight_;
  Tensor in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
};

}  // namespace tg::nn
