// Guards that keep cached graphs honest: captured tensors that were rebound or swapped, host values
// (training flags, dropout probabilities, user values) that changed, and the compiled double-backward
// graph that must not keep itself alive.
#include <gtest/gtest.h>

#include "graphs/compile.h"
#include "nn/nn.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::random_tensor;

CompileOptions aot() { return CompileOptions{.backend = "aot_eager"}; }

bool has_reason(const graphs::CompileCounters& c, const std::string& text) {
  for (const std::string& r : c.recompile_reasons)
    if (r.find(text) != std::string::npos) return true;
  return false;
}

// A loop that rebinds a captured tensor outside no-grad must compute with the new tensor.
TEST(CapturedGuards, RebindingACapturedTensorRetraces) {
  Tensor w = random_tensor({4, 3}, kFloat32);
  auto f = compile([&](const Tensor& x) { return x.mm(w).sum(); }, aot());
  const Tensor x = random_tensor({2, 4}, kFloat32);
  for (int step = 0; step < 3; ++step) {
    testing::expect_close(f(x), x.mm(w).sum(), 1e-5, 1e-5);
    w = w - 0.1 * w.abs();  // a new tensor: the old one has no owner left
  }
  EXPECT_EQ(f.counters().recompiles, 2);
  EXPECT_TRUE(has_reason(f.counters(), "captured tensor 'lifted0' was replaced"));
}

// In-place updates keep the tensor's identity: no retrace, and the graph sees the new values.
TEST(CapturedGuards, InPlaceUpdatesNeedNoRetrace) {
  Tensor w = random_tensor({4, 3}, kFloat32);
  auto f = compile([&](const Tensor& x) { return x.mm(w).sum(); }, aot());
  const Tensor x = random_tensor({2, 4}, kFloat32);
  for (int step = 0; step < 3; ++step) {
    testing::expect_close(f(x), x.mm(w).sum(), 1e-5, 1e-5);
    w.add_(1.0);
    w.copy_(w * 0.5);
  }
  EXPECT_EQ(f.counters().compilations, 1);
  EXPECT_EQ(f.counters().recompiles, 0);
}

// set_() swaps the storage under a live tensor: each call reads the tensor as it is now, so the
// new values are used without a retrace.
TEST(CapturedGuards, SwappedStorageIsReadWithoutRetrace) {
  Tensor w = random_tensor({3}, kFloat32);
  auto f = compile([&](const Tensor& x) { return x * w; }, aot());
  const Tensor x = random_tensor({3}, kFloat32);
  f(x);
  {
    NoGradGuard no_grad;
    w.set_(random_tensor({3}, kFloat32));
  }
  testing::expect_close(f(x), x * w, 1e-6, 1e-6);
  EXPECT_EQ(f.counters().compilations, 1);
}

// A buffer replaced by a new tensor and a module re-created are both seen.
TEST(CapturedGuards, ReplacedModuleRetraces) {
  auto model = std::make_shared<nn::Linear>(4, 2);
  auto f = compile([&](const Tensor& x) { return (*model)(x).sum(); }, aot());
  const Tensor x = random_tensor({3, 4}, kFloat32);
  f(x);
  model = std::make_shared<nn::Linear>(4, 2);  // the old parameters die with the old module
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = (*model)(x).sum();
  }
  testing::expect_close(f(x).detach(), expected, 1e-5, 1e-6);
  EXPECT_TRUE(has_reason(f.counters(), "was replaced"));
}

// eval() after the first compiled call switches to the eval graph, with the reason recorded.
TEST(HostValueGuards, TrainingFlagChangeRecompiles) {
  manual_seed(0);
  nn::Sequential model{std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::Dropout>(0.5)};
  auto f = compile([&](const Tensor& x) { return model(x); }, aot());
  const Tensor x = random_tensor({16, 8}, kFloat32);
  f(x);
  model.eval();
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = model(x);
  }
  testing::expect_close(f(x).detach(), expected, 1e-6, 1e-6);  // eval: no dropout, deterministic
  EXPECT_EQ(f.counters().recompiles, 1);
  EXPECT_TRUE(has_reason(f.counters(), "host value 'training' changed: expected true, got false"));
  // Back to training: the first graph applies again, no third compilation.
  model.train();
  f(x);
  EXPECT_EQ(f.counters().compilations, 2);
}

TEST(HostValueGuards, DropoutProbabilityChangeRecompiles) {
  auto drop = std::make_shared<nn::Dropout>(0.25);
  auto f = compile([&](const Tensor& x) { return (*drop)(x); }, aot());
  const Tensor x = random_tensor({1000}, kFloat32, false, 1.0, 2.0);
  f(x);
  drop->set_p(1.0);  // everything dropped: a stale graph would still keep three quarters
  EXPECT_EQ(f(x).abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(has_reason(f.counters(), "host value 'dropout.p' changed: expected 0.25, got 1"));
}

// User code declares its own host values with Guarded<T>.
TEST(HostValueGuards, UserValuesAreGuarded) {
  Guarded<int> power("power", 2);
  auto f = compile(
      [&](const Tensor& x) {
        Tensor y = x;
        for (int i = 1; i < power.get(); ++i) y = y * x;
        return y;
      },
      aot());
  const Tensor x = random_tensor({5}, kFloat32);
  testing::expect_close(f(x), x * x, 1e-6, 1e-6);
  power.set(3);
  testing::expect_close(f(x), x * x * x, 1e-6, 1e-6);
  EXPECT_TRUE(has_reason(f.counters(), "host value 'power' changed: expected 2, got 3"));
  power.set(2);
  f(x);
  EXPECT_EQ(f.counters().compilations, 2);  // the first graph applies again
}

// Reading a Guarded value outside tracing records nothing and costs no guard.
TEST(HostValueGuards, ReadsOutsideTracingRecordNothing) {
  Guarded<bool> flag("flag", true);
  EXPECT_FALSE(is_tracing());
  EXPECT_TRUE(flag.get());
  Guarded<bool> copy = flag;
  copy.set(false);
  EXPECT_TRUE(flag.peek());  // copies hold their own cell
}

// create_graph through a compiled function must not leave the compiled node and its saved values
// in a reference cycle (the seed's double-backward case leaked under LeakSanitizer).
TEST(CompiledBackwardLifetime, SavedOutputsDoNotKeepTheirNodeAlive) {
  std::weak_ptr<Node> node;
  {
    auto f = compile([](const Tensor& a) { return a.sin().exp(); }, aot());
    Tensor x = scalar_tensor(1.0).requires_grad_(true);
    Tensor y = f(x);  // exp saves its output: the same tensor the node is attached to
    node = y.grad_fn();
    grad({y}, {x}, {}, {}, /*create_graph=*/true);
  }
  EXPECT_TRUE(node.expired());
}

}  // namespace
}  // namespace tg
