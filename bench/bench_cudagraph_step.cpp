// Training steps of the anchor workloads compiled with the cudagraphs backend: the forward graph,
// the backward graph and the optimizer graph (SGD lr 1e-3) replayed each step, beside the same step
// in eager mode, with peak device memory; and compile latency, from the first trace to the first
// replay of all three graphs.
//   mlp_small: batch 64, widths 128-256-256-10;  mlp_wide: batch 256, widths 1024-4096-4096-1024.
// Anchors (H200): PyTorch's whole step captured by hand into one CUDA graph 94 us (small), 1128 us
// (wide); torch.compile took 0.5-4.9 s to compile mlp_small.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "tapegraph.h"
#include "tensor/cuda_memory.h"
#include "tensor/cuda_runtime.h"

namespace {

struct Workload {
  int64_t batch;
  std::vector<int64_t> widths;
};
const Workload kSmall{64, {128, 256, 256, 10}};
const Workload kWide{256, {1024, 4096, 4096, 1024}};

// Model, data, optimizer and (optionally) compiled forward and optimizer step of one workload.
struct Trainer {
  std::shared_ptr<tg::nn::Sequential> model = std::make_shared<tg::nn::Sequential>();
  tg::Tensor x, y;
  std::unique_ptr<tg::optim::SGD> sgd;
  std::unique_ptr<tg::optim::CompiledStep> compiled_step;
  std::function<tg::Tensor(const tg::Tensor&, const tg::Tensor&)> loss;

  Trainer(const Workload& w, bool compiled) {
    tg::manual_seed(0);
    const tg::Device device = tg::cuda_device(0);
    for (size_t i = 0; i + 1 < w.widths.size(); ++i) {
      model->push_back(std::make_shared<tg::nn::Linear>(w.widths[i], w.widths[i + 1]));
      if (i + 2 < w.widths.size()) model->push_back(std::make_shared<tg::nn::ReLU>());
    }
    model->to(device);
    x = tg::randn({w.batch, w.widths.front()}, {.device = device});
    y = tg::randint(0, w.widths.back(), {w.batch}, {.device = device});
    sgd = std::make_unique<tg::optim::SGD>(model->parameters(), tg::optim::SGDOptions{.lr = 1e-3});
    auto eager_loss = [m = model](const tg::Tensor& xs, const tg::Tensor& ys) { return tg::cross_entropy((*m)(xs), ys); };
    if (compiled) {
      // The batch lives in fixed buffers (as in a hand-captured step, whose data loader refills
      // them), so the graphs read it in place instead of copying it in.
      tg::mark_static_address(x);
      tg::mark_static_address(y);
      auto f = std::make_shared<tg::Compiled<decltype(eager_loss)>>(eager_loss, tg::CompileOptions{.backend = "cudagraphs"});
      loss = [f](const tg::Tensor& xs, const tg::Tensor& ys) { return (*f)(xs, ys); };
      compiled_step = std::make_unique<tg::optim::CompiledStep>(*sgd);
    } else {
      loss = eager_loss;
    }
  }

  void step() {
    tg::Tensor l = loss(x, y);
    sgd->zero_grad();
    l.backward();
    if (compiled_step) {
      compiled_step->step();
    } else {
      sgd->step();
    }
  }
};

void run(benchmark::State& state, const Workload& w, bool compiled) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  tg::cuda::empty_cache();
  const int64_t base = tg::cuda::memory_allocated();
  tg::cuda::reset_peak_memory_stats();
  {
    Trainer t(w, compiled);
    for (int i = 0; i < 10; ++i) t.step();  // warm-up, recording
    tg::cuda::synchronize();
    for (auto _ : state) {
      t.step();
      tg::cuda::synchronize();
    }
    state.counters["peak_MiB"] = static_cast<double>(tg::cuda::max_memory_allocated() - base) / (1 << 20);
  }
  state.SetLabel(compiled ? "cudagraphs: forward + backward + optimizer graphs" : "eager");
}

void BM_mlp_small_step(benchmark::State& state) { run(state, kSmall, state.range(0) != 0); }
void BM_mlp_wide_step(benchmark::State& state) { run(state, kWide, state.range(0) != 0); }
BENCHMARK(BM_mlp_small_step)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_mlp_wide_step)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// From constructing the compiled functions to the first replay of the forward, backward and
// optimizer graphs (three steps: trace + warm-up, record + replay for the model; the optimizer's
// first step is eager, its second traced, its third recorded).
void BM_compile_latency_mlp_small_cudagraphs(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  for (auto _ : state) {
    Trainer t(kSmall, true);
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
