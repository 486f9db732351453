// gpt2: a GPT-2-shaped language model's training step (nn::GPT: vocab 50304, d_model 768, 12 heads,
// 12 layers; batch 8 of 1024 tokens; AdamW lr 3e-4, weight decay 0.1), the twin of the anchors'
// pt_gpt2.py: eager and compiled (the loss as CUDA graphs with cudagraphs, the update as one
// CompiledStep), fp32 (TF32 off) and bf16 autocast. Reports ms and tokens per second, model FLOPs
// utilization (6N + 12 L d T FLOPs per token against the GPU's dense peak) and peak device memory.
// TG_GPT2_LAYERS, TG_GPT2_BATCH and TG_GPT2_SEQ change the size; TG_GPT2_CHECKPOINT=1 runs each
// block through tg::checkpoint. activation_MiB is the peak of one step minus what was allocated
// before its forward (parameters, gradients, optimizer state), for either setting.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "bench/capture_mode.h"
#include "bench/step_timing.h"
#include "tapegraph.h"
#include "tensor/cuda_memory.h"
#include "tensor/cuda_runtime.h"

namespace {

using tg::Tensor;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stoll(v) : fallback;
}

// Dense peak FLOP/s of an H100/H200 SXM: bf16 tensor cores, and float32 without TF32.
constexpr double kPeakBf16 = 989e12, kPeakFp32 = 67e12;

void run(benchmark::State& state, bool compiled, bool bf16) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t layers = env_int("TG_GPT2_LAYERS", 12), batch = env_int("TG_GPT2_BATCH", 8),
                seq = env_int("TG_GPT2_SEQ", 1024);
  const bool checkpoint = env_int("TG_GPT2_CHECKPOINT", 0) != 0;
  const tg::Device dev = tg::cuda_device(0);
  tg::cuda::empty_cache();
  tg::cuda::reset_peak_memory_stats();
  try {
    tg::manual_seed(0);
    auto model = std::make_shared<tg::nn::GPT>(tg::nn::GPTConfig{.context = seq, .layers = layers, .checkpoint = checkpoint});
    model->to(dev);
    tg::optim::AdamW opt(model->parameters(), {.lr = 3e-4, .weight_decay = 0.1});
    const Tensor tokens = tg::randint(0, model->config().vocab_size, {batch, seq + 1}, {.device = dev});
    const Tensor x = tokens.narrow(1, 0, seq).contiguous(), y = tokens.narrow(1, 1, seq).contiguous();
    auto loss = [model, bf16](const Tensor& a, const Tensor& b) {
      tg::AutocastGuard autocast(a.device(), tg::kBFloat16, bf16);
      return model->loss(a, b);
    };
    std::function<Tensor(const Tensor&, const Tensor&)> f = loss;
    std::unique_ptr<tg::optim::CompiledStep> update;
    if (compiled) {
      tg::mark_static_address(x);
      tg::mark_static_address(y);
      opt.set_capturable(true);
      const tg::CompileOptions options = bench::capture_mode({.backend = "cudagraphs"});
      auto c = std::make_shared<tg::Compiled<decltype(loss)>>(loss, options);
      f = [c](const Tensor& a, const Tensor& b) { return (*c)(a, b); };
      update = std::make_unique<tg::optim::CompiledStep>(opt, options);
    }
    Tensor last;
    auto step = [&] {
      last = f(x, y);
      opt.zero_grad();
      last.backward();
      if (update) update->step();
      else opt.step();
    };
    for (int i = 0; i < 5; ++i) step();  // warm-up, tracing, recording
    tg::cuda::synchronize();
    bench::time_steps(state, step, 5);
    int64_t params = 0;
    for (const Tensor& p : model->parameters()) params += p.numel();
    const double tokens_per_step = static_cast<double>(batch * seq);
    const double flops_per_token = 6.0 * static_cast<double>(params) + 12.0 * static_cast<double>(layers * model->config().d_model * seq);
    state.counters["tokens_per_s"] = benchmark::Counter(tokens_per_step * 5, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["mfu"] = benchmark::Counter(tokens_per_step * 5 * flops_per_token / (bf16 ? kPeakBf16 : kPeakFp32),
                                               benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak_MiB"] = static_cast<double>(tg::cuda::max_memory_allocated()) / (1 << 20);
    // One more step, measured alone. Memory a backend keeps between steps (the cudagraphs backend's
    // graph pools) is already in `held`, so this counts what the step allocates beyond it.
    tg::cuda::synchronize();
    const int64_t held = tg::cuda::memory_allocated();
    tg::cuda::reset_peak_memory_stats();
    step();
    tg::cuda::synchronize();
    state.counters["activation_MiB"] = static_cast<double>(tg::cuda::max_memory_allocated() - held) / (1 << 20);
    state.counters["loss"] = last.item<double>();
  } catch (const tg::Error& e) {  // reported as this benchmark's error; the others still run
    state.SkipWithError(e.what());
    return;
  }
  state.SetLabel(std::string(compiled ? "compiled" : "eager") + (bf16 ? ", bf16 autocast" : ", fp32") +
                 (checkpoint ? ", checkpoint" : ""));
}

// range(0): 0 eager, 1 compiled; range(1): 0 fp32, 1 bf16.
void BM_gpt2_step(benchmark::State& state) { run(state, state.range(0) != 0, state.range(1) != 0); }
BENCHMARK(BM_gpt2_step)
    ->ArgsProduct({{0, 1}, {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(4);

}  // namespace

BENCHMARK_MAIN();
