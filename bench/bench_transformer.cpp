// transformer_lm: a small causal transformer language model's training step (twin of
// bench/pt/steps.py transformer_lm): vocab 256, d_model 128, 4 heads, 2 pre-norm blocks (causal
// self-attention, MLP 128-512-128 with GELU), learned positions, tied-free LM head; batch 8 of 64
// tokens, cross-entropy on the next token, SGD lr 1e-3. Eager and compiled (cudagraphs).
#include <benchmark/benchmark.h>

#include "bench/support/step_timing.h"
#include "bench/support/step_trainer.h"
#include "bench/support/transformer_lm.h"
#include "tensor/cuda_runtime.h"

namespace {

constexpr int64_t kSeq = 64, kBatch = 8;

void BM_transformer_lm_step(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const bool compiled = state.range(0) != 0;
  tg::manual_seed(0);
  const tg::Device dev = tg::cuda_device(0);
  auto model = std::make_shared<bench::TransformerLM>(kSeq);
  model->to(dev);
  tg::Tensor tokens = tg::randint(0, bench::kLmVocab, {kBatch, kSeq + 1}, {.dtype = tg::kInt64, .device = dev});
  tg::Tensor x = tokens.narrow(1, 0, kSeq).contiguous(), y = tokens.narrow(1, 1, kSeq).contiguous();
  auto loss = [model](const tg::Tensor& a, const tg::Tensor& b) {
    return bench::lm_loss(*model, a, b);
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
