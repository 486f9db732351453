// Named hangs, device-independent parts: collective contexts (labels with a live step) and the CPU
// backend's messages naming them, the registry through which captured work asks to see its graph's
// replays, and the graph executor telling it of every replay (with a recorder that re-runs the work
// on the CPU).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "distributed/collectives/collective_context.h"
#include "distributed/collectives/collectives.h"
#include "graphs/compile.h"
#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/runtime/cudagraph_step.h"
#include "ops/core/dispatch.h"
#include "support/test_support.h"
#include "support/thread_ranks.h"
#include "tensor/captured_work.h"

namespace tg {
namespace {

using distributed::CollectiveContext;
using distributed::CollectiveContextScope;
using distributed::current_collective_context;
using distributed::describe_collective;

TEST(CollectiveContext, DescribesLabelAndLiveStep) {
  auto step = std::make_shared<std::atomic<int64_t>>(-1);
  const CollectiveContext c{"DDP bucket 2 of 3", step};
  EXPECT_EQ(c.describe(), "DDP bucket 2 of 3");  // no step before the first
  step->store(12);
  EXPECT_EQ(c.describe(), "DDP bucket 2 of 3, step 12");
  EXPECT_EQ((CollectiveContext{"", step}.describe()), "step 12");
  EXPECT_TRUE(CollectiveContext{}.empty());
  EXPECT_EQ(describe_collective("all_reduce", 37, c.describe()), "all_reduce #37 (DDP bucket 2 of 3, step 12)");
  EXPECT_EQ(describe_collective("broadcast", 1, ""), "broadcast #1");
}

TEST(CollectiveContext, ScopesNestAndRestore) {
  EXPECT_TRUE(current_collective_context().empty());
  {
    const CollectiveContextScope outer({"outer", nullptr});
    EXPECT_EQ(current_collective_context().label, "outer");
    {
      const CollectiveContextScope inner({"inner", nullptr});
      EXPECT_EQ(current_collective_context().label, "inner");
    }
    EXPECT_EQ(current_collective_context().label, "outer");
  }
  EXPECT_TRUE(current_collective_context().empty());
}

// A collective issued inside a scope carries its label and the step read when it is issued; the CPU
// backend's timeout names both. (Traced nodes keeping their context: test_ddp_cpu_processes.)
TEST(CollectiveContext, CpuBackendTimeoutNamesTheContextOfTheOp) {
  using namespace std::chrono_literals;
  std::atomic<bool> done{false};
  auto step = std::make_shared<std::atomic<int64_t>>(4);
  const auto errors = testing::run_ranks_collecting(
      2,
      [&](distributed::ProcessGroup& g) {
        auto group = std::shared_ptr<distributed::ProcessGroup>(&g, [](distributed::ProcessGroup*) {});
        Tensor x = ones({3});
        const auto first = [&] {
          const CollectiveContextScope scope({"eval loss", step});
          return distributed::all_reduce(x, distributed::ReduceOp::Sum, group);  // #1 works
        }();
        EXPECT_EQ(first.sum().item<float>(), 6.0f);
        if (g.rank() == 1) {
          while (!done) std::this_thread::sleep_for(5ms);  // alive, but never joins #2
          return;
        }
        step->store(5);
        const CollectiveContextScope scope({"eval loss", step});
        EXPECT_THROW_MSG(distributed::all_reduce_(x, distributed::ReduceOp::Sum, group),
                         "rank 0: all_reduce #2 (eval loss, step 5) timed out after 300 ms waiting for data from rank 1");
        done = true;
      },
      testing::thread_rank_options(300ms));
  EXPECT_FALSE(errors[0]);
  EXPECT_FALSE(errors[1]);
}

struct Label final : CapturedNote {
  explicit Label(std::string t) : text(std::move(t)) {}
  std::string text;
};

// Records every replay it is told of: the graph and the labels it holds.
struct RecordingWatcher final : ReplayWatcher {
  std::vector<std::string> seen;
  void replayed(const std::string& graph, const std::vector<std::shared_ptr<const CapturedNote>>& held) override {
    std::string line = graph + ":";
    for (const auto& n : held) line += " " + static_cast<const Label&>(*n).text;
    seen.push_back(line);
  }
};

TEST(CapturedWork, NotesAreCollectedPerWatcherOnlyInsideAScope) {
  auto a = std::make_shared<RecordingWatcher>(), b = std::make_shared<RecordingWatcher>();
  note_captured_work(a, std::make_shared<Label>("lost"));  // no scope: nobody collects it
  CapturedWork work;
  {
    CapturedWorkScope scope;
    note_captured_work(a, std::make_shared<Label>("a1"));
    note_captured_work(b, std::make_shared<Label>("b1"));
    note_captured_work(a, std::make_shared<Label>("a2"));
    work = scope.take();
  }
  ASSERT_FALSE(work.empty());
  work.replayed("g");
  EXPECT_EQ(a->seen, (std::vector<std::string>{"g: a1 a2"}));
  EXPECT_EQ(b->seen, (std::vector<std::string>{"g: b1"}));
  b.reset();  // a watcher that is gone is skipped
  work.replayed("g");
  EXPECT_EQ(a->seen.size(), 2u);
}

// Copies its input and, when run inside a capture scope, notes itself for `watcher` (as a
// communicator notes a collective recorded into a graph).
class NotingOp final : public Op {
 public:
  explicit NotingOp(std::shared_ptr<RecordingWatcher> watcher) : watcher_(std::move(watcher)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "noting_copy", .flags = kNonDifferentiable};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    return single_output(contiguous_meta(in[0].sizes(), in[0].dtype(), in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    out[0].copy_(in[0]);
    note_captured_work(watcher_, std::make_shared<Label>("copy"));
  }

 private:
  std::shared_ptr<RecordingWatcher> watcher_;
};

TEST(CapturedWork, ExecutorTellsTheWatcherOfEveryReplay) {
  auto watcher = std::make_shared<RecordingWatcher>();
  auto fn = [watcher](const TensorList& xs) {
    return TensorList{dispatch1(std::make_shared<const NotingOp>(watcher), {xs[0] * 2})};
  };
  const Tensor example = testing::random_tensor({4}, kFloat32);
  graphs::JointGraph joint = graphs::trace_joint(fn, {example});
  graphs::Graph graph = graphs::partition(joint, graphs::PartitionerKind::Default).forward;
  graphs::CompileCounters counters;
  graphs::CudaGraphExecutor exec(graph, {false}, graphs::rerun_graph_recorder(), &counters, "forward",
                                 /*starts_step=*/false, 3, DeviceType::CPU);
  for (int call = 1; call <= 4; ++call) {
    mark_step_begin();
    const Tensor x = testing::random_tensor({4}, kFloat32);
    testing::expect_close(exec.run({x})[0], x * 2);
    // The warm-up runs eagerly; the recording notes the op once, and each replay (the first right
    // after recording) is reported with it.
    EXPECT_EQ(watcher->seen.size(), static_cast<size_t>(call - 1));
  }
  ASSERT_EQ(counters.replays, 3);
  for (const std::string& line : watcher->seen) EXPECT_EQ(line, "forward graph: copy");
}

}  // namespace
}  // namespace tg
