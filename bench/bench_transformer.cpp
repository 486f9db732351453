// transformer_lm: a small causal transformer language model's training step (twin of
// bench/pt_transformer_lm.py): vocab 256, d_model 128, 4 heads, 2 pre-norm blocks (causal
// self-attention, MLP 128-512-128 with GELU), learned positions, tied-free LM head; batch 8 of 64
// tokens, cross-entropy on the next token, SGD lr 1e-3. Eager and compiled (cudagraphs).
#include <benchmark/benchmark.h>

#include "bench/step_trainer.h"
#include "bench/step_timing.h"
#include "tensor/cuda_runtime.h"

namespace {

constexpr int64_t kVocab = 256, kDim = 128, kHeads = 4, kLayers = 2, kSeq = 64, kBatch = 8;

// LayerNorm over the last dim written with reductions (gamma = 1, beta = 0 at init).
class Norm : public tg::nn::Module {
 public:
  explicit Norm(int64_t d) {
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
class Block : public tg::nn::Module {
 public:
  Block() {
    n1_ = register_module("ln_1", std::make_shared<Norm>(kDim));
    attn_ = register_module("attn", std::make_shared<tg::nn::MultiheadAttention>(kDim, kHeads, 0.0, true, true));
    n2_ = register_module("ln_2", std::make_shared<Norm>(kDim));
    fc_ = register_module("fc", std::make_shared<tg::nn::Linear>(kDim, 4 * kDim));
    proj_ = register_module("proj", std::make_shared<tg::nn::Linear>(4 * kDim, kDim));
  }
  tg::Tensor forward(const tg::Tensor& x) override {
    tg::Tensor h = n1_->forward(x);
    tg::Tensor a = x + attn_->attend(h, h, h, tg::Tensor(), true);
    return a + proj_->forward(tg::gelu(fc_->forward(n2_->forward(a))));
  }
  std::string type_name() const override { return "Block"; }

 private:
  std::shared_ptr<Norm> n1_, n2_;
  std::shared_ptr<tg::nn::MultiheadAttention> attn_;
  std::shared_ptr<tg::nn::Linear> fc_, proj_;
};

// Token and position embeddings, the blocks, a final norm and the LM head: logits [B, T, V].
class TransformerLM : public tg::nn::Module {
 public:
  TransformerLM() {
    tok_ = register_module("tok", std::make_shared<tg::nn::Embedding>(kVocab, kDim));
    pos_ = register_module("pos", std::make_shared<tg::nn::Embedding>(kSeq, kDim));
    for (int64_t i = 0; i < kLayers; ++i)
      blocks_.push_back(register_module("h" + std::to_string(i), std::make_shared<Block>()));
    norm_ = register_module("ln_f", std::make_shared<Norm>(kDim));
    head_ = register_module("head", std::make_shared<tg::nn::Linear>(kDim, kVocab));
  }
  tg::Tensor forward(const tg::Tensor& tokens) override {
    positions_ = positions_.defined() ? positions_ : tg::arange(kSeq, {.dtype = tg::kInt64, .device = tokens.device()});
    tg::Tensor h = tok_->forward(tokens) + pos_->forward(positions_);
    for (auto& b : blocks_) h = b->forward(h);
    return head_->forward(norm_->forward(h));
  }
  std::string type_name() const override { return "TransformerLM"; }

 private:
  std::shared_ptr<tg::nn::Embedding> tok_, pos_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<Norm> norm_;
  std::shared_ptr<tg::nn::Linear> head_;
  tg::Tensor positions_;
};

void BM_transformer_lm_step(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const bool compiled = state.range(0) != 0;
  tg::manual_seed(0);
  const tg::Device dev = tg::cuda_device(0);
  auto model = std::make_shared<TransformerLM>();
  model->to(dev);
  tg::Tensor tokens = tg::randint(0, kVocab, {kBatch, kSeq + 1}, {.dtype = tg::kInt64, .device = dev});
  tg::Tensor x = tokens.narrow(1, 0, kSeq).contiguous(), y = tokens.narrow(1, 1, kSeq).contiguous();
  auto loss = [model](const tg::Tensor& a, const tg::Tensor& b) {
    return tg::cross_entropy(model->forward(a).reshape({kBatch * kSeq, kVocab}), b.reshape({kBatch * kSeq}));
  };
  bench::StepTrainer t(loss, model->parameters(), x, y, tg::optim::SGDOptions{.lr = 1e-3},
                       bench::StepTrainer::compiled_if(compiled));
  for (int i = 0; i < 5; ++i) t.step();
  tg::cuda::synchronize();
  bench::time_steps(state, [&] { t.step(); }, 10);
  state.SetLabel(compiled ? "cudagraphs: forward + backward + optimizer graphs" : "eager");
}
BENCHMARK(BM_transformer_lm_step)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
