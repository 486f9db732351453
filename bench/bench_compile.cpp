// compile() on the anchor workload mlp_small (batch 64, widths 128-256-256-10, ReLU, cross-entropy,
// SGD lr 1e-3): how long tracing + functionalization + partitioning takes, and a training step run
// through the aot_eager interpreter beside the same step in eager mode (CPU, one thread).
// Anchor: torch.compile took 0.5-4.9 s to compile mlp_small on an H200 machine.
#include <benchmark/benchmark.h>

#include <memory>

#include "graphs/compile.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tapegraph.h"

namespace {

// The mlp_small model, data and optimizer with a fixed seed.
struct MlpSmall {
  std::shared_ptr<tg::nn::Sequential> model = std::make_shared<tg::nn::Sequential>();
  tg::Tensor x, y;
  std::unique_ptr<tg::optim::SGD> sgd;

  MlpSmall() {
    tg::manual_seed(0);
    const int64_t widths[] = {128, 256, 256, 10};
    for (int i = 0; i < 3; ++i) {
      model->push_back(std::make_shared<tg::nn::Linear>(widths[i], widths[i + 1]));
      if (i < 2) model->push_back(std::make_shared<tg::nn::ReLU>());
    }
    x = tg::randn({64, 128});
    y = tg::randint(0, 10, {64});
    sgd = std::make_unique<tg::optim::SGD>(model->parameters(), tg::optim::SGDOptions{.lr = 1e-3});
  }
  tg::Tensor loss(const tg::Tensor& xs, const tg::Tensor& ys) { return tg::cross_entropy((*model)(xs), ys); }
};

void BM_CompileLatency_MlpSmall(benchmark::State& state) {
  MlpSmall m;
  tg::graphs::GraphFn fn = [&m](const tg::TensorList& xs) { return tg::TensorList{m.loss(xs[0], xs[1])}; };
  const auto kind = state.range(0) ? tg::graphs::PartitionerKind::MinCut : tg::graphs::PartitionerKind::Default;
  size_t nodes = 0;
  int64_t saved = 0;
  for (auto _ : state) {
    tg::graphs::JointGraph joint = tg::graphs::trace_joint(fn, {m.x, m.y});
    tg::graphs::Partition part = tg::graphs::partition(joint, kind);
    nodes = joint.graph.nodes.size();
    saved = part.saved_bytes;
    benchmark::DoNotOptimize(part);
  }
  state.counters["joint_nodes"] = static_cast<double>(nodes);
  state.counters["saved_bytes"] = static_cast<double>(saved);
  state.SetLabel(state.range(0) ? "min_cut" : "default");
}
BENCHMARK(BM_CompileLatency_MlpSmall)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_TrainStep_MlpSmall_Cpu(benchmark::State& state) {
  MlpSmall m;
  const bool compiled = state.range(0) != 0;
  auto step_fn = tg::compile([&m](const tg::Tensor& xs, const tg::Tensor& ys) { return m.loss(xs, ys); },
                             tg::CompileOptions{.backend = "aot_eager"});
  auto step = [&] {
    tg::Tensor loss = compiled ? step_fn(m.x, m.y) : m.loss(m.x, m.y);
    m.sgd->zero_grad();
    loss.backward();
    m.sgd->step();
  };
  for (int i = 0; i < 5; ++i) step();
  for (auto _ : state) step();
  state.SetLabel(compiled ? "aot_eager interpreter" : "eager");
}
BENCHMARK(BM_TrainStep_MlpSmall_Cpu)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
