// Strict capture (CompileOptions::strict_capture): every kind of work outside CUDA graphs raises,
// naming the op and the reason, while training steps of the usual shapes pass; and the
// TG_LOGS=capture report. The plan checks run on graphs traced from data-less CUDA tensors and the
// executor's checks with a recorder that re-runs the work on the CPU, so both run without a GPU;
// the end-to-end tests need one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "graphs/capture/fake.h"
#include "graphs/compile.h"
#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/cudagraphs/strict_capture.h"
#include "graphs/passes/elementwise_fusion.h"
#include "graphs/passes/epilogue_fusion.h"
#include "graphs/passes/schedule_collectives.h"
#include "graphs/passes/stage_cpu_scalars.h"
#include "graphs/runtime/cudagraph_step.h"
#include "support/test_support.h"
#include "tapegraph.h"

namespace tg::graphs {
namespace {

const Device kCuda = cuda_device(0);

// Runs `stmt` and expects a tg::Error whose message holds every one of `parts`.
template <typename Fn>
void expect_error_with(Fn&& stmt, std::initializer_list<std::string> parts) {
  try {
    stmt();
    ADD_FAILURE() << "expected a strict capture error, nothing thrown";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
  }
}

// The forward and backward graphs of fn on data-less inputs, optimized and staged as compile()
// builds them for the cudagraphs backend, with their segment plans.
struct Planned {
  Graph forward, backward;
  SegmentPlan fw_plan, bw_plan;
};

Planned plan(const GraphFn& fn, const TensorList& args, bool optimized = true) {
  JointGraph joint = trace_joint(fn, args);
  Partition part = partition(joint, PartitionerKind::Default);
  if (optimized) {
    // The rewrites of the compile pipeline with the default options (build_entry).
    fuse_epilogues(part, joint, /*gradients=*/false);
    fuse_elementwise(part);
    schedule_collectives_early(part.forward);
    schedule_collectives_early(part.backward);
  }
  Planned p;
  p.forward = stage_cpu_scalars(part.forward);
  p.backward = stage_cpu_scalars(part.backward);
  p.fw_plan = plan_segments(p.forward);
  p.bw_plan = plan_segments(p.backward);
  return p;
}

void require_both(const Planned& p) {
  require_full_capture(p.forward, p.fw_plan, "forward graph");
  require_full_capture(p.backward, p.bw_plan, "backward graph");
}

// ---- islands in the plan ----------------------------------------------------------------------

TEST(StrictCapturePlan, DeviceToHostCopyRaisesNamingTheCopy) {
  auto fn = [](const TensorList& xs) { return TensorList{((xs[0] + xs[1]).cpu() * 3).sum()}; };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda, true), fake_tensor({3}, kFloat32, kCuda)});
  expect_error_with([&] { require_full_capture(p.forward, p.fw_plan, "forward graph"); },
                    {"[cudagraphs] strict capture: forward graph: node", "(_to_copy) would run outside CUDA graphs",
                     "cpu device (_to_copy)", "a device-to-host copy"});
}

TEST(StrictCapturePlan, CpuOpRaisesNamingTheOp) {
  // exp of a CPU tensor, then copied to the device: the exp computes on the CPU, between graphs.
  auto fn = [](const TensorList& xs) { return TensorList{(xs[0] * xs[1].exp().to(kCuda)).sum()}; };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda, true), fake_tensor({3}, kFloat32, kCPU)});
  expect_error_with([&] { require_full_capture(p.forward, p.fw_plan, "forward graph"); },
                    {"(exp) would run outside CUDA graphs: cpu device (exp), computes outside the capture device",
                     "(_to_copy) would run outside CUDA graphs", "a host-to-device copy"});
}

// A copy with the given flags: "host_read" reads its input on the host (as nonzero or item would),
// so it is never captured; "plain_copy" is.
template <uint32_t Flags>
struct CopyWithFlags final : Op {
  const OpSchema& schema() const override {
    static const OpSchema s{Flags ? "host_read" : "plain_copy", Flags | kNonDifferentiable};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    return single_output(contiguous_meta(in[0].sizes(), in[0].dtype(), in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override { out[0].copy_(in[0]); }
};

TEST(StrictCapturePlan, UncapturableOpRaisesNamingTheOp) {
  Graph g;
  const ValueId x = g.add_value(contiguous_meta({4}, kFloat32, kCuda), "x");
  g.add_input(x, InputKind::Argument, 0);
  const ValueId y = g.add_value(contiguous_meta({4}, kFloat32, kCuda), "y");
  g.add_node(std::make_shared<const CopyWithFlags<0>>(), {x}, {y}, Phase::Forward, 0);
  const ValueId z = g.add_value(contiguous_meta({4}, kFloat32, kCuda), "z");
  g.add_node(std::make_shared<const CopyWithFlags<kHostSync>>(), {y}, {z}, Phase::Forward, 1);
  g.outputs = {z};
  const SegmentPlan plan = plan_segments(g);
  ASSERT_EQ(plan.eager_nodes, 1);
  expect_error_with([&] { require_full_capture(g, plan, "function 7 forward graph"); },
                    {"strict capture: function 7 forward graph: node 1 (host_read) would run outside CUDA graphs: "
                     "incompatible op (host_read), reads a device value on the host"});
}

TEST(StrictCapturePlan, HostTransfersRunFirstAndAreAllowed) {
  // A CPU scalar argument (staged to the device), a CPU argument moved to the device and a constant
  // from host data, all read midway: copied in front of one graph, and allowed.
  auto fn = [](const TensorList& xs) {
    Tensor h = (xs[0] * 2).exp();
    Tensor mask = from_vector(std::vector<float>{1, 0, 1}, {3}, {.device = kCuda});
    return TensorList{(h * mask * xs[1] + xs[2].to(kCuda)).sum()};
  };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda, true), fake_tensor({}, kFloat32, kCPU),
                        fake_tensor({3}, kFloat32, kCPU)});
  ASSERT_EQ(p.fw_plan.segments.size(), 2u) << p.forward.to_text();
  EXPECT_FALSE(p.fw_plan.segments[0].captured);
  EXPECT_EQ(p.fw_plan.eager_nodes, 3) << p.forward.to_text();
  for (int32_t n : p.fw_plan.segments[0].nodes)
    EXPECT_TRUE(is_host_transfer(p.forward, p.forward.nodes[static_cast<size_t>(n)]));
  EXPECT_NO_THROW(require_both(p));
}

TEST(StrictCapturePlan, CopyOfAComputedCpuValueIsNoHostTransfer) {
  // The copy reads a value computed on the CPU inside the function: it runs after that computation.
  auto fn = [](const TensorList& xs) { return TensorList{(xs[0] * (xs[1] * 2).to(kCuda)).sum()}; };
  Planned p = plan(fn, {fake_tensor({3}, kFloat32, kCuda), fake_tensor({3}, kFloat32, kCPU)}, false);
  for (const GraphNode& node : p.forward.nodes)
    if (node.op->name() == "_to_copy") EXPECT_FALSE(is_host_transfer(p.forward, node));
  expect_error_with([&] { require_full_capture(p.forward, p.fw_plan, "forward graph"); },
                    {"(mul) would run outside CUDA graphs: cpu device (mul)",
                     "(_to_copy) would run outside CUDA graphs: cpu device (_to_copy), a host-to-device copy"});
}

// ---- the usual training steps pass ------------------------------------------------------------

TEST(StrictCapturePlan, MlpStepIsFullyCaptured) {
  // mlp_small's loss: Linear-ReLU-Linear-ReLU-Linear, cross-entropy.
  auto fn = [](const TensorList& xs) {
    Tensor h = relu(linear(xs[0], xs[2], xs[3]));
    h = relu(linear(h, xs[4], xs[5]));
    return TensorList{cross_entropy(linear(h, xs[6], xs[7]), xs[1])};
  };
  auto param = [](Shape s) { return fake_tensor(s, kFloat32, kCuda, true); };
  Planned p = plan(fn, {fake_tensor({64, 128}, kFloat32, kCuda), fake_tensor({64}, kInt64, kCuda), param({256, 128}),
                        param({256}), param({256, 256}), param({256}), param({10, 256}), param({10})});
  EXPECT_GT(p.fw_plan.captured_nodes, 0);
  EXPECT_NO_THROW(require_both(p));
}

TEST(StrictCapturePlan, TransformerStepIsFullyCaptured) {
  // Token and position embeddings, a pre-norm block (causal attention, GELU MLP), a final norm, the
  // LM head and cross-entropy on the next token, with a learning-rate-like CPU scalar.
  constexpr int64_t B = 2, T = 8, D = 16, H = 2, V = 32;
  auto fn = [](const TensorList& xs) {
    const Tensor& tokens = xs[0];
    Tensor pos = arange(T, {.dtype = kInt64, .device = tokens.device()});
    Tensor h = embedding(xs[2], tokens) + embedding(xs[3], pos);
    Tensor n = layer_norm(h, {D}, xs[4], xs[5]);
    Tensor qkv = linear(n, xs[6], xs[7]).reshape({B, T, 3, H, D / H}).permute({2, 0, 3, 1, 4});
    Tensor a = scaled_dot_product_attention(qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2), Tensor(), 0.0, true);
    h = h + linear(a.transpose(1, 2).reshape({B, T, D}), xs[8]);
    h = h + linear(gelu(linear(layer_norm(h, {D}), xs[9])), xs[10]);
    Tensor logits = linear(layer_norm(h, {D}), xs[11]);
    return TensorList{cross_entropy(logits.reshape({B * T, V}), xs[1].reshape({B * T})) * xs[12]};
  };
  auto param = [](Shape s) { return fake_tensor(s, kFloat32, kCuda, true); };
  Planned p = plan(fn, {fake_tensor({B, T}, kInt64, kCuda), fake_tensor({B, T}, kInt64, kCuda), param({V, D}),
                        param({T, D}), param({D}), param({D}), param({3 * D, D}), param({3 * D}), param({D, D}),
                        param({4 * D, D}), param({D, 4 * D}), param({V, D}), fake_tensor({}, kFloat32, kCPU)});
  EXPECT_GT(p.bw_plan.captured_nodes, 0);
  EXPECT_EQ(p.forward.op_counts()["stage_to_device"], 1) << p.forward.to_text();  // the CPU scalar, a host transfer
  EXPECT_EQ(p.fw_plan.segments.size(), 2u);  // the staging in front, one graph
  EXPECT_NO_THROW(require_both(p));
}

// ---- calls that would run eagerly -------------------------------------------------------------

const CompileOptions kStrict{.backend = "cudagraphs", .strict_capture = true};

TEST(StrictCaptureCompile, ItemRaisesNamingItem) {
  auto f = compile([](const Tensor& x) { return x * x.sum().item<float>(); }, kStrict);
  try {
    f(testing::random_tensor({3}, kFloat32));
    ADD_FAILURE() << "expected a strict capture error";
  } catch (const DataDependentError& e) {  // still a data-dependent error
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[cudagraphs] strict capture: function "), std::string::npos) << msg;
    EXPECT_NE(msg.find("the call would run eagerly: data-dependent operation while tracing: [item]"), std::string::npos)
        << msg;
  }
  EXPECT_EQ(f.counters().eager_fallbacks, 0);
}

TEST(StrictCaptureCompile, UntraceableCallRaises) {
  // Two views of one tensor that require grad: traced only by running the call eagerly.
  auto f = compile([](const Tensor& a, const Tensor& b) { return (a * b).sum(); }, kStrict);
  Tensor base = testing::random_tensor({4}, kFloat32, true);
  expect_error_with([&] { f(base.narrow(0, 0, 2), base.narrow(0, 2, 2)); },
                    {"strict capture: function ", "the call would run eagerly: untraceable: arguments 0 and 1 are "
                                                  "different tensors over the same memory and require grad"});
  EXPECT_EQ(f.counters().eager_fallbacks, 0);
}

TEST(StrictCaptureCompile, NeedsTheCudagraphsBackend) {
  auto f = compile([](const Tensor& x) { return x * 2; }, CompileOptions{.strict_capture = true});
  EXPECT_THROW_MSG(f(testing::random_tensor({3}, kFloat32)),
                   "strict_capture needs the 'cudagraphs' backend, got backend 'aot_eager'");
}

TEST(StrictCaptureCompile, GraphWithoutCudaTensorsRaises) {
  auto f = compile([](const Tensor& x) { return x * 2; }, kStrict);
  EXPECT_THROW_MSG(f(testing::random_tensor({3}, kFloat32)),
                   "the graphs hold no CUDA tensors: they would run with the interpreter, outside CUDA graphs");
}

// ---- the executor: re-records and eager runs, on the CPU --------------------------------------

struct CpuExecutor {
  Graph graph;
  CompileCounters counters;
  std::unique_ptr<CudaGraphExecutor> exec;

  CpuExecutor(const GraphFn& fn, const TensorList& example, std::vector<bool> static_inputs, bool strict,
              int max_instances = 3) {
    JointGraph joint = trace_joint(fn, example);
    graph = partition(joint, PartitionerKind::Default).forward;
    exec = std::make_unique<CudaGraphExecutor>(graph, std::move(static_inputs), rerun_graph_recorder(), &counters,
                                               "forward", /*starts_step=*/false, max_instances, DeviceType::CPU,
                                               /*overlap_branches=*/true, CaptureChecks{strict, "function 3"});
  }
};

TEST(StrictCaptureExecutor, IslandRaisesBeforeAnythingRuns) {
  // Random draws cannot be captured by the CPU recorder: an island.
  auto fn = [](const TensorList& xs) { return TensorList{xs[0] * rand_like(xs[0])}; };
  expect_error_with([&] { CpuExecutor e(fn, {testing::random_tensor({4}, kFloat32)}, {false}, true); },
                    {"strict capture: function 3 forward graph: node 0 (rand) would run outside CUDA graphs: "
                     "random op (rand), draws random numbers"});
}

TEST(StrictCaptureExecutor, SteadyStepsPass) {
  Tensor w = testing::random_tensor({4}, kFloat32);
  CpuExecutor e([](const TensorList& xs) { return TensorList{(xs[0] * xs[1]).exp()}; }, {w, w.clone()}, {true, false}, true);
  for (int i = 0; i < 5; ++i) {
    mark_step_begin();
    Tensor x = testing::random_tensor({4}, kFloat32);
    testing::expect_close(e.exec->run({w, x})[0], (w * x).exp());
  }
  EXPECT_EQ(e.counters.graphs_captured, 1);
  EXPECT_EQ(e.counters.replays, 4);
}

TEST(StrictCaptureExecutor, ChangedStaticAddressRaisesNamingTheReader) {
  Tensor w = testing::random_tensor({4}, kFloat32);
  CpuExecutor e([](const TensorList& xs) { return TensorList{xs[0] * xs[1]}; }, {w, w.clone()}, {true, false}, true);
  Tensor x = testing::random_tensor({4}, kFloat32);
  for (int i = 0; i < 3; ++i) {
    mark_step_begin();
    e.exec->run({w, x});
  }
  mark_step_begin();
  Tensor w2 = w.clone();
  expect_error_with([&] { e.exec->run({w2, x}); },
                    {"strict capture: function 3 forward graph: segment 0 would be recorded again: static input "
                     "address changed: %",
                     "(read by node 0, mul) was recorded at "});
  EXPECT_EQ(e.counters.rerecords, 0);
  EXPECT_EQ(e.counters.graphs_captured, 1);
}

TEST(StrictCaptureExecutor, LiveOutputOfTheStepRaises) {
  CpuExecutor e([](const TensorList& xs) { return TensorList{xs[0] * 3}; }, {testing::random_tensor({3}, kFloat32)},
                {false}, true);
  Tensor a = testing::random_tensor({3}, kFloat32);
  mark_step_begin();
  e.exec->run({a});  // warm-up
  mark_step_begin();
  Tensor ra = e.exec->run({a})[0];
  expect_error_with([&] { e.exec->run({a}); },
                    {"segment 0 would be recorded again: its replay would overwrite outputs of the current step"});
}

TEST(StrictCaptureExecutor, NoRecordingAllowedRaisesInsteadOfRunningEagerly) {
  CpuExecutor e([](const TensorList& xs) { return TensorList{xs[0] + 1}; }, {testing::random_tensor({3}, kFloat32)},
                {false}, true, /*max_instances=*/0);
  Tensor a = testing::random_tensor({3}, kFloat32);
  mark_step_begin();
  e.exec->run({a});  // warm-up
  mark_step_begin();
  expect_error_with([&] { e.exec->run({a}); },
                    {"segment 0 (from node 0) would run eagerly: cudagraph_max_recordings is 0"});
}

TEST(StrictCaptureExecutor, WithoutStrictTheSameRunsEagerly) {
  auto fn = [](const TensorList& xs) { return TensorList{xs[0] * rand_like(xs[0])}; };
  CpuExecutor e(fn, {testing::random_tensor({4}, kFloat32)}, {false}, false);
  EXPECT_EQ(e.exec->plan().eager_nodes, 1);
  EXPECT_EQ(e.exec->run({testing::random_tensor({4}, kFloat32)}).size(), 1u);
}

// ---- TG_LOGS=capture ----------------------------------------------------------------------------

// Sets TG_LOGS for one scope.
struct ScopedLogs {
  explicit ScopedLogs(const char* value) { setenv("TG_LOGS", value, 1); }
  ~ScopedLogs() { unsetenv("TG_LOGS"); }
};

TEST(CaptureReport, OneLinePerRunWithIslands) {
  auto fn = [](const TensorList& xs) { return TensorList{(xs[0] * rand_like(xs[0])).exp()}; };
  CpuExecutor e(fn, {testing::random_tensor({4}, kFloat32)}, {false}, false);
  std::string logs;
  {
    ScopedLogs on("capture");
    ::testing::internal::CaptureStderr();
    for (int i = 0; i < 3; ++i) {
      mark_step_begin();
      e.exec->run({testing::random_tensor({4}, kFloat32)});
    }
    logs = ::testing::internal::GetCapturedStderr();
  }
  const std::string island = "islands: node 0 (rand, 1 node(s)): random op (rand)\n";
  EXPECT_NE(logs.find("[tapegraph:capture] function 3 forward graph, call 1: inside graphs 0 node(s) in 0 replay(s) "
                      "(0 kernels); outside graphs 3 node(s) (2 warm-up, 0 host transfer, 1 in islands, 0 past the "
                      "re-record limit); recorded 0; " + island),
            std::string::npos)
      << logs;
  EXPECT_NE(logs.find("function 3 forward graph, call 2: inside graphs 2 node(s) in 1 replay(s) (0 kernels); outside "
                      "graphs 1 node(s) (0 warm-up, 0 host transfer, 1 in islands, 0 past the re-record limit); "
                      "recorded 1; " + island),
            std::string::npos)
      << logs;
  EXPECT_NE(logs.find("call 3: inside graphs 2 node(s) in 1 replay(s) (0 kernels); outside graphs 1 node(s) (0 "
                      "warm-up, 0 host transfer, 1 in islands, 0 past the re-record limit); recorded 0;"),
            std::string::npos)
      << logs;
}

TEST(CaptureReport, SilentWithoutTheChannel) {
  CpuExecutor e([](const TensorList& xs) { return TensorList{xs[0] + 1}; }, {testing::random_tensor({3}, kFloat32)},
                {false}, false);
  ScopedLogs on("cudagraphs");
  ::testing::internal::CaptureStderr();
  e.exec->run({testing::random_tensor({3}, kFloat32)});
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("tapegraph:capture"), std::string::npos);
}

// ---- end to end on a GPU ------------------------------------------------------------------------

TEST(StrictCaptureCuda, DeviceToHostCopyRaisesAtTheFirstCallBeforeRunning) {
  TG_REQUIRE_CUDA();
  auto f = compile([](const Tensor& x) { return ((x + 1).cpu() * 3).sum(); }, kStrict);
  expect_error_with([&] { f(randn({3}, {.device = kCuda})); },
                    {"strict capture: function ", " forward graph: node ", "(_to_copy) would run outside CUDA graphs",
                     "a device-to-host copy"});
  EXPECT_EQ(f.counters().warmups, 0);
  EXPECT_EQ(f.counters().compiled_calls, 0);
}

TEST(StrictCaptureCuda, CpuOpRaises) {
  TG_REQUIRE_CUDA();
  auto f = compile([](const Tensor& x, const Tensor& c) { return (x * c.exp().to(x.device())).sum(); }, kStrict);
  expect_error_with([&] { f(randn({3}, {.device = kCuda}), randn({3})); },
                    {"(exp) would run outside CUDA graphs: cpu device (exp)"});
}

TEST(StrictCaptureCuda, ItemRaises) {
  TG_REQUIRE_CUDA();
  auto f = compile([](const Tensor& x) { return x * x.sum().item<float>(); }, kStrict);
  expect_error_with([&] { f(randn({3}, {.device = kCuda})); }, {"would run eagerly", "[item]"});
}

TEST(StrictCaptureCuda, CacheLimitRaises) {
  TG_REQUIRE_CUDA();
  CompileOptions o = kStrict;
  o.cache_limit = 1;
  auto f = compile([](const Tensor& x) { return (x * 2).sum(); }, o);
  f(randn({3}, {.device = kCuda}));
  expect_error_with([&] { f(randn({4}, {.device = kCuda})); },
                    {"the call would run eagerly: cache_limit reached (1 compiled variants); this call's guard "
                     "failure: "});
  EXPECT_EQ(f.counters().eager_fallbacks, 0);
}

// A static input that moves updates the graph in place, which strict capture allows; one whose move
// cannot be an update (a view at another offset of its storage) would be recorded again: it raises.
TEST(StrictCaptureCuda, ChangedStaticAddressUpdatesOrRaises) {
  TG_REQUIRE_CUDA();
  auto f = compile([](const Tensor& x, const Tensor& y) { return x * y + 1; }, kStrict);
  Tensor x = randn({8}, {.device = kCuda}), y = randn({8}, {.device = kCuda});
  mark_static_address(x);
  for (int i = 0; i < 3; ++i) {
    mark_step_begin();
    testing::expect_close(f(x, y), x * y + 1);
  }
  Tensor x2 = randn({8}, {.device = kCuda});
  mark_static_address(x2);
  mark_step_begin();
  testing::expect_close(f(x2, y), x2 * y + 1);
  EXPECT_EQ(f.counters().graph_updates, 1);
  Tensor block = randn({16}, {.device = kCuda});
  mark_static_address(block);
  mark_step_begin();
  // The reader is named by its op (a fused elementwise kernel here).
  expect_error_with([&] { f(block.narrow(0, 8, 8), y); },
                    {"would be recorded again: static input address changed", "(read by node "});
}

// An output of no bytes (an empty tensor made inside the graph) has no memory to claim: replays hand
// out a new empty tensor instead of recording again.
TEST(StrictCaptureCuda, EmptyOutputReplays) {
  TG_REQUIRE_CUDA();
  auto f = compile([](const Tensor& x) { return std::make_tuple(x * 2, (x * 3).narrow(0, 0, 0).contiguous()); },
                   kStrict);
  Tensor x = randn({8}, {.device = kCuda});
  for (int i = 0; i < 4; ++i) {
    mark_step_begin();
    auto [twice, none] = f(x);
    testing::expect_close(twice, x * 2);
    EXPECT_EQ(none.numel(), 0);
    EXPECT_EQ(none.device(), x.device());
  }
  EXPECT_EQ(f.counters().graphs_captured, 1);
  EXPECT_EQ(f.counters().rerecords, 0);
}

// bench_gpt2's step at a small size, in bf16 autocast: the fused attention saves an empty random
// state for its backward (no dropout), which once made every replay record the forward again.
TEST(StrictCaptureCuda, GptBf16TrainingStepPasses) {
  TG_REQUIRE_CUDA();
  manual_seed(0);
  auto model = std::make_shared<nn::GPT>(nn::GPTConfig{.vocab_size = 512, .context = 64, .d_model = 64, .heads = 4,
                                                       .layers = 2});
  model->to(kCuda);
  optim::AdamW opt(model->parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  Tensor tokens = randint(0, 512, {4, 65}, {.device = kCuda});
  Tensor x = tokens.narrow(1, 0, 64).contiguous(), y = tokens.narrow(1, 1, 64).contiguous();
  mark_static_address(x);
  mark_static_address(y);
  optim::CompiledStep step(opt, kStrict);
  auto loss = compile(
      [&](const Tensor& a, const Tensor& b) {
        AutocastGuard autocast(a.device(), kBFloat16);
        return model->loss(a, b);
      },
      kStrict);
  float first = 0, last = 0;
  for (int i = 0; i < 8; ++i) {
    Tensor l = loss(x, y);
    opt.zero_grad();
    l.backward();
    step.step();
    (i == 0 ? first : last) = l.item<float>();
  }
  EXPECT_LT(last, first);
  EXPECT_EQ(loss.counters().rerecords, 0);
  EXPECT_EQ(step.counters().rerecords, 0);
  EXPECT_EQ(step.counters().graph_updates, 0);
}

// mlp_small's step: the loss compiled, the SGD update as a CompiledStep, both strict.
TEST(StrictCaptureCuda, MlpTrainingStepPasses) {
  TG_REQUIRE_CUDA();
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(128, 256));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(256, 10));
  model->to(kCuda);
  Tensor x = randn({64, 128}, {.device = kCuda});
  Tensor y = randint(0, 10, {64}, {.device = kCuda});
  mark_static_address(x);
  mark_static_address(y);
  optim::SGD sgd(model->parameters(), {.lr = 1e-2});
  optim::CompiledStep step(sgd, kStrict);
  auto loss = compile([&](const Tensor& a, const Tensor& b) { return cross_entropy((*model)(a), b); }, kStrict);
  float first = 0, last = 0;
  for (int i = 0; i < 8; ++i) {
    Tensor l = loss(x, y);
    (i == 0 ? first : last) = l.item<float>();
    sgd.zero_grad();
    l.backward();
    step.step();
  }
  EXPECT_LT(last, first);
  EXPECT_EQ(loss.counters().rerecords, 0);
  EXPECT_EQ(step.counters().rerecords, 0);
  EXPECT_GT(loss.counters().replays, 0);
}

// A transformer LM step (embeddings, causal attention, GELU MLP, layer norms) with AdamW.
TEST(StrictCaptureCuda, TransformerTrainingStepPasses) {
  TG_REQUIRE_CUDA();
  constexpr int64_t B = 4, T = 16, D = 32, V = 64;
  manual_seed(0);
  auto tok = std::make_shared<nn::Embedding>(V, D);
  auto norm = std::make_shared<nn::LayerNorm>(Shape{D});
  auto attn = std::make_shared<nn::MultiheadAttention>(D, 4, 0.0, true, true);
  auto fc = std::make_shared<nn::Linear>(D, V);
  TensorList params;
  for (nn::Module* m : std::initializer_list<nn::Module*>{tok.get(), norm.get(), attn.get(), fc.get()}) {
    m->to(kCuda);
    for (const Tensor& p : m->parameters()) params.push_back(p);
  }
  Tensor tokens = randint(0, V, {B, T + 1}, {.dtype = kInt64, .device = kCuda});
  Tensor x = tokens.narrow(1, 0, T).contiguous(), y = tokens.narrow(1, 1, T).contiguous();
  mark_static_address(x);
  mark_static_address(y);
  optim::AdamW opt(params, {.lr = 1e-3});
  optim::CompiledStep step(opt, kStrict);
  auto loss = compile(
      [&](const Tensor& a, const Tensor& b) {
        Tensor h = tok->forward(a);
        Tensor n = norm->forward(h);
        h = h + attn->attend(n, n, n, Tensor(), true);
        return cross_entropy(gelu(fc->forward(h)).reshape({B * T, V}), b.reshape({B * T}));
      },
      kStrict);
  for (int i = 0; i < 6; ++i) {
    Tensor l = loss(x, y);
    opt.zero_grad();
    l.backward();
    step.step();
  }
  EXPECT_EQ(loss.counters().rerecords, 0);
  EXPECT_EQ(step.counters().rerecords, 0);
}

}  // namespace
}  // namespace tg::graphs
