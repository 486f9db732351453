// Graphs that bend instead of breaking: 1,000 compiled mlp_wide training steps (cudagraphs loss and
// CompiledStep SGD) fed by a static-buffer DataLoader, with the loader made anew every epoch (50
// steps) and the parameters reloaded by load_state_dict every 100 steps, against the same loop with
// one loader and no reloads. Reports the mean step time and the recordings, updates and
// re-recordings of the graphs: a moved loader buffer updates the recorded graphs in place.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "bench/support/workloads.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace {

constexpr int kSteps = 1000;
constexpr int kBatchesPerEpoch = 50;

void BM_mlp_wide_loader_churn(benchmark::State& state) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const bool churn = state.range(0) != 0;
  const tg::Device dev = tg::cuda_device(0);
  bench::MlpSetup setup(bench::kMlpWide, dev);
  const int64_t rows = bench::kMlpWide.batch * kBatchesPerEpoch;
  const tg::data::TensorDataset dataset({tg::randn({rows, bench::kMlpWide.widths.front()}),
                                         tg::randint(0, bench::kMlpWide.widths.back(), {rows}, {.dtype = tg::kInt64})});
  const tg::data::DataLoaderOptions lo{.batch_size = bench::kMlpWide.batch, .shuffle = true, .drop_last = true,
                                       .device = dev, .static_buffers = true};
  setup.sgd->set_capturable(true);
  auto loss = tg::compile([&setup](const tg::Tensor& x, const tg::Tensor& y) { return setup.loss(x, y); },
                          {.backend = "cudagraphs"});
  tg::optim::CompiledStep update(*setup.sgd, {.backend = "cudagraphs"});
  const auto snapshot = setup.model->state_dict();
  std::map<std::string, tg::Tensor> saved;
  for (const auto& [k, t] : snapshot) saved[k] = t.clone();
  double seconds = 0;
  for (auto _ : state) {
    auto loader = std::make_unique<tg::data::DataLoader>(dataset, lo);
    tg::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    int step = 0;
    for (int64_t epoch = 0; step < kSteps; ++epoch) {
      if (churn && epoch > 0) loader = std::make_unique<tg::data::DataLoader>(dataset, lo);
      for (tg::TensorList& batch : *loader) {
        if (churn && step > 0 && step % 100 == 0) setup.model->load_state_dict(saved);
        tg::Tensor l = loss(batch[0], batch[1]);
        setup.sgd->zero_grad();
        l.backward();
        update.step();
        if (++step == kSteps) break;
      }
    }
    tg::cuda::synchronize();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const auto& f = loss.counters();
  const auto& o = update.counters();
  state.counters["us_per_step"] = seconds * 1e6 / (static_cast<double>(state.iterations()) * kSteps);
  state.counters["recordings"] = f.graphs_captured + o.graphs_captured;
  state.counters["updates"] = f.graph_updates + o.graph_updates;
  state.counters["rerecords"] = f.rerecords + o.rerecords;
  state.counters["eager_fallbacks"] = f.eager_fallbacks + o.eager_fallbacks;
  state.SetLabel(churn ? "new loader every epoch, load_state_dict every 100 steps" : "one loader");
}
BENCHMARK(BM_mlp_wide_loader_churn)->Arg(0)->Arg(1)->Iterations(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
