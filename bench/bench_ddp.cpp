// Data-parallel training steps (weak scaling: the per-GPU batch of each workload), with
// DistributedDataParallel, eager and compiled (forward, backward with its bucket all-reduces, and the
// optimizer as CUDA graphs). Run one process per GPU:
//   tgrun --nproc-per-node 1 bench_ddp    and    tgrun --nproc-per-node 2 bench_ddp
// and compare samples_per_s (all ranks together); rank 0 prints. One rank trains the plain model
// (no DistributedDataParallel), the baseline pt_ddp.py uses too. The anchors' pt_ddp.py measures
// PyTorch DDP on the same workloads.
#include <benchmark/benchmark.h>

#include <functional>
#include <memory>

#include "bench/support/resnet_tiny.h"
#include "bench/support/step_timing.h"
#include "bench/support/step_trainer.h"
#include "bench/support/workloads.h"
#include "distributed/ddp/ddp.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace {

using tg::Tensor;

// A model, wrapped in DistributedDataParallel when there are several ranks (one rank trains the
// plain model, as pt_ddp.py does), with its fixed local batch and SGD.
std::unique_ptr<bench::StepTrainer> make_trainer(std::shared_ptr<tg::nn::Module> model, Tensor x, Tensor y,
                                                 tg::optim::SGDOptions options, bool compiled) {
  if (tg::distributed::world_size() > 1) model = std::make_shared<tg::nn::DistributedDataParallel>(model);
  return std::make_unique<bench::StepTrainer>(bench::classifier_loss(model), model->parameters(), x, y, options,
                                               bench::StepTrainer::compiled_if(compiled));
}

constexpr int kStepsPerIteration = 10;

void run(benchmark::State& state, const std::function<std::unique_ptr<bench::StepTrainer>(tg::Device)>& make, int64_t batch) {
  auto group = tg::distributed::default_group();
  if (!group->device().is_cuda()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  auto trainer = make(group->device());
  for (int i = 0; i < 10; ++i) trainer->step();  // warm-up and recording
  tg::cuda::synchronize(group->device().index);
  group->barrier("bench");
  bench::time_steps(state, [&] { trainer->step(); }, kStepsPerIteration, group->device().index);
  state.counters["gpus"] = group->world_size();
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(batch * group->world_size() * kStepsPerIteration),
                                                       benchmark::Counter::kIsIterationInvariantRate);
}

std::unique_ptr<bench::StepTrainer> mlp_wide(tg::Device device, bool compiled) {
  bench::MlpSetup s(bench::kMlpWide, device);
  return make_trainer(s.model, s.x, s.y, tg::optim::SGDOptions{.lr = 1e-3}, compiled);
}

std::unique_ptr<bench::StepTrainer> resnet_tiny(tg::Device device, bool compiled) {
  tg::manual_seed(0);
  auto model = bench::resnet_tiny();
  model->to(device);
  Tensor x = tg::randn({128, 3, 32, 32}, {.device = device});
  Tensor y = tg::randint(0, 10, {128}, {.device = device});
  return make_trainer(model, x, y, tg::optim::SGDOptions{.lr = 0.01, .momentum = 0.9}, compiled);
}

void BM_ddp_mlp_wide(benchmark::State& state) {
  const bool compiled = state.range(0) != 0;
  run(state, [compiled](tg::Device d) { return mlp_wide(d, compiled); }, bench::kMlpWide.batch);
  state.SetLabel(compiled ? "cudagraphs" : "eager");
}
void BM_ddp_resnet_tiny(benchmark::State& state) {
  const bool compiled = state.range(0) != 0;
  run(state, [compiled](tg::Device d) { return resnet_tiny(d, compiled); }, 128);
  state.SetLabel(compiled ? "cudagraphs" : "eager");
}
// Fixed iteration counts: every rank must run the same number of steps (each step communicates).
BENCHMARK(BM_ddp_mlp_wide)->Arg(0)->Arg(1)->Iterations(20)->Repetitions(3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ddp_resnet_tiny)->Arg(0)->Arg(1)->Iterations(10)->Repetitions(3)->Unit(benchmark::kMillisecond)->UseRealTime();

// Ranks other than 0 run the same benchmarks silently.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  tg::distributed::init();
  benchmark::Initialize(&argc, argv);
  if (tg::distributed::rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  tg::distributed::destroy();
  return 0;
}
