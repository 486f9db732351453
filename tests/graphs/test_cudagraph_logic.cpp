// The cudagraphs backend's decision logic, device-independent: segment planning and staging on
// graphs traced from data-less CUDA tensors, and the executor's warm-up / record / replay / static
// input / stale-output rules with a recorder that re-runs the work on the CPU.
#include <gtest/gtest.h>

#include "graphs/capture/fake.h"
#include "graphs/compile.h"
#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/passes/stage_cpu_scalars.h"
#include "graphs/runtime/cudagraph_step.h"
#include "support/test_support.h"

namespace tg::graphs {
namespace {

const Device kCuda = cuda_device(0);

// Forward and backward graphs (staged) of fn traced on data-less tensors.
struct Planned {
  Partition part;
  Graph forward, backward;
  SegmentPlan fw_plan, bw_plan;
};

Planned plan(const GraphFn& fn, const TensorList& args) {
  Planned p;
  JointGraph joint = trace_joint(fn, args);
  p.part = partition(joint, PartitionerKind::Default);
  p.forward = stage_cpu_scalars(p.part.forward);
  p.backward = stage_cpu_scalars(p.part.backward);
  p.fw_plan = plan_segments(p.forward);
  p.bw_plan = plan_segments(p.backward);
  return p;
}

int eager_ops_except_staging(const Graph& g, const SegmentPlan& plan) {
  int n = 0;
  for (const Segment& s : plan.segments)
    if (!s.captured)
      for (int32_t i : s.nodes) n += g.nodes[static_cast<size_t>(i)].op->name() != "stage_to_device";
  return n;
}

TEST(CudagraphPlan, BasicIsOneSegmentEachWay) {
  auto fn = [](const TensorList& xs) { return TensorList{((xs[0] + xs[1]) * xs[1]).sum()}; };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda, true), fake_tensor({3}, kFloat32, kCuda)});
  ASSERT_EQ(p.fw_plan.segments.size(), 1u);
  EXPECT_TRUE(p.fw_plan.segments[0].captured);
  ASSERT_EQ(p.bw_plan.segments.size(), 1u);
  EXPECT_TRUE(p.bw_plan.segments[0].captured);
}

TEST(CudagraphPlan, DeviceToHostSplitsIntoGraphAndIsland) {
  auto fn = [](const TensorList& xs) { return TensorList{((xs[0] + xs[1]).cpu() * 3).sum()}; };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda, true), fake_tensor({3}, kFloat32, kCuda)});
  ASSERT_GE(p.fw_plan.segments.size(), 2u);
  EXPECT_TRUE(p.fw_plan.segments[0].captured);  // the add stays graphed
  EXPECT_FALSE(p.fw_plan.segments[1].captured);
  EXPECT_NE(p.fw_plan.segments[1].reason.find("cpu device"), std::string::npos) << p.fw_plan.segments[1].reason;
  EXPECT_GT(p.fw_plan.captured_nodes, 0);
}

TEST(CudagraphPlan, HostScalarInputIsStagedAndEveryOpCaptured) {
  auto fn = [](const TensorList& xs) { return TensorList{((xs[0] + xs[1]) * 3).sum()}; };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda, true), fake_tensor({}, kFloat32, kCPU)});
  EXPECT_EQ(eager_ops_except_staging(p.forward, p.fw_plan), 0) << p.forward.to_text();
  EXPECT_EQ(eager_ops_except_staging(p.backward, p.bw_plan), 0) << p.backward.to_text();
  EXPECT_EQ(p.forward.op_counts()["stage_to_device"], 1);
}

TEST(CudagraphPlan, FoldedCpuConstantIsStagedAndEveryOpCaptured) {
  auto fn = [](const TensorList& xs) {
    Tensor c = scalar_tensor(1.0f);
    c.add_(2);
    return TensorList{(xs[0] * xs[1] * 0 + c).sum()};
  };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda, true), fake_tensor({3}, kFloat32, kCuda)});
  EXPECT_EQ(eager_ops_except_staging(p.forward, p.fw_plan), 0) << p.forward.to_text();
}

TEST(CudagraphPlan, FactoryAndResizeAreCaptured) {
  auto fn = [](const TensorList& xs) {
    Tensor z = zeros({3}, {.device = kCuda});
    z.add_(1);
    Tensor r = xs[0].clone();
    r.resize_({20});
    r.fill_(2);
    return TensorList{(z * xs[1]).sum() + r.sum()};
  };
  Planned p = plan(fn, {fake_tensor({0}, kFloat32, kCuda), fake_tensor({3}, kFloat32, kCuda, true)});
  EXPECT_EQ(p.fw_plan.eager_nodes, 0) << p.forward.to_text();
  EXPECT_EQ(p.forward.op_counts()["resize"], 1) << p.forward.to_text();
}

TEST(CudagraphPlan, RandomOpsAreCapturedOnCudaOnly) {
  auto fn = [](const TensorList& xs) { return TensorList{xs[0] * rand_like(xs[0])}; };
  Planned p = plan(fn, {fake_tensor({8}, kFloat32, kCuda)});
  EXPECT_EQ(p.fw_plan.eager_nodes, 0) << p.forward.to_text();
  EXPECT_TRUE(capture_blocker(p.forward, p.forward.nodes[0], DeviceType::CPU).has_value());
}

TEST(CudagraphPlan, HostDataConstantRunsFirstAndTheRestIsOneGraph) {
  auto fn = [](const TensorList& xs) {
    Tensor h = xs[0] * 2;
    Tensor mask = from_vector(std::vector<float>{1, 0, 1}, {3}, {.device = kCuda});
    return TensorList{(h * mask).sum()};
  };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda, true)});
  ASSERT_EQ(p.fw_plan.segments.size(), 2u) << p.forward.to_text();
  EXPECT_FALSE(p.fw_plan.segments[0].captured);
  EXPECT_NE(p.fw_plan.segments[0].reason.find("host data"), std::string::npos) << p.fw_plan.segments[0].reason;
  EXPECT_TRUE(p.fw_plan.segments[1].captured);
  EXPECT_EQ(p.fw_plan.eager_nodes, 1);
}

// A from_vector constant on the device inside a compiled function: copied before the graph (its
// synchronizing copy from host memory would break the capture), the rest replayed.
TEST(CudagraphHostData, ConstantFromHostDataMatchesEager) {
  TG_REQUIRE_CUDA();
  auto fn = [](const Tensor& x) {
    Tensor mask = from_vector(std::vector<float>{1, 0, 1}, {3}, {.device = x.device()});
    return ((x * 2) * mask).sum();
  };
  auto compiled = compile(fn, {.backend = "cudagraphs"});
  for (int call = 0; call < 3; ++call) {
    Tensor x = randn({3}, {.device = cuda_device(0)});
    testing::expect_close(compiled(x), fn(x), 1e-6, 1e-6);
  }
}

// ---- executor decision logic, run on the CPU --------------------------------------------------

struct CpuExecutor {
  Graph graph;
  CompileCounters counters;
  std::unique_ptr<CudaGraphExecutor> exec;

  CpuExecutor(const GraphFn& fn, const TensorList& example, std::vector<bool> static_inputs, int max_instances = 3) {
    JointGraph joint = trace_joint(fn, example);
    graph = partition(joint, PartitionerKind::Default).forward;
    exec = std::make_unique<CudaGraphExecutor>(graph, std::move(static_inputs), rerun_graph_recorder(), &counters,
                                               "forward", /*starts_step=*/false, max_instances, DeviceType::CPU);
  }
};

TEST(CudagraphExecutor, WarmsUpThenRecordsThenReplays) {
  CpuExecutor e([](const TensorList& xs) { return TensorList{(xs[0] * 2 + 1).exp()}; },
                {testing::random_tensor({4}, kFloat32)}, {false});
  for (int call = 1; call <= 4; ++call) {
    mark_step_begin();
    Tensor x = testing::random_tensor({4}, kFloat32);
    testing::expect_close(e.exec->run({x})[0], (x * 2 + 1).exp());
    EXPECT_EQ(e.counters.warmups, 1);
    EXPECT_EQ(e.counters.graphs_captured, call >= 2 ? 1 : 0);
    EXPECT_EQ(e.counters.replays, call - 1);
  }
}

TEST(CudagraphExecutor, StaticInputUsedInPlaceAndNewAddressRerecords) {
  Tensor w = testing::random_tensor({4}, kFloat32);
  CpuExecutor e([](const TensorList& xs) { return TensorList{xs[0] * xs[1]}; }, {w, w.clone()}, {true, false}, 2);
  Tensor x = testing::random_tensor({4}, kFloat32);
  for (int i = 0; i < 3; ++i) {
    mark_step_begin();
    w.mul_(2);  // same address, new values: replays must see them
    testing::expect_close(e.exec->run({w, x})[0], w * x);
  }
  EXPECT_EQ(e.counters.graphs_captured, 1);
  Tensor w2 = w.clone();  // a new address for the static input
  mark_step_begin();
  testing::expect_close(e.exec->run({w2, x})[0], w2 * x);
  EXPECT_EQ(e.counters.rerecords, 1);
  Tensor w3 = w.clone();
  mark_step_begin();
  testing::expect_close(e.exec->run({w3, x})[0], w3 * x);  // past the limit: eager
  EXPECT_EQ(e.counters.graphs_captured, 2);
  EXPECT_EQ(e.counters.cudagraph_skips.size(), 1u);
}

TEST(CudagraphExecutor, OutputOfAnEarlierStepRaisesOnUse) {
  CpuExecutor e([](const TensorList& xs) { return TensorList{xs[0] + 1}; }, {testing::random_tensor({3}, kFloat32)},
                {false});
  Tensor x = testing::random_tensor({3}, kFloat32);
  mark_step_begin();
  e.exec->run({x});  // warm-up
  mark_step_begin();
  Tensor first = e.exec->run({x})[0];
  mark_step_begin();
  Tensor second = e.exec->run({x * 10})[0];
  EXPECT_THROW_MSG(first.to_vector<float>(), "mark_step_begin");
  EXPECT_THROW_MSG(first + 1, "clone");
  testing::expect_close(second, x * 10 + 1);
}

TEST(CudagraphExecutor, LiveOutputOfTheSameStepIsNeverOverwritten) {
  CpuExecutor e([](const TensorList& xs) { return TensorList{xs[0] * 3}; }, {testing::random_tensor({3}, kFloat32)},
                {false});
  Tensor a = testing::random_tensor({3}, kFloat32), b = testing::random_tensor({3}, kFloat32);
  mark_step_begin();
  e.exec->run({a});  // warm-up
  mark_step_begin();
  Tensor ra = e.exec->run({a})[0];
  Tensor rb = e.exec->run({b})[0];  // same step, ra alive: another recording
  testing::expect_close(ra, a * 3);
  testing::expect_close(rb, b * 3);
  EXPECT_EQ(e.counters.graphs_captured, 2);
}

TEST(CudagraphCompile, BackendWithoutCudaTensorsRunsTheInterpreter) {
  auto f = compile([](const Tensor& x) { return (x * 2).sum(); }, CompileOptions{.backend = "cudagraphs"});
  Tensor x = testing::random_tensor({3}, kFloat32, true);
  Tensor y = f(x);
  y.backward();
  testing::expect_close(x.grad(), full({3}, 2.0f));
  EXPECT_EQ(f.counters().graphs_captured, 0);
}

}  // namespace
}  // namespace tg::graphs
