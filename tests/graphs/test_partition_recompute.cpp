// Which forward nodes the min-cut partitioner recomputes in the backward: cheap ones (elementwise,
// views, norms), never the compute-intensive ones (kComputeIntensive: products, convolutions,
// recurrences) nor reductions that shrink their input fourfold, which it saves instead.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tapegraph.h"

namespace tg {
namespace {

// The recomputed nodes of a partition: forward-phase nodes of its backward graph.
std::vector<std::string> recomputed_ops(const graphs::Partition& p) {
  std::vector<std::string> names;
  for (const graphs::GraphNode& n : p.backward.nodes)
    if (n.phase == graphs::Phase::Forward) names.emplace_back(n.op->name());
  return names;
}

TEST(MinCutRecompute, NeverRecomputesComputeIntensiveOps) {
  manual_seed(0);
  nn::Conv2d conv(2, 4, Shape{3});
  nn::Linear fc(4 * 4 * 4, 8);
  nn::LSTM lstm(8, 6);
  auto fn = [&](const Tensor& x) {
    Tensor h = conv(x).relu().sigmoid();            // cheap ops after a convolution
    h = fc(h.flatten(1)).tanh().exp();              // and after a linear layer
    h = lstm.forward_with_state(h.unsqueeze(0)).output.sin();
    return matmul(h, h.transpose(1, 2)).cos().sum();
  };
  auto min_cut = compile(fn, {.backend = "aot_eager", .partitioner = "min_cut"});
  auto plain = compile(fn, {.backend = "aot_eager"});
  const Tensor x = randn({3, 2, 6, 6});
  const Tensor lc = min_cut(x), lp = plain(x), le = fn(x);
  testing::expect_close(lc, le, 1e-5, 1e-6);
  lc.backward();
  const Tensor g_min_cut = conv.weight().grad().clone();
  conv.zero_grad();
  lp.backward();
  testing::expect_close(g_min_cut, conv.weight().grad(), 1e-5, 1e-6);

  const std::vector<std::string> recomputed = recomputed_ops(*min_cut.last_partition());
  EXPECT_FALSE(recomputed.empty()) << "min_cut recomputed nothing: the test would prove nothing";
  for (const graphs::GraphNode& n : min_cut.last_partition()->backward.nodes)
    if (n.phase == graphs::Phase::Forward) {
      EXPECT_FALSE(n.op->has(kComputeIntensive)) << n.op->name() << " was recomputed in the backward";
      EXPECT_TRUE(graphs::is_recomputable(*n.op)) << n.op->name();
    }
  EXPECT_TRUE(recomputed_ops(*plain.last_partition()).empty());
}

// A global pool reads 64 times the bytes it writes: min_cut saves its result rather than recompute
// it from the activation before it (PyTorch's fourfold-shrink rule), as on resnet_tiny.
TEST(MinCutRecompute, ShrinkingReductionsAreSaved) {
  manual_seed(0);
  nn::Conv2d conv(2, 4, Shape{3}, Shape{1}, ConvPadding(1));
  nn::Linear fc(4, 3);
  auto fn = [&](const Tensor& x) { return fc(adaptive_avg_pool2d(conv(x).relu(), {1, 1}).flatten(1)).sum(); };
  auto min_cut = compile(fn, {.backend = "aot_eager", .partitioner = "min_cut"});
  min_cut(randn({2, 2, 8, 8})).backward();
  for (const std::string& name : recomputed_ops(*min_cut.last_partition()))
    EXPECT_NE(name, "adaptive_avg_pool2d") << "the pool was recomputed in the backward";
}

TEST(MinCutRecompute, ComputeIntensiveOpsCarryTheFlag) {
  const Tensor a = randn({2, 3}), b = randn({3, 4}), img = randn({1, 1, 4, 4}), w = randn({1, 1, 3, 3});
  graphs::JointGraph joint = graphs::trace_joint(
      [](const TensorList& t) {
        return TensorList{mm(t[0], t[1]), linear(t[1].t(), t[0]), conv2d(t[2], t[3]), bmm(t[0].unsqueeze(0),
                                                                                           t[1].unsqueeze(0))};
      },
      {a, b, img, w});
  int flagged = 0;
  for (const graphs::GraphNode& n : joint.graph.nodes) {
    const std::string name(n.op->name());
    if (name == "mm" || name == "linear" || name == "conv2d" || name == "bmm") {
      EXPECT_TRUE(n.op->has(kComputeIntensive)) << name;
      EXPECT_FALSE(graphs::is_recomputable(*n.op)) << name;
      ++flagged;
    }
  }
  EXPECT_EQ(flagged, 4);
}

}  // namespace
}  // namespace tg
