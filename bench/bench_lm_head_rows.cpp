// The LM head's per-row steps on one chunk of GPT-2's logits (bench_gpt2's shapes: 2,668 rows (256 MiB) of
// 50,304 bfloat16 classes): the log-sum-exp, loss and softmax-minus-onehot gradient written over the
// logits in one pass (linear_cross_entropy_rows_forward_backward), and the forward and backward steps
// run apart. bytes_per_s counts one read and one write of the logits, the least any form must move.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>

#include "bench/support/devices.h"
#include "ops/loss/linear_cross_entropy_rows.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace {

constexpr int64_t kClasses = 50304;

struct Chunk {
  tg::Tensor logits, target, lse, loss, row_grad;
  Chunk(int64_t rows, tg::Device dev) {
    tg::manual_seed(0);
    logits = (tg::randn({rows, kClasses}, {.device = dev}) * 2.0).to(tg::kBFloat16);
    target = tg::randint(0, kClasses, {rows}, {.device = dev});
    lse = tg::empty({rows}, {.device = dev});
    loss = tg::empty({rows}, {.device = dev});
    row_grad = tg::full({1}, 1.0 / static_cast<double>(rows), {.device = dev});
  }
};

void set_bytes(benchmark::State& state, int64_t rows) {
  const double bytes = 2.0 * 2.0 * static_cast<double>(rows * kClasses) * static_cast<double>(state.iterations());
  state.counters["bytes_per_s"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Both steps in one call. The logits hold gradients after the first iteration, which costs the same.
void BM_lm_head_rows_fused(benchmark::State& state) {
  const auto dev = bench::device_or_skip(state, true);
  if (!dev) return;
  const int64_t rows = state.range(0);
  Chunk c(rows, *dev);
  tg::linear_cross_entropy_rows_forward_backward(c.logits, c.target, -100, 0, c.lse, c.loss, c.row_grad);
  // A fingerprint of the results of the first call, to compare kernels by.
  const double lse_sum = c.lse.sum().item<double>(), grad_abs = c.logits.to(tg::kFloat32).abs().sum().item<double>();
  state.counters["lse_sum"] = lse_sum;
  state.counters["grad_abs_sum"] = grad_abs;
  bench::sync(*dev);
  for (auto _ : state) {
    tg::linear_cross_entropy_rows_forward_backward(c.logits, c.target, -100, 0, c.lse, c.loss, c.row_grad);
    bench::sync(*dev);
  }
  set_bytes(state, rows);
}

// The forward step, then the backward step: two passes over the logits.
void BM_lm_head_rows_apart(benchmark::State& state) {
  const auto dev = bench::device_or_skip(state, true);
  if (!dev) return;
  const int64_t rows = state.range(0);
  Chunk c(rows, *dev);
  bench::sync(*dev);
  for (auto _ : state) {
    tg::linear_cross_entropy_rows_forward(c.logits, c.target, -100, 0, c.lse, c.loss);
    tg::linear_cross_entropy_rows_backward(c.logits, c.lse, c.target, -100, 0, c.row_grad);
    bench::sync(*dev);
  }
  set_bytes(state, rows);
}

BENCHMARK(BM_lm_head_rows_fused)->Arg(2668)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_lm_head_rows_apart)->Arg(2668)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
BENCHMARK_MAIN();
