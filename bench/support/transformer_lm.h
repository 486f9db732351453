// transformer_lm's model (bench/pt/steps.py transformer_lm's twin): vocab 256, d_model 128, 4 heads, 2
// pre-norm blocks (causal self-attention, MLP 128-512-128 with GELU), learned positions, an untied
// LM head. Shared by bench_transformer (64 tokens) and bench_shape_buckets (17..512 tokens).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tapegraph.h"

namespace bench {

constexpr int64_t kLmVocab = 256, kLmDim = 128, kLmHeads = 4, kLmLayers = 2;

// LayerNorm over the last dim written with reductions (gamma = 1, beta = 0 at init).
class LmNorm : public tg::nn::Module {
 public:
  explicit LmNorm(int64_t d) {
    gamma_ = register_parameter("weight", tg::ones({d}));
    beta_ = register_parameter("bias", tg::zeros({d}));
  }
  tg::Tensor forward(const tg::Tensor& x) override {
    tg::Tensor mu = tg::mean(x, {-1}, true);
    tg::Tensor xc = x - mu;
    tg::Tensor v = tg::mean(xc * xc, {-1}, true);
    return xc * tg::rsqrt(v + 1e-5) * gamma_ + beta_;
  }
  std::string type_name() const override { return "Norm"; }

 private:
  tg::Tensor gamma_, beta_;
};

// x + attn(norm(x)) then x + mlp(norm(x)).
class LmBlock : public tg::nn::Module {
 public:
  LmBlock() {
    n1_ = register_module("ln_1", std::make_shared<LmNorm>(kLmDim));
    attn_ = register_module("attn", std::make_shared<tg::nn::MultiheadAttention>(kLmDim, kLmHeads, 0.0, true, true));
    n2_ = register_module("ln_2", std::make_shared<LmNorm>(kLmDim));
    fc_ = register_module("fc", std::make_shared<tg::nn::Linear>(kLmDim, 4 * kLmDim));
    proj_ = register_module("proj", std::make_shared<tg::nn::Linear>(4 * kLmDim, kLmDim));
  }
  tg::Tensor forward(const tg::Tensor& x) override {
    tg::Tensor h = n1_->forward(x);
    tg::Tensor a = x + attn_->attend(h, h, h, tg::Tensor(), true);
    return a + proj_->forward(tg::gelu(fc_->forward(n2_->forward(a))));
  }
  std::string type_name() const override { return "Block"; }

 private:
  std::shared_ptr<LmNorm> n1_, n2_;
  std::shared_ptr<tg::nn::MultiheadAttention> attn_;
  std::shared_ptr<tg::nn::Linear> fc_, proj_;
};

// Token and position embeddings, the blocks, a final norm and the LM head: logits [B, T, V] for
// tokens [B, T] with T <= max_seq.
class TransformerLM : public tg::nn::Module {
 public:
  explicit TransformerLM(int64_t max_seq) : max_seq_(max_seq) {
    tok_ = register_module("tok", std::make_shared<tg::nn::Embedding>(kLmVocab, kLmDim));
    pos_ = register_module("pos", std::make_shared<tg::nn::Embedding>(max_seq, kLmDim));
    for (int64_t i = 0; i < kLmLayers; ++i)
      blocks_.push_back(register_module("h" + std::to_string(i), std::make_shared<LmBlock>()));
    norm_ = register_module("ln_f", std::make_shared<LmNorm>(kLmDim));
    head_ = register_module("head", std::make_shared<tg::nn::Linear>(kLmDim, kLmVocab));
  }
  tg::Tensor forward(const tg::Tensor& tokens) override {
    // Made once: a step then launches no arange kernel.
    if (!positions_.defined()) positions_ = tg::arange(max_seq_, {.dtype = tg::kInt64, .device = tokens.device()});
    const int64_t t = tokens.size(1);
    tg::Tensor h = tok_->forward(tokens) + pos_->forward(t == max_seq_ ? positions_ : positions_.narrow(0, 0, t));
    for (auto& b : blocks_) h = b->forward(h);
    return head_->forward(norm_->forward(h));
  }
  std::string type_name() const override { return "TransformerLM"; }

 private:
  int64_t max_seq_;
  std::shared_ptr<tg::nn::Embedding> tok_, pos_;
  std::vector<std::shared_ptr<LmBlock>> blocks_;
  std::shared_ptr<LmNorm> norm_;
  std::shared_ptr<tg::nn::Linear> head_;
  tg::Tensor positions_;
};

// Next-token cross-entropy of `model` on tokens x [B, T] and labels y [B, T].
inline tg::Tensor lm_loss(TransformerLM& model, const tg::Tensor& x, const tg::Tensor& y) {
  const int64_t n = x.size(0) * x.size(1);
  return tg::cross_entropy(model.forward(x).reshape({n, kLmVocab}), y.reshape({n}));
}

}  // namespace bench
