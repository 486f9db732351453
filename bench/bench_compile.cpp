// compile() on the anchor workload mlp_small (batch 64, widths 128-256-256-10, ReLU, cross-entropy,
// SGD lr 1e-3): how long tracing + functionalization + partitioning takes, and a training step run
// through the aot_eager interpreter beside the same step in eager mode (CPU, one thread).
// Anchor: torch.compile took 0.5-4.9 s to compile mlp_small on an H200 machine.
#include <benchmark/benchmark.h>

#include <memory>

#include "graphs/compile.h"
#include "bench/support/workloads.h"
#include "tapegraph.h"

namespace {

// mlp_small on the CPU.
struct MlpSmall : bench::MlpSetup {
  MlpSmall() : bench::MlpSetup(bench::kMlpSmall, tg::kCPU) {}
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
