#include "nn/transformer/gpt.h"

#include <cmath>
#include <sstream>

#include "autograd/checkpoint.h"
#include "nn/init.h"
#include "ops/core/autocast.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/loss/linear_cross_entropy.h"
#include "ops/random/dropout.h"
#include "ops/shape/split.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::nn {
namespace {

constexpr double kInitStd = 0.02;  // GPT-2's

void init_linear(Linear& l, double std) {
  NoGradGuard no_grad;
  init::normal_(l.weight(), 0.0, std);
  if (l.bias().defined()) init::zeros_(l.bias());
}

}  // namespace

GPTBlock::GPTBlock(const GPTConfig& config, TensorOptions options) : config_(config) {
  const int64_t d = config.d_model;
  TG_CHECK(config.heads > 0 && d % config.heads == 0, "[GPT] d_model ", d, " is not a multiple of heads ",
           config.heads);
  {
    init::SkipDrawsGuard skip;  // the Linear layers' default draws: every one is drawn again below
    ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(Shape{d}, 1e-5, true, true, options));
    qkv_ = register_module("qkv", std::make_shared<Linear>(d, 3 * d, true, options));
    out_ = register_module("out", std::make_shared<Linear>(d, d, true, options));
    ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(Shape{d}, 1e-5, true, true, options));
    fc_ = register_module("fc", std::make_shared<Linear>(d, 4 * d, true, options));
    proj_ = register_module("proj", std::make_shared<Linear>(4 * d, d, true, options));
  }
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config.layers));
  init_linear(*qkv_, kInitStd);
  init_linear(*fc_, kInitStd);
  init_linear(*out_, residual_std);
  init_linear(*proj_, residual_std);
}

Tensor GPTBlock::forward(const Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), d = config_.d_model, h = config_.heads;
  const bool train = is_training() && config_.dropout > 0.0;
  const TensorList qkv = split(qkv_->forward(ln_1_->forward(x)), d, 2);
  auto heads = [&](const Tensor& z) { return z.view({b, t, h, d / h}).transpose(1, 2); };
  Tensor a = scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), Tensor(),
                                          train ? config_.dropout : 0.0, /*is_causal=*/true);
  a = out_->forward(a.transpose(1, 2).reshape({b, t, d}));
  if (train) a = dropout(a, config_.dropout);
  Tensor y, normed;
  if (config_.fused_ops) {
    // The residual add and ln_2 as one op; under autocast its rows come out in the 16 bits fc reads
    // (autocast never casts float64).
    const std::optional<DType> fc_dtype = x.dtype() == kFloat64 ? std::nullopt : autocast_dtype(x.device().type);
    const AddLayerNormResult r = ln_2_->forward_add(x, a, fc_dtype);
    y = r.sum;
    normed = r.normed;
  } else {
    y = x + a;
    normed = ln_2_->forward(y);
  }
  Tensor m = proj_->forward(gelu(fc_->forward(normed), "tanh"));
  return y + (train ? dropout(m, config_.dropout) : m);
}

GPT::GPT(GPTConfig config, TensorOptions options) : config_(config) {
  TG_CHECK(config.vocab_size > 0 && config.context > 0 && config.layers >= 0, "[GPT] expected a positive vocab_size ",
           "and context and layers >= 0, got vocab_size ", config.vocab_size, ", context ", config.context,
           ", layers ", config.layers);
  // The default draws of wte, wpe and lm_head are skipped (each is drawn again at the end); the
  // generator still passes them, so the blocks in between draw what they always did.
  {
    init::SkipDrawsGuard skip;
    wte_ = register_module("wte",
                           std::make_shared<Embedding>(config.vocab_size, config.d_model, std::nullopt, options));
    wpe_ = register_module("wpe", std::make_shared<Embedding>(config.context, config.d_model, std::nullopt, options));
  }
  h_ = register_module("h", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config.layers; ++i) h_->push_back(std::make_shared<GPTBlock>(config, options));
  {
    init::SkipDrawsGuard skip;
    ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(Shape{config.d_model}, 1e-5, true, true, options));
    lm_head_ = register_module("lm_head", std::make_shared<Linear>(config.d_model, config.vocab_size, false, options));
  }
  NoGradGuard no_grad;
  init::normal_(wte_->weight(), 0.0, kInitStd);
  init::normal_(wpe_->weight(), 0.0, kInitStd);
  init_linear(*lm_head_, kInitStd);
}

Tensor GPT::hidden(const Tensor& idx) {
  TG_CHECK(idx.dim() == 2, "[GPT] expected token ids [B, T], got shape ", shape_str(idx.sizes()));
  const int64_t t = idx.size(1);
  TG_CHECK(t <= config_.context, "[GPT] a sequence of ", t, " tokens is longer than the context of ",
           config_.context);
  Tensor h = wte_->forward(idx) + wpe_->forward(arange(t, {.dtype = kInt64, .device = idx.device()}));
  for (size_t i = 0; i < h_->size(); ++i) {
    Module* block = &(*h_)[static_cast<int64_t>(i)];
    // The recomputation calls the block again: the model must outlive the backward, as with PyTorch.
    // Through operator(), so that the block's forward hooks (fully_shard's gathers) run, also when
    // the checkpoint recomputes it.
    h = config_.checkpoint ? tg::checkpoint([block](const Tensor& x) { return (*block)(x); }, h) : (*block)(h);
  }
  return ln_f_->forward(h);
}

Tensor GPT::forward(const Tensor& idx) { return lm_head_->forward(hidden(idx)); }

Tensor GPT::loss(const Tensor& idx, const Tensor& targets) {
  TG_CHECK(targets.sizes() == idx.sizes(), "[GPT] targets of shape ", shape_str(targets.sizes()),
           " do not match token ids of shape ", shape_str(idx.sizes()));
  // One call of the model, so that its forward hooks run around the loss as around forward().
  return call([&] {
    const Tensor h = hidden(idx);
    if (!config_.fused_ops)
      return cross_entropy(lm_head_->forward(h).reshape({-1, config_.vocab_size}), targets.reshape({-1}));
    return linear_cross_entropy(h.reshape({-1, config_.d_model}), lm_head_->weight(), lm_head_->bias(),
                                targets.reshape({-1}));
  });
}

std::string GPT::extra_repr() const {
  std::ostringstream os;
  os << "vocab_size=" << config_.vocab_size << ", context=" << config_.context << ", d_model=" << config_.d_model
     << ", heads=" << config_.heads << ", layers=" << config_.layers << ", dropout=" << config_.dropout;
  if (config_.checkpoint) os << ", checkpoint=true";
  if (!config_.fused_ops) os << ", fused_ops=false";
  return os.str();
}

}  // namespace tg::nn
