// compile() with non-tensor arguments: scalars, strings and integer lists guarded by value, tensor
// lists flattened into graph inputs (with aliasing guards), modules passed by reference.
#include <gtest/gtest.h>

#include "graphs/compile.h"
#include "nn/nn.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

TEST(CompileArgs, ScalarsAreGuardedByValue) {
  auto f = compile([](const Tensor& x, int64_t n, double s, bool neg) {
    Tensor y = x * static_cast<double>(n) + s;
    return neg ? -y : y;
  }, {.backend = "aot_eager", .input_names = {"x", "n", "s", "neg"}});
  Tensor x = random_tensor({3}, kFloat32);
  expect_close(f(x, int64_t{2}, 0.5, false), x * 2.0 + 0.5);
  expect_close(f(x, int64_t{2}, 0.5, false), x * 2.0 + 0.5);
  EXPECT_EQ(f.counters().compilations, 1);
  expect_close(f(x, int64_t{3}, 0.5, false), x * 3.0 + 0.5);
  expect_close(f(x, int64_t{3}, 0.25, false), x * 3.0 + 0.25);
  expect_close(f(x, int64_t{3}, 0.25, true), -(x * 3.0 + 0.25));
  const auto& reasons = f.counters().recompile_reasons;
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons[0], "input 'n' changed: expected 2, got 3");
  EXPECT_EQ(reasons[1], "input 's' changed: expected 0.5, got 0.25");
  EXPECT_EQ(reasons[2], "input 'neg' changed: expected false, got true");
  // An earlier value finds its graph again.
  expect_close(f(x, int64_t{2}, 0.5, false), x * 2.0 + 0.5);
  EXPECT_EQ(f.counters().compilations, 4);
}

TEST(CompileArgs, StringsAndIntegerListsAreGuardedByValue) {
  auto f = compile([](const Tensor& x, const std::string& mode, const std::vector<int64_t>& shape) {
    Tensor y = x.reshape(shape);
    return mode == "sum" ? y.sum({0}) : y.amax({0});
  }, {.backend = "aot_eager"});
  Tensor x = random_tensor({6}, kFloat32);
  expect_close(f(x, std::string("sum"), std::vector<int64_t>{2, 3}), x.reshape({2, 3}).sum({0}));
  expect_close(f(x, std::string("max"), std::vector<int64_t>{2, 3}), x.reshape({2, 3}).amax({0}));
  expect_close(f(x, std::string("max"), std::vector<int64_t>{3, 2}), x.reshape({3, 2}).amax({0}));
  const auto& reasons = f.counters().recompile_reasons;
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0], "input 1 changed: expected 'sum', got 'max'");
  EXPECT_EQ(reasons[1], "input 2[0] changed: expected 2, got 3");
}

TEST(CompileArgs, TensorListsAreFlattenedWithAliasGuards) {
  auto f = compile([](const std::vector<Tensor>& xs, const Tensor& w) {
    Tensor acc = xs[0] * w;
    for (size_t i = 1; i < xs.size(); ++i) acc = acc + xs[i] * w;
    return acc.sum();
  }, {.backend = "aot_eager", .input_names = {"xs", "w"}});
  Tensor a = random_tensor({3}, kFloat32, true), b = random_tensor({3}, kFloat32, true);
  Tensor w = random_tensor({3}, kFloat32, true);
  Tensor out = f(std::vector<Tensor>{a, b}, w);
  expect_close(out, (a * w + b * w).sum());
  out.backward();
  expect_close(a.grad(), w.detach());
  expect_close(w.grad(), (a + b).detach());
  f(std::vector<Tensor>{a, a}, w);
  f(std::vector<Tensor>{a, b, a}, w);
  const auto& reasons = f.counters().recompile_reasons;
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0], "input 'xs'[1] is not input 'xs'[0]");
  EXPECT_EQ(reasons[1], "len(input 'xs') changed: expected 2, got 3");
}

TEST(CompileArgs, ModulesPassByReferenceAndAreGuardedByIdentity) {
  nn::Linear m1(4, 2), m2(4, 2);
  auto f = compile([](nn::Linear& m, const Tensor& x) { return m(x); }, {.backend = "aot_eager"});
  Tensor x = random_tensor({3, 4}, kFloat32);
  expect_close(f(m1, x), m1(x));
  expect_close(f(m1, x), m1(x));
  EXPECT_EQ(f.counters().compilations, 1);
  expect_close(f(m2, x), m2(x));
  EXPECT_EQ(f.counters().compilations, 2);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_NE(f.counters().recompile_reasons[0].find("input 0 (by reference) changed"), std::string::npos);
}

TEST(CompileArgs, ArgumentTypesMustStayTheSame) {
  auto f = compile([](const Tensor& x, auto n) { return x * static_cast<double>(n); }, {.backend = "aot_eager"});
  Tensor x = random_tensor({3}, kFloat32);
  f(x, int64_t{2});
  EXPECT_THROW_MSG(f(x, 2.0), "must be called with the same argument types");
}

TEST(CompileArgs, ExportForwardRunsWithoutTracingTheJoint) {
  nn::Linear lin(5, 7);
  auto exported = graphs::export_forward([&lin](const TensorList& xs) { return TensorList{lin(xs[0])}; },
                                         {random_tensor({3, 4, 5}, kFloat32)});
  for (const auto& n : exported.graph().nodes) EXPECT_EQ(n.phase, graphs::Phase::Forward);
  Tensor x = random_tensor({3, 4, 5}, kFloat32);
  expect_close(exported({x})[0], lin(x), 1e-5, 1e-6);
  EXPECT_THROW_MSG(exported({random_tensor({2, 5}, kFloat32)}), "[export] input 0 was exported as");
}


// A loop that rebinds a captured weight more often than the cache limit: entries whose captured
// tensor is gone are dropped, so every step is compiled (never an eager fallback) and correct.
TEST(CompileArgs, RebindingLoopNeverFillsTheCache) {
  Tensor w = random_tensor({4, 3}, kFloat32, true);
  auto step = compile([&w](const Tensor& x, double scale) { return (x.mm(w) * scale).sum(); },
                      {.backend = "aot_eager", .cache_limit = 2});
  Tensor x = random_tensor({2, 4}, kFloat32);
  for (int i = 0; i < 5; ++i) {
    expect_close(step(x, 0.5), (x.mm(w.detach()) * 0.5).sum(), 1e-5, 1e-6);
    w = (w - 0.1).detach().requires_grad_(true);
  }
  EXPECT_EQ(step.counters().compilations, 5);
  EXPECT_EQ(step.counters().eager_fallbacks, 0);
  EXPECT_EQ(step.counters().recompile_reasons.back(), "captured tensor 'lifted0' was replaced");
}

}  // namespace
}  // namespace tg
