// The backward engine: accumulation, retained and freed graphs, version checks, higher-order grads,
// grad mode, detach, hooks, in-place ops on non-leaves and views, and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <utility>
#include <thread>

#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

Tensor vec(std::vector<double> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }
Tensor filled(const Shape& s, double v) { return full(s, v, {.dtype = kFloat64}); }

// ---- accumulation and graph lifetime --------------------------------------------------------

TEST(Engine, GradsAccumulateIntoLeavesAcrossBackwardCalls) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  (x * 3.0).sum().backward();
  expect_close(x.grad(), filled({2}, 3.0));
  (x * x).sum().backward();
  expect_close(x.grad(), vec({5.0, 7.0}));
  x.set_grad(Tensor());
  (x * 2.0).sum().backward();
  expect_close(x.grad(), filled({2}, 2.0));
}

TEST(Engine, ALeafUsedTwiceGetsTheSumOfBothPaths) {
  Tensor x = vec({1.0, -2.0, 0.5}).requires_grad_();
  Tensor y = x * 2.0;
  Tensor z = y * y + y;  // 4x^2 + 2x
  z.sum().backward();
  expect_close(x.grad(), 8.0 * x.detach() + 2.0);
}

TEST(Engine, RetainGraphAllowsASecondBackward) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = (x * x).sum();
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  expect_close(x.grad(), 4.0 * x.detach());
}

TEST(Engine, BackwardThroughAFreedGraphIsAnError) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = (x * x).sum();
  y.backward();
  EXPECT_THROW_MSG(y.backward(), "Trying to backward through the graph a second time");
}

TEST(Engine, SavedTensorModifiedInPlaceIsAnError) {
  Tensor leaf = vec({1.0, 2.0}).requires_grad_();
  Tensor a = leaf * 1.0;
  Tensor y = (a * a).sum();  // saves a
  a.add_(1.0);
  EXPECT_THROW_MSG(y.backward(), "one of the variables needed for gradient computation has been modified by an "
                                 "inplace operation");
  EXPECT_THROW_MSG(y.backward(), "is at version 1; expected version 0 instead");
}

// A tensor without history that a node saves, then written in place with a value computed from that
// node's output, takes a history leading back to the node. Were the node holding the tensor itself,
// the two would keep each other alive for ever; it holds the data and the history of save time.
TEST(Engine, ASavedTensorThatLaterTakesAHistoryFormsNoCycle) {
  std::weak_ptr<Node> mul_node;
  {
    Tensor b = vec({1.0, 2.0, 3.0}).requires_grad_();
    Tensor c = vec({4.0, 5.0, 6.0});  // no history: MulBackward saves it for b's gradient
    Tensor y = b * c;
    mul_node = y.grad_fn();
    c.add_(y);  // c's history now leads through y to the node that saved it
    ASSERT_TRUE(c.requires_grad());
    EXPECT_THROW_MSG(c.sum().backward(), "modified by an inplace operation");
  }
  EXPECT_TRUE(mul_node.expired()) << "the node that saved c outlived every tensor: a reference cycle";
}

TEST(Engine, InPlaceThroughADetachedAliasIsAlsoDetected) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = exp(x);  // saves its output
  Tensor alias = y.detach();
  alias.zero_();
  EXPECT_THROW_MSG(y.sum().backward(), "modified by an inplace operation");
}

TEST(Engine, InPlaceOnALeafThatRequiresGradIsAnError) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  EXPECT_THROW_MSG(x.add_(1.0), "a leaf Variable that requires grad is being used in an in-place operation");
  EXPECT_THROW_MSG(x.narrow(0, 0, 1).mul_(2.0), "a view of a leaf Variable that requires grad");
  {
    NoGradGuard no_grad;
    x.add_(1.0);  // allowed: an update the tape does not see
  }
  expect_close(x, vec({2.0, 3.0}));
}

TEST(Engine, RootGradShapeMismatchIsAnError) {
  Tensor x = random_tensor({2, 3}, kFloat64, true);
  Tensor y = x * 2.0;
  EXPECT_THROW_MSG(y.backward(filled({3}, 1.0)),
                   "Mismatch in shape: grad_output[0] has a shape of [3] and output[0] has a shape of [2, 3].");
}

TEST(Engine, OpReturningAWrongShapedGradIsAnError) {
  struct BadGrad : Function<BadGrad> {
    static Tensor forward(AutogradContext*, Tensor x) { return x * 1.0; }
    static TensorList backward(AutogradContext*, TensorList) { return {ones({5}, {.dtype = kFloat64})}; }
  };
  Tensor x = random_tensor({2}, kFloat64, true);
  Tensor y = exp(BadGrad::apply(x)).sum();
  EXPECT_THROW_MSG(y.backward(), "returned an invalid gradient at index 0 - got [5] but expected shape compatible "
                                 "with [2]");
}

TEST(Engine, NonScalarOutputNeedsAnExplicitGrad) {
  Tensor x = vec({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = x * x;
  EXPECT_THROW_MSG(y.backward(), "grad can be implicitly created only for scalar outputs");
  y.backward(vec({1.0, 2.0, 3.0}));
  expect_close(x.grad(), vec({2.0, 8.0, 18.0}));
}

TEST(Engine, OutputThatDoesNotRequireGradIsAnError) {
  Tensor x = vec({1.0, 2.0});
  EXPECT_THROW_MSG((x * 2.0).sum().backward(),
                   "element 0 of tensors does not require grad and does not have a grad_fn");
  Tensor w = vec({1.0}).requires_grad_();
  EXPECT_THROW_MSG(backward({w.sum(), x.sum()}), "element 1 of tensors does not require grad");
}

TEST(Engine, BackwardOnSeveralRootsWithGrads) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor a = x * 2.0;
  Tensor b = x * x;
  backward({a, b}, {vec({1.0, 1.0}), vec({10.0, 100.0})});
  expect_close(x.grad(), vec({2.0 + 20.0, 2.0 + 400.0}));
}

TEST(Engine, CreateGraphMakesTheGradDifferentiable) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  (x * x * x).sum().backward({}, false, /*create_graph=*/true);
  Tensor g = x.grad();
  ASSERT_TRUE(g.requires_grad());
  expect_close(g, 3.0 * x.detach() * x.detach());
  Tensor gg = grad({g.sum()}, {x})[0];
  expect_close(gg, 6.0 * x.detach());
}

// ---- tg::grad -------------------------------------------------------------------------------

TEST(Grad, DoesNotTouchDotGrad) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor g = grad({(x * x).sum()}, {x})[0];
  expect_close(g, 2.0 * x.detach());
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(g.requires_grad());
}

TEST(Grad, GradWithRespectToAnIntermediate) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor h = x * 3.0;
  Tensor y = (h * h).sum();
  TensorList g = grad({y}, {h, x});
  expect_close(g[0], 2.0 * h.detach());
  expect_close(g[1], 18.0 * x.detach());
}

TEST(Grad, UnusedInputNeedsAllowUnused) {
  Tensor x = vec({1.0}).requires_grad_();
  Tensor unused = vec({2.0}).requires_grad_();
  Tensor y = (x * 2.0).sum();
  EXPECT_THROW_MSG(grad({y}, {x, unused}, {}, true), "appears to not have been used in the graph");
  TensorList g = grad({y}, {x, unused}, {}, true, false, /*allow_unused=*/true);
  expect_close(g[0], vec({2.0}));
  EXPECT_FALSE(g[1].defined());
}

TEST(Grad, InputThatDoesNotRequireGradIsAnError) {
  Tensor x = vec({1.0}).requires_grad_();
  Tensor c = vec({1.0});
  EXPECT_THROW_MSG(grad({(x * c).sum()}, {c}), "does not require grad");
}

TEST(Grad, RetainGraphDefaultsToCreateGraph) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = (x * x).sum();
  grad({y}, {x});
  EXPECT_THROW_MSG(grad({y}, {x}), "Trying to backward through the graph a second time");
  Tensor z = (x * x).sum();
  grad({z}, {x}, {}, std::nullopt, /*create_graph=*/true);
  expect_close(grad({z}, {x})[0], 2.0 * x.detach());
}

TEST(Grad, SecondDerivativeOfCube) {
  Tensor x = vec({-1.5, 0.3, 2.0}).requires_grad_();
  Tensor y = pow(x, 3).sum();
  Tensor d1 = grad({y}, {x}, {}, true, true)[0];
  expect_close(d1, 3.0 * x.detach() * x.detach());
  Tensor d2 = grad({d1.sum()}, {x})[0];
  expect_close(d2, 6.0 * x.detach(), 1e-10, 1e-12);
}

TEST(Grad, ThirdDerivativeOfSin) {
  Tensor x = vec({-1.0, 0.25, 1.3}).requires_grad_();
  Tensor d1 = grad({sin(x).sum()}, {x}, {}, true, true)[0];
  Tensor d2 = grad({d1.sum()}, {x}, {}, true, true)[0];
  Tensor d3 = grad({d2.sum()}, {x})[0];
  expect_close(d1, cos(x.detach()), 1e-10, 1e-12);
  expect_close(d2, -sin(x.detach()), 1e-10, 1e-12);
  expect_close(d3, -cos(x.detach()), 1e-10, 1e-12);
}

// f(p) = sum(tanh(X W1) w2) with p = (W1, w2) flattened in a vector: a tiny two-layer MLP.
Tensor mlp_loss(const Tensor& p, const Tensor& X) {
  Tensor W1 = p.narrow(0, 0, 6).view({3, 2});
  Tensor w2 = p.narrow(0, 6, 2).view({2, 1});
  return matmul(tanh(matmul(X, W1)), w2).pow(2).sum();
}

TEST(Grad, HessianVectorProductMatchesFiniteDifferences) {
  manual_seed(7);
  Tensor X = random_tensor({4, 3});
  Tensor p = random_tensor({8}, kFloat64, true);
  Tensor v = random_tensor({8});
  Tensor g = grad({mlp_loss(p, X)}, {p}, {}, true, true)[0];
  Tensor hvp = grad({(g * v).sum()}, {p})[0];

  const double eps = 1e-5;
  auto grad_at = [&](const Tensor& point) {
    Tensor q = point.detach().clone().requires_grad_();
    return grad({mlp_loss(q, X)}, {q})[0];
  };
  Tensor numeric = (grad_at(p.detach() + v * eps) - grad_at(p.detach() - v * eps)) / (2 * eps);
  expect_close(hvp, numeric, 1e-5, 1e-7);
}

// Fixed distinct weights, so that sum(softmax(x) * w) is not constant.
Tensor weights6() { return arange(1.0, 7.0, 1.0, {.dtype = kFloat64}); }

// Third derivatives run the backward of each op's backward helper (tanh_backward, gelu_backward, the
// softmax backward ops): compare them with finite differences of the analytic second derivative.
TEST(Grad, ThirdDerivativesMatchFiniteDifferencesOfTheSecond) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {"tanh", [](const Tensor& x) { return tanh(x); }, -2, 2},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -2, 2},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -2, 2},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, -2, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, -1, 1},
      {"log", [](const Tensor& x) { return log(x); }, 0.5, 1.5},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.5, 1.5},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.5, 1.5},
      {"softmax", [](const Tensor& x) { return softmax(x.view({2, 3}), 1).view({6}) * weights6(); }, -1, 1},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x.view({2, 3}), 0).view({6}) * weights6(); }, -1, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    manual_seed(11);
    Tensor x0 = random_tensor({6}, kFloat64, false, c.lo, c.hi);
    // d2 = H(x) 1 (Hessian of sum f times ones); d3 = gradient of sum(d2), checked against finite
    // differences of sum(d2) computed from the analytic second derivative.
    auto second = [&](const Tensor& at, bool create_graph) {
      Tensor x = at.detach().clone().requires_grad_();
      Tensor d1 = grad({c.f(x).sum()}, {x}, {}, true, true)[0];
      Tensor d2 = grad({d1.sum()}, {x}, {}, true, create_graph)[0];
      return std::make_pair(x, d2);
    };
    auto [x, d2] = second(x0, true);
    Tensor d3 = grad({d2.sum()}, {x})[0];
    const double eps = 1e-5;
    std::vector<double> numeric(6);
    for (int64_t i = 0; i < 6; ++i) {
      Tensor e = zeros({6}, {.dtype = kFloat64});
      e.narrow(0, i, 1).fill_(eps);
      numeric[static_cast<size_t>(i)] =
          (second(x0 + e, false).second.sum().item<double>() - second(x0 - e, false).second.sum().item<double>()) /
          (2 * eps);
    }
    expect_close(d3, from_vector(numeric, {6}), 1e-5, 1e-7);
  }
}

TEST(Grad, GradOutputsWeightTheOutputs) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = x * x;
  Tensor g = grad({y}, {x}, {vec({3.0, 0.5})})[0];
  expect_close(g, vec({6.0, 2.0}));
}

// ---- grad mode ------------------------------------------------------------------------------

TEST(GradMode, NoGradGuardStopsRecording) {
  Tensor x = vec({1.0}).requires_grad_();
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(is_grad_enabled());
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(y.grad_fn());
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(GradMode, SetGradEnabled) {
  Tensor x = vec({1.0}).requires_grad_();
  set_grad_enabled(false);
  Tensor y = x * 2.0;
  set_grad_enabled(true);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(GradMode, GuardsNestAndRestore) {
  {
    GradModeGuard off(false);
    EXPECT_FALSE(is_grad_enabled());
    {
      GradModeGuard on(true);
      EXPECT_TRUE(is_grad_enabled());
      {
        NoGradGuard inner;
        EXPECT_FALSE(is_grad_enabled());
      }
      EXPECT_TRUE(is_grad_enabled());
    }
    EXPECT_FALSE(is_grad_enabled());
  }
  EXPECT_TRUE(is_grad_enabled());
}

TEST(GradMode, IsThreadLocal) {
  NoGradGuard no_grad;
  bool other_thread_enabled = false;
  bool other_thread_records = false;
  Tensor x = vec({1.0}).requires_grad_();
  std::thread worker([&] {
    other_thread_enabled = is_grad_enabled();
    other_thread_records = (x * 2.0).requires_grad();
  });
  worker.join();
  EXPECT_TRUE(other_thread_enabled);
  EXPECT_TRUE(other_thread_records);
  EXPECT_FALSE(is_grad_enabled());
}

// ---- detach and requires_grad ---------------------------------------------------------------

TEST(Detach, SharesDataButNotHistory) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.raw_data(), y.raw_data());
  EXPECT_TRUE(y.requires_grad());
  Tensor z = (d * x).sum();
  z.backward();
  expect_close(x.grad(), vec({2.0, 4.0}));  // d is a constant
}

TEST(Detach, DetachInPlaceCutsTheTensorFromItsGraph) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = x * 2.0;
  y.detach_();
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  EXPECT_FALSE(y.grad_fn());
  EXPECT_THROW_MSG(y.sum().backward(), "does not require grad");
}

TEST(RequiresGrad, ErrorsOnNonLeavesAndIntegerTensors) {
  Tensor x = vec({1.0}).requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_THROW_MSG(y.requires_grad_(false), "you can only change requires_grad flags of leaf variables");
  Tensor i = arange(3);
  EXPECT_THROW_MSG(i.requires_grad_(), "only Tensors of floating point dtype can require gradients");
  x.requires_grad_(false);
  EXPECT_FALSE(x.requires_grad());
  EXPECT_FALSE((x * 2.0).requires_grad());
}

TEST(RequiresGrad, NonFloatingOutputsDoNotRequireGrad) {
  Tensor x = vec({-1.0, 2.0, 0.5}).requires_grad_();
  EXPECT_FALSE(gt(x, 0.0).requires_grad());
  EXPECT_FALSE(eq(x, x).requires_grad());
  EXPECT_FALSE(argmax(x).requires_grad());
  EXPECT_FALSE(x.to(kInt64).requires_grad());
  EXPECT_TRUE(x.to(kFloat32).requires_grad());
}

TEST(RequiresGrad, FactoryOptionMakesALeaf) {
  Tensor x = zeros({2}, {.dtype = kFloat64, .requires_grad = true});
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
}

// ---- hooks and retain_grad ------------------------------------------------------------------

TEST(Hooks, LeafHookReplacesTheAccumulatedGradient) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  int calls = 0;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 2.0;
  });
  (x * 3.0).sum().backward();
  EXPECT_EQ(calls, 1);
  expect_close(x.grad(), filled({2}, 6.0));
}

TEST(Hooks, HookReturningUndefinedKeepsTheGradient) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor seen;
  x.register_hook([&](const Tensor& g) {
    seen = g.detach().clone();
    return Tensor();
  });
  (x * 3.0).sum().backward();
  expect_close(seen, filled({2}, 3.0));
  expect_close(x.grad(), filled({2}, 3.0));
}

TEST(Hooks, NonLeafHookChangesWhatFlowsUpstream) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = x * 3.0;
  y.register_hook([](const Tensor& g) { return g * 2.0; });
  (y * y).sum().backward();  // dL/dy = 2y, doubled, then times 3
  expect_close(x.grad(), 36.0 * x.detach());
  EXPECT_FALSE(y.grad().defined());
}

TEST(Hooks, RetainGradKeepsANonLeafGradient) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = x * 3.0;
  y.retain_grad();
  (y * y).sum().backward();
  expect_close(y.grad(), 2.0 * y.detach());
  expect_close(x.grad(), 18.0 * x.detach());
  (y * y).sum().backward();
  expect_close(y.grad(), 4.0 * y.detach());  // accumulates like a leaf
}

TEST(Hooks, RetainedGradSeesTheHookedGradientWhateverTheOrder) {
  // As in PyTorch, retain_grad's hook runs after the tensor's own hooks, even ones registered later.
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = x * 3.0;
  y.retain_grad();
  y.register_hook([](const Tensor& g) { return g * 2.0; });
  y.sum().backward();
  expect_close(y.grad(), filled({2}, 2.0));
  expect_close(x.grad(), filled({2}, 6.0));
}

TEST(Hooks, HooksOnIntermediatesOfTgGrad) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = x * 3.0;
  y.register_hook([](const Tensor& g) { return g * 0.5; });
  expect_close(grad({y.sum()}, {x})[0], filled({2}, 1.5));
}

// ---- in-place ops on non-leaves and views ---------------------------------------------------

TEST(InPlace, OnANonLeafGivesTheRightGrads) {
  Tensor x = vec({1.0, -2.0, 3.0}).requires_grad_();
  Tensor y = x * 2.0;
  y.mul_(x);  // 2x^2
  y.add_(x);  // 2x^2 + x
  EXPECT_EQ(y.grad_fn()->name(), "AddBackward0");
  y.sum().backward();
  expect_close(x.grad(), 4.0 * x.detach() + 1.0);
}

// y.mul_(y) saves y as its other operand, and the op overwrites it: like PyTorch, backward reports
// the modification instead of differentiating with the written value.
TEST(InPlace, AnOperandAliasingTheWrittenTensorIsReportedAtBackward) {
  Tensor x = vec({1.0, -2.0, 3.0}).requires_grad_();
  Tensor y = x * 1.0;
  y.mul_(y);
  EXPECT_THROW_MSG(y.sum().backward(), "modified by an inplace operation");
}

// The node of y.mul_(y) saves y, whose history is that node once the write is recorded: the saved
// operand must not hold the node alive, or the tape leaks through a reference cycle.
TEST(InPlace, AnOperandAliasingTheWrittenTensorMakesNoReferenceCycle) {
  Tensor x = vec({1.0, -2.0, 3.0}).requires_grad_();
  std::weak_ptr<Node> node;
  {
    Tensor y = x * 1.0;
    y.mul_(y);
    node = y.grad_fn();
    ASSERT_FALSE(node.expired());
  }
  EXPECT_TRUE(node.expired());
}

TEST(InPlace, DivAndSubInPlaceOnANonLeaf) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor d = vec({2.0, 4.0}).requires_grad_();
  Tensor y = x * x;
  y.div_(d);
  y.sub_(x, 2.0);  // x^2/d - 2x
  y.sum().backward();
  expect_close(x.grad(), 2.0 * x.detach() / d.detach() - 2.0);
  expect_close(d.grad(), -(x.detach() * x.detach()) / (d.detach() * d.detach()));
}

TEST(InPlace, OnAViewOfANonLeafRoutesGradsThroughCopySlices) {
  Tensor x = vec({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor y = x * 1.0;
  Tensor v = y.narrow(0, 1, 2);
  v.mul_(2.0);
  EXPECT_EQ(y.grad_fn()->name(), "CopySlices");
  expect_close(y.detach(), vec({1.0, 4.0, 6.0, 4.0}));
  (y * y).sum().backward();  // c = [1, 2, 2, 1]: 2 c^2 x
  expect_close(x.grad(), vec({2.0, 16.0, 24.0, 8.0}));
}

TEST(InPlace, TheWrittenViewCarriesTheNewHistory) {
  Tensor x = vec({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor y = x * 1.0;
  Tensor v = y.narrow(0, 0, 2);
  v.mul_(x.narrow(0, 2, 2));  // v = x[0:2] * x[2:4]
  (v * 1.0).sum().backward();
  expect_close(x.grad(), vec({3.0, 4.0, 1.0, 2.0}));
}

TEST(InPlace, CopyIntoASliceOfANonLeaf) {
  Tensor x = vec({1.0, 2.0, 3.0}).requires_grad_();
  Tensor s = vec({5.0, 7.0}).requires_grad_();
  Tensor y = x * 2.0;
  y.slice(0, 1, 3).copy_(s * s);
  expect_close(y.detach(), vec({2.0, 25.0, 49.0}));
  y.sum().backward();
  expect_close(x.grad(), vec({2.0, 0.0, 0.0}));
  expect_close(s.grad(), vec({10.0, 14.0}));
}

TEST(InPlace, OnAViewOfAViewOfANonLeaf) {
  Tensor x = random_tensor({3, 4}, kFloat64, true);
  Tensor y = x * 1.0;
  Tensor row = y.select(0, 1);
  Tensor part = row.narrow(0, 1, 2);
  part.mul_(3.0);
  y.sum().backward();
  Tensor expected = ones({3, 4}, {.dtype = kFloat64});
  {
    NoGradGuard no_grad;
    expected.select(0, 1).narrow(0, 1, 2).fill_(3.0);
  }
  expect_close(x.grad(), expected);
}

TEST(InPlace, GradcheckThroughViewWrites) {
  Tensor x = random_tensor({2, 3}, kFloat64, true);
  Tensor w = random_tensor({3}, kFloat64, true);
  testing::expect_gradcheck(
      [](const TensorList& in) {
        Tensor y = in[0] * 1.0;
        y.select(0, 0).mul_(in[1]);
        y.t().narrow(0, 1, 1).add_(in[1].narrow(0, 0, 1).unsqueeze(0));
        return y * y;
      },
      {x, w});
}

TEST(Engine, BackwardOnAnotherThreadUsesThatThreadsGradMode) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor y = (x * x).sum();
  NoGradGuard no_grad;  // the main thread's mode does not affect the worker
  std::thread worker([&] { y.backward(); });
  worker.join();
  expect_close(x.grad(), 2.0 * x.detach());
}

// An in-place write of a value that requires grad into an integer tensor gives it no history.
TEST(Autograd, IntegerTargetOfAnInPlaceWriteTakesNoHistory) {
  Tensor m = zeros({3}, {.dtype = kInt64});
  const Tensor x = (randn({3}) * 10).requires_grad_(true);
  m.copy_(x);
  EXPECT_FALSE(m.requires_grad());
  EXPECT_EQ(m.grad_fn(), nullptr);
}

// A write into a view, then a write that overwrites the whole base with a constant: no gradient
// reaches the view's write, and backward must not fail on it.
TEST(Autograd, ViewWriteWhollyOverwrittenLaterGetsNoGradient) {
  const Tensor a = randn({3}).requires_grad_(true);
  Tensor x = a * 1;
  x.narrow(0, 0, 1).mul_(2);
  x.copy_(zeros({3}));
  (x * a).sum().backward();
  testing::expect_close(a.grad(), zeros({3}), 0, 0);
}

}  // namespace
}  // namespace tg
