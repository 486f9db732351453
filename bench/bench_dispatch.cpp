// Eager per-op overhead: one add on 4-element tensors, so the time is dispatch (and, on CUDA, the
// kernel launch), not arithmetic. Compare with the CPU anchor: libtorch 1.13 takes 523 ns for a + b,
// 878 ns with requires_grad, 269 ns for a.add_(b).
#include <benchmark/benchmark.h>

#include <optional>

#include "bench/support/devices.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace {

using bench::device_or_skip;
using bench::sync;

void BM_add_tiny(benchmark::State& state, bool cuda) {
  const auto dev = device_or_skip(state, cuda);
  if (!dev) return;
  const tg::Tensor a = tg::randn({4}, {.device = *dev});
  const tg::Tensor b = tg::randn({4}, {.device = *dev});
  tg::Tensor c = a + b;  // warm-up: first-use allocations, kernel loading
  sync(*dev);
  for (auto _ : state) {
    c = a + b;
    benchmark::DoNotOptimize(c.impl());
  }
  sync(*dev);
}

void BM_add_tiny_requires_grad(benchmark::State& state, bool cuda) {
  const auto dev = device_or_skip(state, cuda);
  if (!dev) return;
  const tg::Tensor a = tg::randn({4}, {.device = *dev, .requires_grad = true});
  const tg::Tensor b = tg::randn({4}, {.device = *dev});
  tg::Tensor c = a + b;
  sync(*dev);
  for (auto _ : state) {
    c = a + b;  // also records a tape node
    benchmark::DoNotOptimize(c.impl());
  }
  sync(*dev);
}

void BM_add_inplace_tiny(benchmark::State& state, bool cuda) {
  const auto dev = device_or_skip(state, cuda);
  if (!dev) return;
  tg::Tensor a = tg::zeros({4}, {.device = *dev});
  const tg::Tensor b = tg::full({4}, 1e-3, {.device = *dev});
  a.add_(b);
  sync(*dev);
  for (auto _ : state) {
    a.add_(b);
    benchmark::DoNotOptimize(a.impl());
  }
  sync(*dev);
}

// Each runs on the CPU and on CUDA. CUDA times include the launch; the queue is drained before and after.
#define TG_DISPATCH_BENCH(fn)                                                      \
  BENCHMARK_CAPTURE(fn, cpu, false)->UseRealTime()->Unit(benchmark::kNanosecond); \
  BENCHMARK_CAPTURE(fn, cuda, true)->UseRealTime()->Unit(benchmark::kNanosecond)

TG_DISPATCH_BENCH(BM_add_tiny);
TG_DISPATCH_BENCH(BM_add_tiny_requires_grad);
TG_DISPATCH_BENCH(BM_add_inplace_tiny);

}  // namespace

BENCHMARK_MAIN();
