// Dropout, functional and as a module: mask statistics, scaling, eval mode, edge probabilities,
// gradients (finite differences with a fixed seed), bad input, and CPU-vs-CUDA masks.
#include <gtest/gtest.h>

#include "nn/nn.h"
#include "ops/factory/factory.h"
#include "ops/random/dropout.h"
#include "ops/random/random.h"
#include "ops/reduce/reduce.h"
#include "support/test_support.h"

namespace tg {
namespace {

TEST(Dropout, ZeroesAboutPAndScalesTheRest) {
  manual_seed(3);
  Tensor x = ones({20000});
  const std::vector<float> out = dropout(x, 0.25).to_vector<float>();
  int64_t zeros = 0;
  for (float v : out) {
    if (v == 0) {
      ++zeros;
    } else {
      EXPECT_FLOAT_EQ(v, 1.0f / 0.75f);
    }
  }
  EXPECT_NEAR(static_cast<double>(zeros) / 20000.0, 0.25, 0.015);
}

TEST(Dropout, FreshMaskOnEveryCall) {
  Tensor x = ones({4096});
  EXPECT_FALSE(equal(dropout(x, 0.5), dropout(x, 0.5)));
}

TEST(Dropout, EvalAndZeroProbabilityReturnTheInput) {
  Tensor x = randn({8});
  EXPECT_TRUE(dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0).is_same(x));
  Tensor all = dropout(x, 1.0);
  EXPECT_TRUE(equal(all, zeros({8})));
}

TEST(Dropout, ModuleFollowsTrainingMode) {
  nn::Dropout drop(0.5);
  Tensor x = ones({1024});
  EXPECT_LT(drop(x).eq(0).sum().item<double>(), 700);
  EXPECT_GT(drop(x).eq(0).sum().item<double>(), 300);
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
  EXPECT_EQ(drop.extra_repr(), "p=0.500000");
}

TEST(Dropout, GradientIsTheScaledMask) {
  auto fn = [](const TensorList& xs) {
    manual_seed(11);  // the same mask on every evaluation
    return dropout(xs[0], 0.4);
  };
  Tensor x = randn({6, 5}, {.dtype = kFloat64});
  testing::expect_gradcheck(fn, {x.requires_grad_(true)});
}

TEST(Dropout, RejectsBadInput) {
  EXPECT_THROW_MSG(dropout(ones({2}), 1.5), "between 0 and 1, but got 1.5");
  EXPECT_THROW_MSG(dropout(ones({2}), -0.1), "between 0 and 1");
  EXPECT_THROW_MSG(dropout(ones({2}, {.dtype = kInt64}), 0.5), "floating-point");
  EXPECT_THROW_MSG(nn::Dropout(2.0), "between 0 and 1, but got 2");
}

TEST(DropoutCuda, MaskMatchesCpu) {
  TG_REQUIRE_CUDA();
  testing::expect_cuda_matches_cpu(
      [](const TensorList& xs) {
        manual_seed(5);
        return dropout(xs[0], 0.3);
      },
      {randn({257, 33})});
}

// A seeded compiled step draws what eager mode draws on every call: on warm-up, recording and each
// replay, also when the seed changes between calls (replays take the generator's current seed).
TEST(DropoutCuda, CompiledDrawsMatchEagerUnderTheSameSeed) {
  TG_REQUIRE_CUDA();
  const Tensor x = randn({1000}, {.device = cuda_device()}) + 3.0;
  auto f = compile([](const Tensor& t) { return dropout(t.exp(), 0.5, true); }, {.backend = "cudagraphs"});
  for (uint64_t seed : {7u, 7u, 8u, 9u, 7u}) {
    mark_step_begin();
    manual_seed(seed);
    const Tensor compiled = f(x).clone();
    manual_seed(seed);
    testing::expect_close(compiled, dropout(x.exp(), 0.5, true), 1e-6, 1e-6);
  }
  EXPECT_GE(f.counters().replays, 3);
}

}  // namespace
}  // namespace tg
