// MultiheadAttention: packed q/k/v projections, scaled dot-product attention per head, output projection.
#pragma once

#include <memory>

#include "nn/linear.h"
#include "nn/module.h"

namespace tg::nn {

// torch.nn.MultiheadAttention with kdim = vdim = embed_dim: in_proj_weight [3E, E] (xavier
// uniform), in_proj_bias [3E] (zeros), out_proj Linear(E, E) with a zero bias.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false, TensorOptions options = {});

  // Attention output [L, N, E] ([N, L, E] when batch_first); attn_mask is bool (true = attend)
  // or additive, of shape [L, S] or [N*num_heads, L, S]. The averaged weights are not returned.
  Tensor attend(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = Tensor(),
                bool is_causal = false);
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
