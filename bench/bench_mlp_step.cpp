// One eager training step (forward, cross-entropy, zero_grad, backward, SGD lr 1e-3) of the anchor
// workloads, in us/step:
//   mlp_small: batch 64, widths 128-256-256-10;  mlp_wide: batch 256, widths 1024-4096-4096-1024.
// Anchors: PyTorch eager on an H200 763-828 us (small) and 1083 us (wide); libtorch C++ eager 639 us
// (small); libtorch 1.13 on one CPU thread 5431 us (small). The CPU kernels here run on one thread.
#include <benchmark/benchmark.h>

#include <memory>
#include <optional>
#include <vector>

#include "bench/support/workloads.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace {

using bench::Workload;

// One eager training step: forward, loss, zero_grad, backward, SGD.
void step(bench::MlpSetup& s) {
  tg::Tensor loss = s.loss(s.x, s.y);
  s.sgd->zero_grad();
  loss.backward();
  s.sgd->step();
}

void run(benchmark::State& state, const Workload& w, bool cuda) {
  if (cuda && !tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const tg::Device device = cuda ? tg::cuda_device(0) : tg::kCPU;
  bench::MlpSetup s(w, device);
  for (int i = 0; i < 10; ++i) step(s);  // warm-up: allocator caches, cuBLAS handles and workspaces
  if (cuda) tg::cuda::synchronize(device.index);
  for (auto _ : state) {
    step(s);
    // Each timed step includes finishing its GPU work.
    if (cuda) tg::cuda::synchronize(device.index);
  }
}

void BM_mlp_small_step_cpu(benchmark::State& state) { run(state, bench::kMlpSmall, false); }
void BM_mlp_small_step_cuda(benchmark::State& state) { run(state, bench::kMlpSmall, true); }
void BM_mlp_wide_step_cuda(benchmark::State& state) { run(state, bench::kMlpWide, true); }

BENCHMARK(BM_mlp_small_step_cpu)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_mlp_small_step_cuda)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_mlp_wide_step_cuda)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
