// Sampling from a language model's logits: topk over vocabulary-sized rows and over many short
// rows, multinomial with and without replacement, and the temperature + top-k sampling step
// eagerly and compiled (a CUDA graph on CUDA). Rows: batch sizes 1, 8 and 64 of GPT-2's 50257.
#include <benchmark/benchmark.h>

#include "bench/support/capture_mode.h"
#include "bench/support/devices.h"
#include "tapegraph.h"

namespace {

constexpr int64_t kVocab = 50257;

using bench::device_or_skip;
using bench::sync;

// topk(k) of [rows, cols] float32 logits.
void BM_topk(benchmark::State& state, bool cuda) {
  const auto dev = device_or_skip(state, cuda);
  if (!dev) return;
  const int64_t rows = state.range(0), cols = state.range(1), k = state.range(2);
  const tg::Tensor x = tg::randn({rows, cols}, {.device = *dev});
  for (auto _ : state) {
    auto [v, i] = tg::topk(x, k);
    benchmark::DoNotOptimize(v);
    sync(*dev);
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
}

// multinomial(softmax(logits), samples, replacement) over vocabulary-sized rows.
void BM_multinomial(benchmark::State& state, bool cuda) {
  const auto dev = device_or_skip(state, cuda);
  if (!dev) return;
  const int64_t rows = state.range(0), samples = state.range(1);
  const bool replacement = state.range(2) != 0;
  const tg::Tensor probs = tg::softmax(tg::randn({rows, kVocab}, {.device = *dev}), -1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tg::multinomial(probs, samples, replacement));
    sync(*dev);
  }
}

tg::Tensor sample_step(const tg::Tensor& logits) {
  auto [values, indices] = tg::topk(logits / 0.8, 50);
  return tg::gather(indices, 1, tg::multinomial(tg::softmax(values, -1), 1));
}

// One token per row by temperature + top-50 sampling; compiled: cudagraphs on CUDA, aot_eager on the CPU.
void BM_sample_step(benchmark::State& state, bool cuda, bool compiled) {
  const auto dev = device_or_skip(state, cuda);
  if (!dev) return;
  const tg::Tensor logits = tg::randn({state.range(0), kVocab}, {.device = *dev});
  auto f = tg::compile([](const tg::Tensor& l) { return sample_step(l); },
                       bench::capture_mode({.backend = cuda ? "cudagraphs" : "aot_eager"}));
  for (int warm = 0; warm < 3; ++warm) {
    tg::mark_step_begin();
    (void)(compiled ? f(logits) : sample_step(logits));
  }
  sync(*dev);
  for (auto _ : state) {
    tg::mark_step_begin();
    benchmark::DoNotOptimize(compiled ? f(logits) : sample_step(logits));
    sync(*dev);
  }
}

void topk_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t rows : {1, 8, 64}) b->Args({rows, kVocab, 50});
  b->Args({100000, 16, 4});   // many short rows (one thread per row on CUDA)
  b->Args({10000, 1000, 10});  // many medium rows (segmented sort on CUDA)
}

void multinomial_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t rows : {1, 64}) {
    b->Args({rows, 1, 0});
    b->Args({rows, 1, 1});
    b->Args({rows, 100, 1});
  }
}

BENCHMARK_CAPTURE(BM_topk, cpu, false)->Apply(topk_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_topk, cuda, true)->Apply(topk_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_multinomial, cpu, false)->Apply(multinomial_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_multinomial, cuda, true)->Apply(multinomial_shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_sample_step, cpu_eager, false, false)->Arg(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_sample_step, cuda_eager, true, false)->Arg(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_sample_step, cuda_cudagraphs, true, true)->Arg(8)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
