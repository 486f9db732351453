// Training steps of the anchor workloads compiled with the cudagraphs backend: the forward graph,
// the backward graph and the optimizer graph (SGD lr 1e-3) replayed each step, beside the same step
// in eager mode, with peak device memory; and compile latency, from the first trace to the first
// replay of all three graphs.
//   mlp_small: batch 64, widths 128-256-256-10;  mlp_wide: batch 256, widths 1024-4096-4096-1024;
//   mlp_wide_bf16: mlp_wide with its forward under autocast to bfloat16.
// Anchors (H200): PyTorch's whole step captured by hand into one CUDA graph 94 us (small), 1128 us
// (wide); torch.compile took 0.5-4.9 s to compile mlp_small.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <memory>

#include "bench/support/step_timing.h"
#include "bench/support/step_trainer.h"
#include "bench/support/workloads.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace {

using bench::Workload;

// The compile options of step mode `mode` (none for 0, eager): 1 the defaults; 2 without fusions
// (epilogues, generated elementwise kernels); 3 with the backward products' gradient epilogues too
// (fuse_gradient_epilogues); 4 without the branch stream (overlap_branches off).
std::optional<tg::CompileOptions> options_of(int mode) {
  if (mode == 0) return std::nullopt;
  tg::CompileOptions o = bench::StepTrainer::compiled_defaults();
  o.fuse_epilogues = o.fuse_elementwise = mode != 2;
  o.fuse_gradient_epilogues = mode == 3;
  o.overlap_branches = mode != 4;
  return o;
}

const char* mode_label(int mode) {
  switch (mode) {
    case 0: return "eager";
    case 1: return "cudagraphs: forward + backward + optimizer graphs";
    case 2: return "cudagraphs, fusions off";
    case 3: return "cudagraphs, gradient epilogues on";
    default: return "cudagraphs, no branch stream";
  }
}

// A workload's training step in step mode `mode` (options_of); with `amp`, the forward runs under
// autocast to bfloat16 (float32 parameters, as PyTorch's AMP).
bench::StepTrainer make_trainer(const Workload& w, int mode, bool amp = false) {
  bench::MlpSetup s(w, tg::cuda_device(0));
  bench::StepTrainer::LossFn loss = bench::classifier_loss(s.model);
  if (amp)
    loss = [inner = std::move(loss)](const tg::Tensor& a, const tg::Tensor& b) {
      tg::AutocastGuard autocast(tg::cuda_device(0), tg::kBFloat16);
      return inner(a, b);
    };
  return bench::StepTrainer(std::move(loss), s.model->parameters(), s.x, s.y, tg::optim::SGDOptions{.lr = 1e-3},
                            options_of(mode));
}

// Times a step of `mode` (options_of). Besides the step time: peak device memory, the device's own
// time per step (CUDA events around the timed steps) and, for compiled steps, the kernels the
// graphs replay per step.
void run(benchmark::State& state, const Workload& w, int mode, bool amp = false) {
  const bool compiled = mode != 0;
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  constexpr int kSteps = 20;
  tg::cuda::empty_cache();
  const int64_t base = tg::cuda::memory_allocated();
  tg::cuda::reset_peak_memory_stats();
  {
    bench::StepTrainer t = make_trainer(w, mode, amp);
    for (int i = 0; i < 10; ++i) t.step();  // warm-up, recording
    tg::cuda::synchronize();
    tg::graphs::reset_global_counters();
    bench::time_steps(state, [&] { t.step(); }, kSteps);
    const double steps = static_cast<double>(state.iterations()) * kSteps;
    if (compiled) state.counters["kernels_per_step"] = tg::graphs::global_counters().replayed_kernels / steps;
    const double ms = tg::cuda::device_time_ms([&] {
      for (int i = 0; i < kSteps; ++i) t.step();
    });
    state.counters["gpu_us_per_step"] = ms * 1e3 / kSteps;
    state.counters["peak_MiB"] = static_cast<double>(tg::cuda::max_memory_allocated() - base) / (1 << 20);
  }
  state.SetLabel(std::string(amp ? "bf16 autocast, " : "") + mode_label(mode));
}

// The loss of mlp_wide over 50 SGD steps under bfloat16 autocast (compiled) against float32 (eager):
// the largest relative difference of the two runs' losses.
void BM_mlp_wide_bf16_losses_vs_fp32(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  for (auto _ : state) {
    bench::StepTrainer low = make_trainer(bench::kMlpWide, 1, true);
    bench::StepTrainer full = make_trainer(bench::kMlpWide, 0);
    double worst = 0;
    for (int i = 0; i < 50; ++i) {
      const double a = low.step().item<double>(), b = full.step().item<double>();
      worst = std::max(worst, std::abs(a - b) / std::abs(b));
    }
    state.counters["max_rel_loss_diff"] = worst;
  }
}

void BM_mlp_small_step(benchmark::State& state) { run(state, bench::kMlpSmall, static_cast<int>(state.range(0))); }
void BM_mlp_wide_step(benchmark::State& state) { run(state, bench::kMlpWide, static_cast<int>(state.range(0))); }
void BM_mlp_wide_bf16_step(benchmark::State& state) {
  run(state, bench::kMlpWide, static_cast<int>(state.range(0)), true);
}
BENCHMARK(BM_mlp_small_step)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_mlp_wide_step)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_mlp_wide_bf16_step)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_mlp_wide_bf16_losses_vs_fp32)->Iterations(1)->Unit(benchmark::kMillisecond);

// From constructing the compiled functions to the first replay of the forward, backward and
// optimizer graphs (three steps: trace + warm-up, record + replay for the model; the optimizer's
// first step is eager, its second traced, its third recorded).
void BM_compile_latency_mlp_small_cudagraphs(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  for (auto _ : state) {
    bench::StepTrainer t = make_trainer(bench::kMlpSmall, 1);
    tg::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i) t.step();
    tg::cuda::synchronize();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}
BENCHMARK(BM_compile_latency_mlp_small_cudagraphs)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
