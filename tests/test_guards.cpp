// compile() guards: captured tensors (rebinding vs. in-place updates), host values declared under
// tracing (a module's training flag), and the compiled-entry lifetime under create_graph.
#include <gtest/gtest.h>

#include "autograd/function.h"
#include "graphs/compile.h"
#include "nn/nn.h"
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

}  // namespace
}  // namespace tg
