// Branch streams in CUDA graphs (graphs/cudagraphs/branch_streams.h): which backward nodes run beside the input
// gradients, when a node on the main stream must wait for the branch, and, on a GPU, compiled MLP
// losses recorded with and without the branch agreeing with eager mode.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "graphs/cudagraphs/branch_streams.h"
#include "graphs/testing/parity.h"
#include "support/test_support.h"

namespace tg {
namespace {

std::shared_ptr<nn::Sequential> mlp(const std::vector<int64_t>& widths, Device device) {
  auto model = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    model->push_back(std::make_shared<nn::Linear>(widths[i], widths[i + 1]));
    if (i + 2 < widths.size()) model->push_back(std::make_shared<nn::ReLU>());
  }
  model->to(device);
  return model;
}

// mlp_small's backward graph: the weight-gradient products and the bias-gradient sum go to the
// branch, except the last product (no main-stream node runs after it); the input gradients stay.
TEST(BranchPlan, WeightAndBiasGradientsOfAnMlpBackward) {
  manual_seed(0);
  auto model = mlp({128, 256, 256, 10}, kCPU);
  auto loss = compile([&](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); });
  loss(randn({64, 128}), randint(0, 10, {64})).backward();
  const graphs::Graph& backward = loss.last_partition()->backward;
  std::vector<int32_t> nodes(backward.nodes.size());
  std::iota(nodes.begin(), nodes.end(), 0);
  const std::vector<bool> branch = graphs::plan_branch_nodes(backward, nodes);
  ASSERT_EQ(branch.size(), nodes.size());
  std::vector<std::string> on_branch;
  for (size_t p = 0; p < nodes.size(); ++p) {
    if (!branch[p]) continue;
    const graphs::GraphNode& node = backward.nodes[p];
    on_branch.push_back(std::string(node.op->schema().name) + " " +
                        shape_str(backward.values[static_cast<size_t>(node.outputs[0])].meta.sizes));
  }
  EXPECT_EQ(on_branch, (std::vector<std::string>{"mm [10, 256]", "sum_to_size [10]", "mm [256, 256]"}));
  // A segment of the last product alone has nothing to overlap it.
  EXPECT_EQ(graphs::plan_branch_nodes(backward, {nodes.back()}), std::vector<bool>{false});
}

// An op that reads input 1 and writes input 0 in place (only its schema is used).
class WriteFirstOp final : public Op {
 public:
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "write_first", .flags = kInPlace, .mutates = 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override { return {meta_of(in[0])}; }
  void eval(const TensorList&, TensorList&) const override {}
};

TEST(PendingBranches, MainNodesWaitForWhatTheBranchWritesOrReads) {
  const Tensor read = randn({4}), written = randn({2, 3}), other = randn({4});
  const WriteFirstOp write_first;
  graphs::PendingBranches pending;
  EXPECT_TRUE(pending.empty());
  pending.add({read}, {written});
  EXPECT_FALSE(pending.empty());
  // Reading what the branch writes, a view of it included, waits; reading what it reads does not.
  EXPECT_TRUE(pending.conflicts(write_first, {other, written.select(0, 1)}));
  EXPECT_FALSE(pending.conflicts(write_first, {other, read}));
  // Writing what the branch reads waits.
  EXPECT_TRUE(pending.conflicts(write_first, {read.narrow(0, 0, 2), other}));
  pending.clear();
  EXPECT_TRUE(pending.empty());
  EXPECT_FALSE(pending.conflicts(write_first, {read, written}));
}

// A wider MLP (products long enough to overlap): recorded with the branch and without, the loss and
// every gradient match eager mode over several replays.
TEST(BranchesCuda, CompiledMlpMatchesEagerWithAndWithoutTheBranch) {
  TG_REQUIRE_CUDA();
  manual_seed(1);
  auto model = mlp({512, 1024, 1024, 10}, cuda_device());
  auto fn = [model](const TensorList& in) { return TensorList{cross_entropy((*model)(in[0]), in[1])}; };
  const Tensor x = randn({256, 512}, {.device = cuda_device()}), y = randint(0, 10, {256}, {.device = cuda_device()});
  const TensorList eager = testing::loss_and_grads(*model, fn({x, y})[0]);
  for (bool overlap : {true, false}) {
    Compiled<decltype(fn)> compiled(fn, {.backend = "cudagraphs", .overlap_branches = overlap});
    for (int call = 0; call < 4; ++call) {
      const TensorList got = testing::loss_and_grads(*model, compiled(TensorList{x, y})[0]);
      for (size_t k = 0; k < got.size(); ++k) testing::expect_close(got[k], eager[k], 1e-4, 1e-5);
    }
    EXPECT_EQ(compiled.counters().branch_nodes > 0, overlap);
    EXPECT_GT(compiled.counters().replays, 0);
  }
}

}  // namespace
}  // namespace tg
