// GPT: a decoder-only transformer language model in GPT-2's shape (pre-norm blocks of causal
// self-attention and a tanh-GELU MLP, learned positions, an untied LM head), the model of
// bench_gpt2 and of the anchors' pt_gpt2.py.
#pragma once

#include <memory>

#include "nn/container.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/norm.h"

namespace tg::nn {

// The model's sizes; the defaults are GPT-2 small's (124M parameters with a vocabulary of 50304).
struct GPTConfig {
  int64_t vocab_size = 50304;
  int64_t context = 1024;  // the longest sequence: rows of the position table
  int64_t d_model = 768;
  int64_t heads = 12;
  int64_t layers = 12;
  double dropout = 0.0;  // on the attention weights and on each residual branch, while training
  // Runs each block through tg::checkpoint: its activations are recomputed in the backward instead
  // of kept (less memory for about one more forward of the blocks).
  bool checkpoint = false;
  // The fused ops (add_layer_norm, linear_cross_entropy) where a block and the loss allow them;
  // false writes the same model with plain ops only (layer_norm of the residual sum, lm_head then
  // cross_entropy), as a PyTorch user would, for the compiler to find the fusions.
  bool fused_ops = true;
};

// x + out(attention(ln_1(x))), then + proj(gelu_tanh(fc(ln_2(.)))); attention is causal, through
// scaled_dot_product_attention (the fused kernel where it applies).
class GPTBlock : public Module {
 public:
  explicit GPTBlock(const GPTConfig& config, TensorOptions options = {});
  // x [B, T, d_model] -> [B, T, d_model].
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GPTBlock"; }

 private:
  GPTConfig config_;
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<Linear> qkv_, out_, fc_, proj_;
};

// Token ids [B, T] (T <= context) -> next-token logits [B, T, vocab_size]. Weights start as GPT-2's:
// N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 * layers)), biases 0, norms 1 and 0.
class GPT : public Module {
 public:
  explicit GPT(GPTConfig config = {}, TensorOptions options = {});
  Tensor forward(const Tensor& idx) override;
  // The mean cross-entropy of forward(idx) against targets [B, T] (the next tokens), computed by
  // linear_cross_entropy from the final hidden states: the [B*T, vocab_size] logits never exist
  // (with fused_ops; else cross_entropy of forward(idx)).
  Tensor loss(const Tensor& idx, const Tensor& targets);
  const GPTConfig& config() const { return config_; }
  std::string type_name() const override { return "GPT"; }
  std::string extra_repr() const override;

 private:
  // The final layer norm's output [B, T, d_model]: what lm_head reads.
  Tensor hidden(const Tensor& idx);

  GPTConfig config_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<ModuleList> h_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> lm_head_;
};

}  // namespace tg::nn
