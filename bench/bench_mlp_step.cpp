// One eager training step (forward, cross-entropy, zero_grad, backward, SGD lr 1e-3) of the anchor
// workloads, in us/step:
//   mlp_small: batch 64, widths 128-256-256-10;  mlp_wide: batch 256, widths 1024-4096-4096-1024.
// Anchors: PyTorch eager on an H200 763-828 us (small) and 1083 us (wide); libtorch C++ eager 639 us
// (small); libtorch 1.13 on one CPU thread 5431 us (small). The CPU kernels here run on one thread.
#include <benchmark/benchmark.h>

#include <memory>
#include <optional>
#include <vector>

#include "nn/nn.h"
#include "optim/optim.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace {

struct Workload {
  int64_t batch;
  std::vector<int64_t> widths;
};

const Workload kSmall{64, {128, 256, 256, 10}};
const Workload kWide{256, {1024, 4096, 4096, 1024}};

// Model, data and optimizer of one workload, built on `device` with a fixed seed.
struct Setup {
  std::shared_ptr<tg::nn::Sequential> model = std::make_shared<tg::nn::Sequential>();
  tg::Tensor x, y;
  std::unique_ptr<tg::optim::SGD> sgd;

  Setup(const Workload& w, tg::Device device) {
    tg::manual_seed(0);
    for (size_t i = 0; i + 1 < w.widths.size(); ++i) {
      model->push_back(std::make_shared<tg::nn::Linear>(w.widths[i], w.widths[i + 1]));
      if (i + 2 < w.widths.size()) model->push_back(std::make_shared<tg::nn::ReLU>());
    }
    model->to(device);
    x = tg::randn({w.batch, w.widths.front()}, {.device = device});
    y = tg::randint(0, w.widths.back(), {w.batch}, {.dtype = tg::kInt64, .device = device});
    sgd = std::make_unique<tg::optim::SGD>(model->parameters(), tg::optim::SGDOptions{.lr = 1e-3});
  }

  void step() {
    tg::Tensor loss = tg::cross_entropy((*model)(x), y);
    sgd->zero_grad();
    loss.backward();
    sgd->step();
  }
};

void run(benchmark::State& state, const Workload& w, bool cuda) {
  if (cuda && !tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const tg::Device device = cuda ? tg::cuda_device(0) : tg::kCPU;
  Setup s(w, device);
  for (int i = 0; i < 10; ++i) s.step();  // warm-up: allocator caches, cuBLAS handles and workspaces
  if (cuda) tg::cuda::synchronize(device.index);
  for (auto _ : state) {
    s.step();
    // Each timed step includes finishing its GPU work.
    if (cuda) tg::cuda::synchronize(device.index);
  }
}

void BM_mlp_small_step_cpu(benchmark::State& state) { run(state, kSmall, false); }
void BM_mlp_small_step_cuda(benchmark::State& state) { run(state, kSmall, true); }
void BM_mlp_wide_step_cuda(benchmark::State& state) { run(state, kWide, true); }

BENCHMARK(BM_mlp_small_step_cpu)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_mlp_small_step_cuda)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_mlp_wide_step_cuda)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
