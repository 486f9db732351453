// tg::profiler: host ranges of eager and compiled ops, their nesting, key_averages and its table,
// the Chrome trace, reset(), one profiler at a time, the stage rules, and on a GPU the kernels of
// eager ops and of replayed CUDA graphs attributed to the ops that launched or recorded them.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "profiler/profiler.h"
#include "profiler/stages.h"
#include "support/test_support.h"

namespace tg {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Profiler;

// A two-layer MLP's loss and gradients on `dev`.
Tensor mlp_step(const Tensor& x, const Tensor& w1, const Tensor& w2) {
  Tensor loss = linear(relu(linear(x, w1)), w2).sum();
  loss.backward();
  return loss;
}

struct Mlp {
  Tensor x, w1, w2;
  explicit Mlp(Device dev) {
    manual_seed(0);
    x = randn({8, 16}, {.device = dev});
    w1 = randn({32, 16}, {.device = dev}).requires_grad_();
    w2 = randn({4, 32}, {.device = dev}).requires_grad_();
  }
};

int64_t count_named(const std::vector<Event>& events, EventKind kind, const std::string& name) {
  int64_t n = 0;
  for (const Event& e : events) n += e.kind == kind && e.name == name;
  return n;
}

const profiler::KeyAverage* row(const std::vector<profiler::KeyAverage>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.name == name && r.kind == EventKind::Op) return &r;
  return nullptr;
}

TEST(Profiler, RecordsEagerOpsWithTheirNesting) {
  Mlp m(kCPU);
  Profiler prof({.cuda = false});
  prof.start();
  mlp_step(m.x, m.w1, m.w2);
  const profiler::Profile& p = prof.stop();
  EXPECT_EQ(count_named(p.events(), EventKind::Op, "linear"), 2);
  EXPECT_EQ(count_named(p.events(), EventKind::Op, "relu"), 1);
  EXPECT_GE(count_named(p.events(), EventKind::Op, "sum"), 1);
  std::set<int64_t> ids;
  for (const Event& e : p.events()) {
    EXPECT_EQ(e.kind == EventKind::Op || e.kind == EventKind::Range, true) << e.name;
    EXPECT_LE(e.start_ns, e.end_ns) << e.name;
    EXPECT_TRUE(ids.insert(e.id).second) << "ids are unique, " << e.name << " repeats " << e.id;
  }
  // Every parent is a recorded event that encloses its child.
  for (const Event& e : p.events()) {
    if (e.parent == 0) continue;
    const auto parent = std::find_if(p.events().begin(), p.events().end(), [&](const Event& o) { return o.id == e.parent; });
    ASSERT_NE(parent, p.events().end()) << e.name;
    EXPECT_LE(parent->start_ns, e.start_ns);
    EXPECT_GE(parent->end_ns, e.end_ns);
  }
  EXPECT_EQ(p.device_note(), "device activity not asked for (ProfilerOptions::cuda is false)");
}

TEST(Profiler, RecordsTheOpsCompiledGraphsRun) {
  Mlp m(kCPU);
  auto f = compile([](const Tensor& x, const Tensor& w1, const Tensor& w2) { return linear(relu(linear(x, w1)), w2).sum(); },
                   {.backend = "aot_eager"});
  f(m.x, m.w1, m.w2).backward();  // traced and compiled outside the profile
  Profiler prof({.cuda = false});
  prof.start();
  f(m.x, m.w1, m.w2).backward();
  const profiler::Profile& p = prof.stop();
  // The interpreter runs linear (or its fused forms) and the backward's products as ops too.
  int64_t ops = 0;
  for (const Event& e : p.events()) ops += e.kind == EventKind::Op;
  EXPECT_GE(ops, 6);
  std::string names;
  for (const Event& e : p.events()) names += e.name + " ";
  EXPECT_GE(count_named(p.events(), EventKind::Op, "relu") + count_named(p.events(), EventKind::Op, "linear_relu"), 1)
      << names;
}

TEST(Profiler, KeyAveragesCountCallsAndSplitSelfTime) {
  Mlp m(kCPU);
  Profiler prof({.cuda = false, .record_shapes = true});
  prof.start();
  for (int i = 0; i < 3; ++i) mlp_step(m.x, m.w1, m.w2);
  const profiler::Profile& p = prof.stop();
  const auto rows = p.key_averages();
  const profiler::KeyAverage* relu_row = row(rows, "relu");
  ASSERT_NE(relu_row, nullptr);
  EXPECT_EQ(relu_row->count, 3);
  for (const auto& r : rows) {
    EXPECT_GE(r.host_total_us, 0) << r.name;
    EXPECT_LE(r.host_self_us, r.host_total_us + 1e-6) << r.name;
  }
  // Grouped by shapes, linear's two layers are two rows.
  int linear_rows = 0;
  for (const auto& r : p.key_averages(true)) linear_rows += r.name == "linear" && r.kind == EventKind::Op;
  EXPECT_EQ(linear_rows, 2);
  const std::string t = p.table({.sort_by = "host_total", .row_limit = 5});
  EXPECT_NE(t.find("Name"), std::string::npos);
  EXPECT_NE(t.find("# Calls"), std::string::npos);
  EXPECT_NE(t.find("Self CPU time total"), std::string::npos);
  EXPECT_THROW_MSG(p.table({.sort_by = "speed"}), "table sort_by is 'speed', expected device_total");
}

TEST(Profiler, WritesAChromeTraceNamingTheOps) {
  Mlp m(kCPU);
  Profiler prof({.cuda = false, .record_shapes = true});
  prof.start();
  mlp_step(m.x, m.w1, m.w2);
  const std::string path = ::testing::TempDir() + "tg_profile_trace.json";
  prof.stop().export_chrome_trace(path);
  std::ifstream f(path);
  const nlohmann::json trace = nlohmann::json::parse(f);
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::set<std::string> names;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    if (e["ph"] != "X") continue;
    EXPECT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("pid") && e.contains("tid"));
    names.insert(e["name"].get<std::string>());
  }
  EXPECT_TRUE(names.count("linear")) << "ops in the trace: " << names.size();
  EXPECT_TRUE(names.count("relu"));
  std::remove(path.c_str());
  EXPECT_THROW_MSG(prof.profile().export_chrome_trace("/nonexistent-dir/trace.json"), "cannot write the trace");
}

TEST(Profiler, ResetDropsWhatWasRecordedSoFar) {
  Mlp m(kCPU);
  Profiler prof({.cuda = false});
  prof.start();
  mlp_step(m.x, m.w1, m.w2);
  prof.reset();
  const Tensor y = relu(m.x);
  const profiler::Profile& p = prof.stop();
  EXPECT_EQ(count_named(p.events(), EventKind::Op, "linear"), 0);
  EXPECT_EQ(count_named(p.events(), EventKind::Op, "relu"), 1);
}

TEST(Profiler, OneRecordsAtATimeAndCallsAreChecked) {
  Profiler a({.cuda = false}), b({.cuda = false});
  EXPECT_THROW_MSG(a.stop(), "stop() called on a profiler that is not recording");
  EXPECT_THROW_MSG(a.reset(), "reset() needs a recording profiler");
  a.start();
  EXPECT_THROW_MSG(a.start(), "already recording");
  EXPECT_THROW_MSG(b.start(), "another profiler is recording in this process");
  a.stop();
  b.start();  // free again
  b.stop();
}

TEST(Profiler, ThreadsGetTheirOwnRows) {
  Profiler prof({.cuda = false});
  prof.start();
  std::thread t([] { (void)relu(ones({4})); });
  t.join();
  (void)relu(ones({4}));
  const profiler::Profile& p = prof.stop();
  std::set<int> threads;
  for (const Event& e : p.events())
    if (e.name == "relu") threads.insert(e.thread);
  EXPECT_EQ(threads.size(), 2u);
}

TEST(ProfilerStages, OpsAndKernelsFallIntoStages) {
  using profiler::Stage;
  EXPECT_EQ(profiler::stage_of_op("linear"), Stage::Matmul);
  EXPECT_EQ(profiler::stage_of_op("linear_gelu"), Stage::Matmul);
  EXPECT_EQ(profiler::stage_of_op("linear_cross_entropy"), Stage::Loss);
  EXPECT_EQ(profiler::stage_of_op("layer_norm"), Stage::Norm);
  EXPECT_EQ(profiler::stage_of_op("flash_attention_backward"), Stage::Attention);
  EXPECT_EQ(profiler::stage_of_op("adam_step_"), Stage::Optimizer);
  EXPECT_EQ(profiler::stage_of_op("multi_tensor_norm"), Stage::Optimizer);
  Event k;
  k.kind = EventKind::Kernel;
  k.name = "tg::cuda::ew_detail::vectorized_kernel<8, tg::ew::ConvertFn<tg::BFloat16, float>, 0ul>";
  EXPECT_EQ(profiler::stage_of(k, "to"), Stage::Cast);
  EXPECT_EQ(profiler::stage_of(k, ""), Stage::Cast);
  k.name = "tg::cuda::ew_detail::vectorized_kernel<4, tg::ew::AddFn<float>, 0ul, 1ul>";
  EXPECT_EQ(profiler::stage_of(k, ""), Stage::Elementwise);
  EXPECT_EQ(profiler::stage_of(k, "copy_"), Stage::Memory);  // a copy that converts nothing
  k.name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64";
  EXPECT_EQ(profiler::stage_of(k, ""), Stage::Matmul);
  const std::string t = profiler::stage_table({{Stage::Matmul, 3000, 6}, {Stage::Other, 1000, 2}}, 2);
  EXPECT_NE(t.find("matmul"), std::string::npos);
  EXPECT_NE(t.find("1.500"), std::string::npos) << t;  // 3 ms over 2 steps
}

TEST(ProfilerMemory, SummaryNamesTheDeviceOrItsAbsence) {
  const std::string s = profiler::memory_summary();
  if (!cuda_is_available()) {
    EXPECT_NE(s.find("no CUDA device"), std::string::npos);
  } else {
    EXPECT_NE(s.find("Allocated memory (peak)"), std::string::npos) << s;
  }
}

TEST(ProfilerCuda, KernelsOfEagerOpsBelongToTheirOps) {
  TG_REQUIRE_CUDA();
  Mlp m(cuda_device(0));
  mlp_step(m.x, m.w1, m.w2);  // libraries loaded, handles made
  Profiler prof;
  prof.start();
  mlp_step(m.x, m.w1, m.w2);
  const profiler::Profile& p = prof.stop();
  ASSERT_EQ(p.device_note(), "") << "CUPTI did not trace";
  int64_t kernels = 0, attributed = 0;
  std::set<int64_t> op_ids;
  for (const Event& e : p.events())
    if (e.kind == EventKind::Op) op_ids.insert(e.id);
  for (const Event& e : p.events()) {
    if (e.kind != EventKind::Kernel) continue;
    ++kernels;
    attributed += op_ids.count(e.id);
    EXPECT_GE(e.device, 0);
  }
  EXPECT_GE(kernels, 4);
  EXPECT_EQ(attributed, kernels) << "every kernel of an eager step is launched inside an op";
  const profiler::KeyAverage* relu_row = row(p.key_averages(), "relu");
  ASSERT_NE(relu_row, nullptr);
  EXPECT_GT(relu_row->device_self_us, 0);
}

TEST(ProfilerCuda, ReplayedGraphKernelsNameTheOpsThatRecordedThem) {
  TG_REQUIRE_CUDA();
  Mlp m(cuda_device(0));
  auto f = compile([](const Tensor& x, const Tensor& w1, const Tensor& w2) { return linear(relu(linear(x, w1)), w2).sum(); },
                   {.backend = "cudagraphs", .fuse_elementwise = false});
  Profiler prof;
  prof.start();  // before the recordings: the profiler names every graph node's op
  for (int i = 0; i < 3; ++i) {
    mark_step_begin();
    f(m.x, m.w1, m.w2).backward();
  }
  prof.reset();
  mark_step_begin();
  f(m.x, m.w1, m.w2).backward();
  const profiler::Profile& p = prof.stop();
  int64_t replays = 0, graph_kernels = 0, named = 0;
  for (const Event& e : p.events()) {
    replays += e.kind == EventKind::Range && e.name.rfind("cudagraph replay", 0) == 0;
    if (e.kind != EventKind::Kernel || e.graph_node == 0) continue;
    ++graph_kernels;
    named += !e.graph_op.empty();
  }
  EXPECT_GE(replays, 2) << "forward and backward graphs";
  EXPECT_GE(graph_kernels, 4);
  EXPECT_EQ(named, graph_kernels) << "every node was recorded while the profiler ran";
  const auto stages = profiler::stage_breakdown(p);
  EXPECT_GT(stages[static_cast<size_t>(profiler::Stage::Matmul)].device_us, 0);
}

}  // namespace
}  // namespace tg
