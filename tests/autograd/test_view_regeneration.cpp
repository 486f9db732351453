// A view taken before its base is written in place: its gradient must flow through the write, as
// PyTorch's regenerated view grad_fn makes it (the PyTorch oracle found tapegraph routing it around).
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tapegraph.h"

namespace tg {
namespace {

// x.grad of fn on a fresh [2, 3] leaf of ones.
Tensor grad_of(const std::function<Tensor(const Tensor&)>& fn) {
  Tensor x = ones({2, 3}).requires_grad_(true);
  fn(x).backward();
  return x.grad();
}

TEST(ViewRegeneration, ViewTakenBeforeAnInPlaceWriteOfItsBase) {
  // PyTorch: x.grad = -3 everywhere (d/dx of sum(transpose(2x * -1.5))).
  const Tensor g = grad_of([](const Tensor& x) {
    Tensor base = x * 2;
    Tensor view = base.transpose(0, 1);
    base.mul_(-1.5);
    return view.sum();
  });
  testing::expect_close(g, full({2, 3}, -3.0));
}

TEST(ViewRegeneration, ThroughAReductionAndAnotherView) {
  // PyTorch: amax of a constant tensor splits the gradient evenly: -0.5 each.
  const Tensor g = grad_of([](const Tensor& x) {
    Tensor base = x * 2;
    Tensor view = base.transpose(0, 0);
    Tensor other = base[1];
    base.mul_(-1.5);
    other.add_(1.0);
    return view.amax();
  });
  // After the writes base is [[-3, -3, -3], [-2, -2, -2]]: the max is the second row, whose
  // gradient through both writes is -1.5 * 2 / 3 = -1.
  testing::expect_close(g, tensor({0.0, 0.0, 0.0, -1.0, -1.0, -1.0}).reshape({2, 3}).to(kFloat32));
}

TEST(ViewRegeneration, WriteThroughASiblingView) {
  // y = x * 1; a = y[0]; b = y.view(-1); a.mul_(3) writes through a; b sees it.
  const Tensor g = grad_of([](const Tensor& x) {
    Tensor y = x * 1.0;
    Tensor b = y.view({-1});
    Tensor a = y[0];
    a.mul_(3.0);
    return b.sum();
  });
  testing::expect_close(g, tensor({3.0, 3.0, 3.0, 1.0, 1.0, 1.0}).reshape({2, 3}).to(kFloat32));
}

TEST(ViewRegeneration, CompiledMatchesEager) {
  auto fn = [](const Tensor& x) {
    Tensor base = x * 2;
    Tensor view = base.transpose(0, 1);
    base.mul_(-1.5);
    return (view * view).sum();
  };
  auto compiled = compile(fn, {.backend = "aot_eager"});
  for (int i = 0; i < 2; ++i) {
    Tensor x = randn({2, 3}).requires_grad_(true);
    Tensor xe = x.detach().requires_grad_(true);
    compiled(x).backward();
    fn(xe).backward();
    testing::expect_close(x.grad(), xe.grad(), 1e-5, 1e-6);
    testing::expect_close(xe.grad(), xe.detach() * 18.0, 1e-5, 1e-6);  // d/dx (3x)^2 summed = 18x
  }
}

}  // namespace
}  // namespace tg
