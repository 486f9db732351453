// resnet_tiny training steps (the anchors' definition: batch 128 of 3x32x32; conv3x3(3->32)+BN+ReLU;
// two basic blocks at 32; a basic block 32->64 with stride 2 and a 1x1 conv+BN shortcut; one basic
// block at 64; global average pool; Linear(64, 10); cross-entropy; SGD lr 0.01 momentum 0.9; fp32,
// TF32 off), eager and with forward, backward and optimizer compiled as CUDA graphs, with peak
// device memory. Anchors (H200, same definition): PyTorch eager 4341 us, torch.compile
// reduce-overhead 3149 us per step.
#include <benchmark/benchmark.h>

#include <memory>
#include <optional>

#include "bench/support/resnet_tiny.h"
#include "bench/support/step_timing.h"
#include "bench/support/step_trainer.h"
#include "graphs/counters.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace {

using tg::Shape;
using tg::Tensor;
namespace nn = tg::nn;

using bench::resnet_tiny;

// resnet_tiny with a fixed batch and SGD (lr 0.01, momentum 0.9), stepped eagerly or as three CUDA graphs.
struct ResnetRun {
  std::shared_ptr<nn::Sequential> model;
  bench::StepTrainer trainer;
};

// Step modes: 0 eager, 1 compiled with the default partitioner, 2 compiled with min_cut.
std::optional<tg::CompileOptions> options_of(int mode) {
  std::optional<tg::CompileOptions> o = bench::StepTrainer::compiled_if(mode != 0);
  if (mode == 2) o->partitioner = "min_cut";
  return o;
}

ResnetRun make_run(int mode, tg::Device device) {
  tg::manual_seed(0);
  auto model = resnet_tiny();
  model->to(device);
  Tensor x = tg::randn({128, 3, 32, 32}, {.device = device});
  Tensor y = tg::randint(0, 10, {128}, {.device = device});
  return {model, bench::StepTrainer(bench::classifier_loss(model), model->parameters(), x, y,
                                    tg::optim::SGDOptions{.lr = 0.01, .momentum = 0.9},
                                    options_of(mode))};
}

// Largest difference between the BatchNorm running statistics of two models.
double buffer_max_diff(nn::Module& a, nn::Module& b) {
  const auto ba = a.named_buffers(), bb = b.named_buffers();
  double worst = 0;
  for (size_t i = 0; i < ba.size() && i < bb.size(); ++i) {
    if (!ba[i].second.is_floating_point()) continue;
    worst = std::max(worst, (ba[i].second - bb[i].second).abs().amax().item<double>());
  }
  return worst;
}

void run(benchmark::State& state, int mode) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  tg::cuda::empty_cache();
  tg::graphs::reset_global_counters();
  const int64_t base = tg::cuda::memory_allocated();
  tg::cuda::reset_peak_memory_stats();
  try {
    ResnetRun run = make_run(mode, tg::cuda_device(0));
    bench::StepTrainer& t = run.trainer;
    for (int i = 0; i < 10; ++i) t.step();  // warm-up, recording
    tg::cuda::synchronize();
    bench::time_steps(state, [&] { t.step(); }, 5);
    state.counters["peak_MiB"] = static_cast<double>(tg::cuda::max_memory_allocated() - base) / (1 << 20);
    const auto c = tg::graphs::global_counters();
    state.counters["graphs_recorded"] = c.graphs_captured;
    state.counters["rerecords"] = c.rerecords;
  } catch (const tg::Error& e) {  // reported as this benchmark's error; the others still run
    state.SkipWithError(e.what());
    return;
  }
  static const char* labels[] = {"eager", "cudagraphs: forward + backward + optimizer graphs",
                                 "cudagraphs, min_cut partitioner"};
  state.SetLabel(labels[mode]);
}

void BM_resnet_tiny_step(benchmark::State& state) { run(state, static_cast<int>(state.range(0))); }
BENCHMARK(BM_resnet_tiny_step)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// 20 steps eager and 20 compiled from the same seed: the BatchNorm buffers must agree, up to what
// two eager runs differ by (cuDNN's fastest weight-gradient kernels accumulate in varying order).
void BM_resnet_tiny_buffers_after_20_steps(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  for (auto _ : state) {
    try {
      ResnetRun eager = make_run(0, tg::cuda_device(0));
      ResnetRun eager_again = make_run(0, tg::cuda_device(0));
      ResnetRun compiled = make_run(1, tg::cuda_device(0));
      for (int i = 0; i < 20; ++i) {
        eager.trainer.step();
        eager_again.trainer.step();
        compiled.trainer.step();
      }
      state.counters["bn_buffer_max_abs_diff"] = buffer_max_diff(*eager.model, *compiled.model);
      state.counters["eager_vs_eager_max_abs_diff"] = buffer_max_diff(*eager.model, *eager_again.model);
    } catch (const tg::Error& e) {
      state.SkipWithError(e.what());
      break;
    }
  }
}
BENCHMARK(BM_resnet_tiny_buffers_after_20_steps)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
