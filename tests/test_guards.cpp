// compile() guards: captured tensors (rebinding vs. in-place updates), host values declared under
// tracing (a module's training flag), and the compiled-entry lifetime under create_graph.
#include <gtest/gtest.h>

#include "autograd/function.h"
#include "graphs/compile.h"
#include "nn/nn.h"
#include "ops/compare.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

const CompileOptions kAot{.backend = "aot_eager"};

// The double-backward cases, one by one: after everything goes out of scope nothing may remain.
std::weak_ptr<TensorImpl> double_backward_case(int which, bool explicit_grad) {
  Tensor x = scalar_tensor(1.0).requires_grad_(true);
  std::weak_ptr<TensorImpl> watch = x.impl_ptr();
  Tensor grad_output = explicit_grad ? scalar_tensor(1.0).requires_grad_(true) : Tensor();
  TensorList gos = explicit_grad ? TensorList{grad_output} : TensorList{};
  if (which == 1) {
    auto c1 = compile([&](const Tensor& a) {
      Tensor y = a.sin().exp();
      Tensor gx = grad({y}, {a}, gos, {}, true)[0];
      grad({gx}, {a});
      return gx;
    }, kAot);
    EXPECT_THROW(c1(x), Error);
  } else if (which == 2) {
    auto c2 = compile([&](const Tensor& a) { return grad({a.sin().exp()}, {a}, gos, {}, true)[0]; }, kAot);
    Tensor gx2 = c2(x);
    EXPECT_THROW(grad({gx2}, {x}), Error);
  } else {
    auto c3 = compile([](const Tensor& a) { return a.sin().exp(); }, kAot);
    Tensor y3 = c3(x);
    Tensor gx3 = grad({y3}, {x}, gos, {}, true)[0];
    EXPECT_THROW(grad({gx3}, {x}), Error);
  }
  return watch;
}

TEST(Guards, DoubleBackwardLeavesNothingAlive) {
  for (int which : {1, 2, 3})
    for (bool explicit_grad : {true, false})
      EXPECT_TRUE(double_backward_case(which, explicit_grad).expired()) << "case " << which << " explicit " << explicit_grad;
}


// A loop that rebinds its captured weight (w = w - lr * g, outside no-grad) retraces each step
// with the reason, and always computes with the current w.
TEST(Guards, RebindingACapturedTensorRetraces) {
  Tensor w = random_tensor({4, 3}, kFloat32, true);
  auto step = compile([&w](const Tensor& x) { return x.mm(w).tanh().sum(); }, kAot);
  Tensor x = random_tensor({2, 4}, kFloat32);
  for (int i = 0; i < 3; ++i) {
    Tensor expected = x.mm(w.detach()).tanh().sum();
    Tensor loss = step(x);
    expect_close(loss, expected, 1e-5, 1e-6);
    Tensor g = grad({loss}, {w})[0];
    w = w - 0.1 * g;  // a new tensor; the old one has no owner left but the compiled function
  }
  EXPECT_EQ(step.counters().compilations, 3);
  ASSERT_EQ(step.counters().recompile_reasons.size(), 2u);
  EXPECT_EQ(step.counters().recompile_reasons[0], "captured tensor 'lifted0' was replaced");
  EXPECT_EQ(step.counters().eager_fallbacks, 0);
}

// In-place updates (sub_ under no-grad, copy_) keep the captured tensor: no retrace, fresh values.
TEST(Guards, InPlaceUpdatesOfCapturedTensorsNeedNoRetrace) {
  Tensor w = random_tensor({4, 3}, kFloat32, true);
  auto step = compile([&w](const Tensor& x) { return x.mm(w).tanh().sum(); }, kAot);
  Tensor x = random_tensor({2, 4}, kFloat32);
  for (int i = 0; i < 3; ++i) {
    Tensor expected = x.mm(w.detach()).tanh().sum();
    Tensor loss = step(x);
    expect_close(loss, expected, 1e-5, 1e-6);
    loss.backward();
    NoGradGuard no_grad;
    if (i == 0) w.sub_(0.1 * w.grad());
    else w.copy_(random_tensor({4, 3}, kFloat32));
    w.grad() = Tensor();
  }
  EXPECT_EQ(step.counters().compilations, 1);
  EXPECT_TRUE(step.counters().recompile_reasons.empty());
  EXPECT_EQ(step.counters().compiled_calls, 3);
}

// A captured buffer replaced by a new tensor of the same shape: retrace, new values used.
TEST(Guards, ReplacedBufferRetraces) {
  Tensor scale = full({3}, 2.0);
  Tensor shift = zeros({3});
  auto f = compile([&](const Tensor& x) { return x * scale + shift; }, kAot);
  Tensor x = random_tensor({2, 3}, kFloat32);
  expect_close(f(x), x * 2.0);
  shift = ones({3});
  expect_close(f(x), x * 2.0 + 1.0);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.counters().recompile_reasons[0], "captured tensor 'lifted1' was replaced");
}

// A captured tensor whose storage was swapped behind the same handle: retrace.
TEST(Guards, SwappedStorageRetraces) {
  Tensor w = random_tensor({3}, kFloat32);
  auto f = compile([&w](const Tensor& x) { return x + w; }, kAot);
  Tensor x = random_tensor({3}, kFloat32);
  f(x);
  Tensor fresh = random_tensor({3}, kFloat32);
  w.impl()->set_geometry(fresh.impl()->storage(), w.sizes(), w.strides(), 0);
  expect_close(f(x), x + fresh);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.counters().recompile_reasons[0], "captured tensor 'lifted0' was replaced");
}

// A module re-created between calls: its parameters are new tensors, so the graph is retraced.
TEST(Guards, RecreatedModuleRetraces) {
  auto model = std::make_shared<nn::Linear>(4, 2);
  auto f = compile([&model](const Tensor& x) { return (*model)(x); }, kAot);
  Tensor x = random_tensor({3, 4}, kFloat32);
  expect_close(f(x), (*model)(x));
  model = std::make_shared<nn::Linear>(4, 2);
  Tensor expected = (*model)(x);
  expect_close(f(x), expected);
  EXPECT_EQ(f.counters().compilations, 2);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.counters().recompile_reasons[0], "captured tensor 'lifted0' was replaced");
}

// model.eval() after the first compiled call runs the eval graph (no dropout), with the reason;
// train() again reuses the first graph.
TEST(Guards, TrainingFlagIsGuarded) {
  auto model = std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::Dropout>(0.5)});
  auto f = compile([&model](const Tensor& x) { return (*model)(x); }, kAot);
  Tensor x = random_tensor({4, 8}, kFloat32);
  Tensor train_out = f(x);
  Tensor eval_expected;
  {
    NoGradGuard no_grad;
    model->eval();
    eval_expected = (*model)(x);
  }
  EXPECT_GT(eq(train_out, 0.0).to(kFloat32).sum().item<double>(), 0.0);  // dropout zeroed some elements
  Tensor eval_out = f(x);
  expect_close(eval_out, eval_expected, 1e-5, 1e-6);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.counters().recompile_reasons[0], "host value 'Dropout.training' changed: expected true, got false");
  model->train();
  f(x);
  EXPECT_EQ(f.counters().compilations, 2);
  EXPECT_EQ(f.counters().recompiles, 1);
}

// Any code can declare a host value it specialized on; a changed value recompiles.
TEST(Guards, DeclaredHostValueRecompiles) {
  auto mode = std::make_shared<int64_t>(1);
  auto f = compile([&mode](const Tensor& x) {
    graphs::guard_value("mode", mode);
    return *mode == 1 ? x * 2 : x * 3;
  }, kAot);
  Tensor x = random_tensor({3}, kFloat32);
  expect_close(f(x), x * 2);
  *mode = 2;
  expect_close(f(x), x * 3);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.counters().recompile_reasons[0], "host value 'mode' changed: expected 1, got 2");
  mode.reset();
  mode = std::make_shared<int64_t>(2);
  f(x);
  EXPECT_EQ(f.counters().recompile_reasons.back(), "host value 'mode' is gone (its owner was destroyed)");
}

}  // namespace
}  // namespace tg
