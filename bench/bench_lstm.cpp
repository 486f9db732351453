// lstm_seed: the seed's test_LSTM model, LSTM(64, 64, num_layers=2, bidirectional=True), input
// (seq 92, batch 4, 64), MSE against a fixed (92, 4, 128) target, SGD lr 1e-3; one training step,
// eager and compiled (cudagraphs: forward, backward and optimizer graphs), with the compile latency.
#include <benchmark/benchmark.h>

#include <chrono>

#include "bench/support/step_trainer.h"
#include "bench/support/step_timing.h"
#include "tensor/cuda_runtime.h"

namespace {

std::unique_ptr<bench::StepTrainer> make_lstm_seed(bool compiled, std::shared_ptr<tg::nn::LSTM>& keep) {
  tg::manual_seed(0);
  const tg::Device dev = tg::cuda_device(0);
  keep = std::make_shared<tg::nn::LSTM>(64, 64, tg::nn::RnnOptions{.num_layers = 2, .bidirectional = true});
  keep->to(dev);
  tg::Tensor x = tg::randn({92, 4, 64}, {.dtype = tg::kFloat32, .device = dev});
  tg::Tensor y = tg::randn({92, 4, 128}, {.dtype = tg::kFloat32, .device = dev});
  auto m = keep;
  auto loss = [m](const tg::Tensor& a, const tg::Tensor& b) { return tg::mse_loss(m->forward(a), b); };
  return std::make_unique<bench::StepTrainer>(loss, keep->parameters(), x, y, tg::optim::SGDOptions{.lr = 1e-3},
                                               bench::StepTrainer::compiled_if(compiled));
}

void BM_lstm_seed_step(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const bool compiled = state.range(0) != 0;
  std::shared_ptr<tg::nn::LSTM> model;
  auto t = make_lstm_seed(compiled, model);
  for (int i = 0; i < 5; ++i) t->step();  // warm-up, recording
  tg::cuda::synchronize();
  bench::time_steps(state, [&] { t->step(); }, 10);
  state.SetLabel(compiled ? "cudagraphs: forward + backward + optimizer graphs" : "eager");
}
BENCHMARK(BM_lstm_seed_step)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// From building the compiled step to the end of its third step (trace, record, first replays).
void BM_lstm_seed_compile_latency(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    std::shared_ptr<tg::nn::LSTM> model;
    auto t = make_lstm_seed(true, model);
    for (int i = 0; i < 3; ++i) t->step();
    tg::cuda::synchronize();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}
BENCHMARK(BM_lstm_seed_compile_latency)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
