// Variable shapes with shape buckets: transformer_lm over a sequence length drawn from 17..512 every
// step, and mlp_small over a batch size drawn from 1..256 every step; eager, and compiled with the
// cudagraphs backend, 8 evenly spaced buckets and CompiledStep. Both runs take the same 1,000 draws,
// in a cycle: the timed steps repeat the warm-up's, so eager mode is timed with every shape seen
// before (its cuBLASLt autotuning of each new shape done) and the comparison is of steady states.
// Counters: us_per_step (after the warm-up), warmup_s (the first 1,000 steps, compilations and
// recordings included), compilations, recordings (CUDA graphs recorded for the loss's forward and
// backward over all steps), segments (segments planned for capture, summed over variants: each
// records once), rerecords, evictions, padded_calls.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>

#include "bench/support/capture_mode.h"
#include "bench/support/step_timing.h"
#include "bench/support/transformer_lm.h"
#include "bench/support/workloads.h"
#include "tensor/cuda_runtime.h"

namespace {

constexpr int kWarmupSteps = 1000;
constexpr int64_t kBatch = 8, kMaxSeq = 512;

// `n` sizes drawn uniformly from [lo, hi] with a fixed seed.
std::vector<int64_t> draws(int64_t lo, int64_t hi, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<int64_t> out(n);
  for (int64_t& v : out) v = d(rng);
  return out;
}

// The compile options of the compiled runs: inputs x and y padded together along `dim` (labels with
// ignore_index) up to 8 evenly spaced sizes up to `max`.
tg::CompileOptions bucketed(int64_t dim, int64_t max) {
  return bench::capture_mode(
      {.backend = "cudagraphs",
       .input_names = {"x", "y"},
       .shape_buckets = {{.dims = {{"x", dim}, {"y", dim, -100}}, .sizes = tg::evenly_spaced_buckets(max, 8)}}});
}

// Runs `step` kWarmupSteps times (reporting the seconds), then times it.
void warm_up_and_time(benchmark::State& state, const std::function<void()>& step) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kWarmupSteps; ++i) step();
  tg::cuda::synchronize();
  state.counters["warmup_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bench::time_steps(state, step, 10);
}

// The counters of a compiled loss.
void report(benchmark::State& state, const tg::graphs::CompileCounters& c) {
  state.counters["compilations"] = c.compilations;
  state.counters["recordings"] = c.graphs_captured;
  state.counters["segments"] = c.captured_segments;
  state.counters["rerecords"] = c.rerecords;
  state.counters["evictions"] = c.evictions;
  state.counters["padded_calls"] = c.padded_calls;
  state.counters["eager_fallbacks"] = c.eager_fallbacks;
}

void BM_transformer_lm_lengths_17_512(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const bool compiled = state.range(0) != 0;
  tg::manual_seed(0);
  const tg::Device dev = tg::cuda_device(0);
  auto model = std::make_shared<bench::TransformerLM>(kMaxSeq);
  model->to(dev);
  tg::optim::SGD sgd(model->parameters(), {.lr = 1e-3});
  std::unique_ptr<tg::optim::CompiledStep> update;
  if (compiled) update = std::make_unique<tg::optim::CompiledStep>(sgd, bench::capture_mode({.backend = "cudagraphs"}));
  auto loss = [model](const tg::Tensor& x, const tg::Tensor& y) { return bench::lm_loss(*model, x, y); };
  auto f = tg::compile(loss, bucketed(1, kMaxSeq));
  const tg::Tensor tokens = tg::randint(0, bench::kLmVocab, {kBatch, kMaxSeq + 1}, {.device = dev});
  const std::vector<int64_t> lengths = draws(17, kMaxSeq, kWarmupSteps, 1);
  size_t i = 0;
  warm_up_and_time(state, [&] {
    const int64_t t = lengths[i++ % lengths.size()];
    tg::Tensor x = tokens.narrow(1, 0, t).contiguous(), y = tokens.narrow(1, 1, t).contiguous();
    tg::Tensor l = compiled ? f(x, y) : loss(x, y);
    sgd.zero_grad();
    l.backward();
    if (update) update->step();
    else sgd.step();
  });
  if (compiled) report(state, f.counters());
  state.SetLabel(compiled ? "cudagraphs, 8 sequence buckets up to 512" : "eager");
}
BENCHMARK(BM_transformer_lm_lengths_17_512)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_mlp_small_batches_1_256(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const bool compiled = state.range(0) != 0;
  const tg::Device dev = tg::cuda_device(0);
  bench::MlpSetup s(bench::kMlpSmall, dev);
  std::unique_ptr<tg::optim::CompiledStep> update;
  if (compiled) update = std::make_unique<tg::optim::CompiledStep>(*s.sgd, bench::capture_mode({.backend = "cudagraphs"}));
  auto model = s.model;
  auto loss = [model](const tg::Tensor& x, const tg::Tensor& y) { return tg::cross_entropy((*model)(x), y); };
  auto f = tg::compile(loss, bucketed(0, 256));
  const tg::Tensor xs = tg::randn({256, bench::kMlpSmall.widths.front()}, {.device = dev});
  const tg::Tensor ys = tg::randint(0, bench::kMlpSmall.widths.back(), {256}, {.device = dev});
  const std::vector<int64_t> batches = draws(1, 256, kWarmupSteps, 2);
  size_t i = 0;
  warm_up_and_time(state, [&] {
    const int64_t b = batches[i++ % batches.size()];
    tg::Tensor x = xs.narrow(0, 0, b), y = ys.narrow(0, 0, b);
    tg::Tensor l = compiled ? f(x, y) : loss(x, y);
    s.sgd->zero_grad();
    l.backward();
    if (update) update->step();
    else s.sgd->step();
  });
  if (compiled) report(state, f.counters());
  state.SetLabel(compiled ? "cudagraphs, 8 batch buckets up to 256" : "eager");
}
BENCHMARK(BM_mlp_small_batches_1_256)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
