// Custom autograd Functions: context, saved tensors, dirty and non-differentiable outputs, double backward.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::random_tensor;

Tensor vec(std::vector<double> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

// y = k * x with a non-tensor argument kept in saved_data.
struct Scale : Function<Scale> {
  static Tensor forward(AutogradContext* ctx, Tensor x, double k) {
    ctx->saved_data["k"] = k;
    return x * k;
  }
  static TensorList backward(AutogradContext* ctx, TensorList grads) {
    return {grads[0] * std::get<double>(ctx->saved_data["k"])};
  }
};

// y = x^3, backward written with differentiable ops so double backward works.
struct Cube : Function<Cube> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static TensorList backward(AutogradContext* ctx, TensorList grads) {
    Tensor x = ctx->get_saved_variables()[0];
    return {grads[0] * 3.0 * x * x};
  }
};

// y = exp(x), saving its own output.
struct Exp : Function<Exp> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    Tensor y = exp(x);
    ctx->save_for_backward({y});
    return y;
  }
  static TensorList backward(AutogradContext* ctx, TensorList grads) {
    return {grads[0] * ctx->get_saved_variables()[0]};
  }
};

// a * alpha + b with tensors around a non-tensor argument; records needs_input_grad.
struct AxpB : Function<AxpB> {
  static inline std::vector<bool> seen_needs;
  static Tensor forward(AutogradContext* ctx, Tensor a, double alpha, Tensor b) {
    ctx->saved_data["alpha"] = alpha;
    return a * alpha + b;
  }
  static TensorList backward(AutogradContext* ctx, TensorList grads) {
    seen_needs = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    const double alpha = std::get<double>(ctx->saved_data["alpha"]);
    return {ctx->needs_input_grad(0) ? grads[0] * alpha : Tensor(), grads[0]};
  }
};

TEST(CustomFunction, NonTensorArgumentPassesThrough) {
  Tensor x = random_tensor({2, 3}, kFloat64, true);
  Tensor y = Scale::apply(x, 2.5);
  ASSERT_TRUE(y.requires_grad());
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "ScaleBackward");
  expect_close(y, x.detach() * 2.5);
  y.sum().backward();
  expect_close(x.grad(), full({2, 3}, 2.5, {.dtype = kFloat64}));
}

struct Probe : Function<Probe> {
  static inline bool grad_mode_in_forward = true;
  static Tensor forward(AutogradContext*, Tensor x) {
    grad_mode_in_forward = is_grad_enabled();
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    return y;
  }
  static TensorList backward(AutogradContext*, TensorList grads) { return {grads[0] * 2.0}; }
};

TEST(CustomFunction, ForwardRunsWithoutRecording) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = Probe::apply(x);
  EXPECT_FALSE(Probe::grad_mode_in_forward);
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE(y.requires_grad());
}

TEST(CustomFunction, NeedsInputGradFollowsRequiresGrad) {
  Tensor a = random_tensor({3}, kFloat64, false);
  Tensor b = random_tensor({3}, kFloat64, true);
  Tensor y = AxpB::apply(a, 3.0, b);
  y.sum().backward();
  ASSERT_EQ(AxpB::seen_needs.size(), 2u);
  EXPECT_FALSE(AxpB::seen_needs[0]);
  EXPECT_TRUE(AxpB::seen_needs[1]);
  expect_close(b.grad(), ones({3}, {.dtype = kFloat64}));
  EXPECT_FALSE(a.grad().defined());

  a.requires_grad_(true);
  Tensor z = AxpB::apply(a, 3.0, b);
  z.sum().backward();
  EXPECT_TRUE(AxpB::seen_needs[0]);
  expect_close(a.grad(), full({3}, 3.0, {.dtype = kFloat64}));
  expect_close(b.grad(), full({3}, 2.0, {.dtype = kFloat64}));
}

TEST(CustomFunction, GradientForAnInputThatNeedsNoneIsDropped) {
  struct Both : Function<Both> {
    static Tensor forward(AutogradContext*, Tensor a, Tensor b) { return a * b; }
    static TensorList backward(AutogradContext*, TensorList grads) { return {grads[0], grads[0]}; }
  };
  Tensor a = random_tensor({3}, kFloat64, true);
  Tensor b = random_tensor({3}, kFloat64, false);
  Both::apply(a, b).sum().backward();
  EXPECT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

TEST(CustomFunction, NoGraphWithoutGradMode) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = Cube::apply(x);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(y.grad_fn());
  expect_close(y, x.detach() * x.detach() * x.detach());
}

TEST(CustomFunction, NoGraphWhenNoInputRequiresGrad) {
  Tensor x = random_tensor({3}, kFloat64, false);
  Tensor y = Cube::apply(x);
  EXPECT_FALSE(y.requires_grad());
}

TEST(CustomFunction, GradcheckAndGradgradcheck) {
  Tensor x = random_tensor({4}, kFloat64, true);
  expect_gradcheck([](const TensorList& in) { return Cube::apply(in[0]); }, {x});
  expect_gradgradcheck([](const TensorList& in) { return Cube::apply(in[0]); }, {x});
  expect_gradcheck([](const TensorList& in) { return Exp::apply(in[0]); }, {x});
  expect_gradgradcheck([](const TensorList& in) { return Exp::apply(in[0]); }, {x});
  Tensor a = random_tensor({2, 3}, kFloat64, true);
  Tensor b = random_tensor({2, 3}, kFloat64, true);
  expect_gradcheck([](const TensorList& in) { return AxpB::apply(in[0], -1.5, in[1]); }, {a, b});
}

TEST(CustomFunction, SecondAndThirdDerivativesThroughBackward) {
  Tensor x = vec({0.5, -1.0, 2.0}).requires_grad_();
  Tensor y = Cube::apply(x).sum();
  Tensor g1 = grad({y}, {x}, {}, true, true)[0];
  expect_close(g1, vec({0.75, 3.0, 12.0}));
  ASSERT_TRUE(g1.requires_grad());
  Tensor g2 = grad({g1.sum()}, {x}, {}, true, true)[0];
  expect_close(g2, vec({3.0, -6.0, 12.0}));  // 6x
  Tensor g3 = grad({g2.sum()}, {x})[0];
  expect_close(g3, vec({6.0, 6.0, 6.0}));
}

TEST(CustomFunction, SavedOutputSupportsDoubleBackward) {
  Tensor x = vec({0.1, 0.7}).requires_grad_();
  Tensor g1 = grad({Exp::apply(x).sum()}, {x}, {}, true, true)[0];
  Tensor g2 = grad({g1.sum()}, {x})[0];
  expect_close(g2, exp(x.detach()));
}

TEST(CustomFunction, SavedDataHoldsSeveralKinds) {
  struct Kinds : Function<Kinds> {
    static Tensor forward(AutogradContext* ctx, Tensor x, int64_t n, std::string tag, Shape dims) {
      ctx->saved_data["n"] = n;
      ctx->saved_data["tag"] = tag;
      ctx->saved_data["dims"] = dims;
      ctx->saved_data["flag"] = true;
      return x * static_cast<double>(n);
    }
    static TensorList backward(AutogradContext* ctx, TensorList grads) {
      EXPECT_EQ(std::get<std::string>(ctx->saved_data["tag"]), "hello");
      EXPECT_EQ(std::get<Shape>(ctx->saved_data["dims"]), (Shape{1, 2}));
      EXPECT_TRUE(std::get<bool>(ctx->saved_data["flag"]));
      return {grads[0] * static_cast<double>(std::get<int64_t>(ctx->saved_data["n"]))};
    }
  };
  Tensor x = random_tensor({2}, kFloat64, true);
  Kinds::apply(x, int64_t{4}, std::string("hello"), Shape{1, 2}).sum().backward();
  expect_close(x.grad(), full({2}, 4.0, {.dtype = kFloat64}));
}

TEST(CustomFunction, TensorListArgumentGetsOneGradientPerTensor) {
  struct WeightedSum : Function<WeightedSum> {
    static Tensor forward(AutogradContext*, TensorList xs, Tensor w) {
      Tensor acc = xs[0] * 1.0;
      for (size_t i = 1; i < xs.size(); ++i) acc = acc + xs[i] * static_cast<double>(i + 1);
      return acc * w;
    }
    static TensorList backward(AutogradContext*, TensorList grads) {
      return {grads[0], grads[0] * 2.0, grads[0] * 3.0, Tensor()};
    }
  };
  Tensor a = random_tensor({2}, kFloat64, true);
  Tensor b = random_tensor({2}, kFloat64, true);
  Tensor c = random_tensor({2}, kFloat64, true);
  Tensor w = ones({2}, {.dtype = kFloat64});
  WeightedSum::apply(TensorList{a, b, c}, w).sum().backward();
  expect_close(a.grad(), full({2}, 1.0, {.dtype = kFloat64}));
  expect_close(b.grad(), full({2}, 2.0, {.dtype = kFloat64}));
  expect_close(c.grad(), full({2}, 3.0, {.dtype = kFloat64}));
}

// The seed case: forward returns one of its inputs unchanged.
struct ReturnSecond : Function<ReturnSecond> {
  static Tensor forward(AutogradContext* ctx, Tensor x, Tensor y) {
    ctx->save_for_backward({x});
    return y;
  }
  static TensorList backward(AutogradContext* ctx, TensorList grads) {
    return {ctx->get_saved_variables()[0], grads[0]};
  }
};

TEST(CustomFunction, ReturningAnInputGivesANewAliasWithTheFunctionAsGradFn) {
  Tensor x = ones({1}, {.dtype = kFloat64, .requires_grad = true});
  Tensor y = ones({1}, {.dtype = kFloat64, .requires_grad = true});
  Tensor out = ReturnSecond::apply(x, y);
  EXPECT_FALSE(out.is_same(y));
  EXPECT_EQ(out.raw_data(), y.raw_data());  // same memory
  EXPECT_TRUE(y.is_leaf());                 // the input's own history is untouched
  EXPECT_FALSE(y.grad_fn());
  ASSERT_TRUE(out.grad_fn());
  EXPECT_EQ(out.grad_fn()->name(), "ReturnSecondBackward");
  out.sum().backward();
  expect_close(x.grad(), ones({1}, {.dtype = kFloat64}));
  expect_close(y.grad(), ones({1}, {.dtype = kFloat64}));
  // The alias is a view of a leaf that requires grad: writing through it is rejected.
  EXPECT_THROW_MSG(out.mul_(2.0), "view of a leaf Variable that requires grad");
}

TEST(CustomFunction, ReturningAnInputWithoutGradStillAliases) {
  Tensor y = ones({2}, {.dtype = kFloat64});
  Tensor out = ReturnSecond::apply(ones({2}, {.dtype = kFloat64}), y);
  EXPECT_FALSE(out.is_same(y));
  EXPECT_FALSE(out.requires_grad());
  out.fill_(3.0);
  expect_close(y, full({2}, 3.0, {.dtype = kFloat64}));
}

// x *= 2 in place.
struct DoubleInPlace : Function<DoubleInPlace> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    x.mul_(2.0);
    ctx->mark_dirty({x});
    return x;
  }
  static TensorList backward(AutogradContext*, TensorList grads) { return {grads[0] * 2.0}; }
};

TEST(CustomFunction, MarkDirtyRebasesTheInputsHistory) {
  Tensor leaf = vec({1.0, 2.0, 3.0}).requires_grad_();
  Tensor x = leaf * 1.0;
  Tensor out = DoubleInPlace::apply(x);
  EXPECT_TRUE(out.is_same(x));
  ASSERT_TRUE(x.grad_fn());
  EXPECT_EQ(x.grad_fn()->name(), "DoubleInPlaceBackward");
  expect_close(x, vec({2.0, 4.0, 6.0}));
  (x * x).sum().backward();  // d/dleaf (2 leaf)^2 = 8 leaf
  expect_close(leaf.grad(), vec({8.0, 16.0, 24.0}));
}

TEST(CustomFunction, MarkDirtyOnALeafThatRequiresGradIsRejected) {
  Tensor leaf = vec({1.0, 2.0}).requires_grad_();
  EXPECT_THROW_MSG(DoubleInPlace::apply(leaf), "a leaf Variable that requires grad has been used in an in-place");
}

TEST(CustomFunction, MarkDirtyOnAViewUpdatesTheBase) {
  Tensor leaf = vec({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor base = leaf * 1.0;
  Tensor v = base.narrow(0, 1, 2);
  DoubleInPlace::apply(v);
  expect_close(base, vec({1.0, 4.0, 6.0, 4.0}));
  EXPECT_EQ(base.grad_fn()->name(), "CopySlices");
  (base * base).sum().backward();  // c = [1, 2, 2, 1]: d/dleaf sum (c leaf)^2 = 2 c^2 leaf
  expect_close(leaf.grad(), vec({2.0, 16.0, 24.0, 8.0}));
}

TEST(CustomFunction, MarkDirtyOnAViewWithSeveralOutputsIsRejected) {
  struct TwoOut : Function<TwoOut> {
    static TensorList forward(AutogradContext* ctx, Tensor x) {
      x.mul_(2.0);
      ctx->mark_dirty({x});
      return {x, x * 1.0};
    }
    static TensorList backward(AutogradContext*, TensorList grads) { return {grads[0] * 2.0 + grads[1]}; }
  };
  Tensor leaf = vec({1.0, 2.0, 3.0}).requires_grad_();
  Tensor base = leaf * 1.0;
  EXPECT_THROW_MSG(TwoOut::apply(base.narrow(0, 0, 2)), "cannot return more than one Tensor");
}

TEST(CustomFunction, MarkDirtyTensorMustBeAnInputAndReturned) {
  struct NotReturned : Function<NotReturned> {
    static Tensor forward(AutogradContext* ctx, Tensor x) {
      x.mul_(2.0);
      ctx->mark_dirty({x});
      return x * 1.0;
    }
    static TensorList backward(AutogradContext*, TensorList grads) { return {grads[0]}; }
  };
  Tensor leaf = vec({1.0}).requires_grad_();
  EXPECT_THROW_MSG(NotReturned::apply(leaf * 1.0), "not returned as outputs");
}

// x := x^2 in place, saving both the original and the written (dirty) tensor.
struct SquareInPlace : Function<SquareInPlace> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    Tensor original = x.clone();
    x.mul_(x);
    ctx->mark_dirty({x});
    ctx->save_for_backward({original, x});
    return x;
  }
  static TensorList backward(AutogradContext* ctx, TensorList grads) {
    TensorList saved = ctx->get_saved_variables();
    expect_close(saved[1], saved[0] * saved[0]);
    return {grads[0] * 2.0 * saved[0]};
  }
};

TEST(CustomFunction, InPlaceForwardCanSaveTheOriginalAndTheResult) {
  Tensor leaf = vec({1.5, -2.0}).requires_grad_();
  Tensor x = leaf * 1.0;
  SquareInPlace::apply(x).sum().backward();
  expect_close(leaf.grad(), vec({3.0, -4.0}));
}

TEST(CustomFunction, SavingAnOutputCreatesNoReferenceCycle) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = Exp::apply(x);
  std::weak_ptr<Node> node = y.grad_fn();
  ASSERT_FALSE(node.expired());
  y = Tensor();
  EXPECT_TRUE(node.expired());

  Tensor z = x * 1.0;
  SquareInPlace::apply(z);
  std::weak_ptr<Node> dirty_node = z.grad_fn();
  z = Tensor();
  EXPECT_TRUE(dirty_node.expired());
}

// Returns {2x, sign-like mask}; the second output is marked non-differentiable.
struct WithMask : Function<WithMask> {
  static inline bool second_grad_was_zero = false;
  static TensorList forward(AutogradContext* ctx, Tensor x) {
    Tensor mask = gt(x, 0.0).to(kFloat64);
    ctx->mark_non_differentiable({mask});
    return {x * 2.0, mask};
  }
  static TensorList backward(AutogradContext*, TensorList grads) {
    second_grad_was_zero = grads[1].defined() && grads[1].abs().sum().item<double>() == 0.0 &&
                           grads[1].sizes() == grads[0].sizes();
    return {grads[0] * 2.0};
  }
};

TEST(CustomFunction, NonDifferentiableOutputsDoNotRequireGrad) {
  Tensor x = vec({-1.0, 2.0, 3.0}).requires_grad_();
  TensorList outs = WithMask::apply(x);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(outs[0].requires_grad());
  EXPECT_FALSE(outs[1].requires_grad());
  expect_close(outs[1], vec({0.0, 1.0, 1.0}));
  outs[0].sum().backward();
  EXPECT_TRUE(WithMask::second_grad_was_zero);  // materialized as zeros of the output's shape
  expect_close(x.grad(), full({3}, 2.0, {.dtype = kFloat64}));
}

TEST(CustomFunction, IntegerOutputsDoNotRequireGrad) {
  struct Counts : Function<Counts> {
    static TensorList forward(AutogradContext*, Tensor x) { return {x * 2.0, gt(x, 0.0).to(kInt64)}; }
    static TensorList backward(AutogradContext*, TensorList grads) { return {grads[0] * 2.0}; }
  };
  TensorList outs = Counts::apply(vec({-1.0, 1.0}).requires_grad_());
  EXPECT_TRUE(outs[0].requires_grad());
  EXPECT_FALSE(outs[1].requires_grad());
}

struct Split : Function<Split> {
  static inline bool second_defined = true;
  static TensorList forward(AutogradContext* ctx, Tensor x) {
    ctx->set_materialize_grads(false);
    return {x * 2.0, x * 3.0};
  }
  static TensorList backward(AutogradContext*, TensorList grads) {
    second_defined = grads[1].defined();
    Tensor g = grads[0] * 2.0;
    if (grads[1].defined()) g = g + grads[1] * 3.0;
    return {g};
  }
};

TEST(CustomFunction, UnmaterializedGradsAreUndefined) {
  Tensor x = vec({1.0, 2.0}).requires_grad_();
  Split::apply(x)[0].sum().backward();
  EXPECT_FALSE(Split::second_defined);
  expect_close(x.grad(), full({2}, 2.0, {.dtype = kFloat64}));
  TensorList both = Split::apply(x);
  (both[0] + both[1]).sum().backward();
  EXPECT_TRUE(Split::second_defined);
  expect_close(x.grad(), full({2}, 7.0, {.dtype = kFloat64}));
}

TEST(CustomFunction, WrongNumberOfGradientsIsAnError) {
  struct TooFew : Function<TooFew> {
    static Tensor forward(AutogradContext*, Tensor a, Tensor b) { return a + b; }
    static TensorList backward(AutogradContext*, TensorList grads) { return {grads[0]}; }
  };
  Tensor a = random_tensor({2}, kFloat64, true);
  Tensor b = random_tensor({2}, kFloat64, true);
  EXPECT_THROW_MSG(TooFew::apply(a, b).sum().backward(),
                   "returned an incorrect number of gradients (expected 2, got 1)");
}

TEST(CustomFunction, WrongGradientShapeIsAnError) {
  struct BadShape : Function<BadShape> {
    static Tensor forward(AutogradContext*, Tensor x) { return x * 1.0; }
    static TensorList backward(AutogradContext*, TensorList) { return {ones({3}, {.dtype = kFloat64})}; }
  };
  Tensor x = random_tensor({2, 3}, kFloat64, true);
  Tensor y = BadShape::apply(x);
  EXPECT_THROW_MSG(y.sum().backward(),
                   "Function BadShapeBackward returned an invalid gradient at index 0 - got [3] but expected shape "
                   "compatible with [2, 3]");
}

TEST(CustomFunction, BroadcastGradientIsSummedToTheInputShape) {
  struct Wide : Function<Wide> {
    static Tensor forward(AutogradContext*, Tensor x) { return x * 1.0; }
    static TensorList backward(AutogradContext*, TensorList grads) {
      return {expand(grads[0], {4, 3}).contiguous()};
    }
  };
  Tensor x = random_tensor({3}, kFloat64, true);
  Wide::apply(x).sum().backward();
  expect_close(x.grad(), full({3}, 4.0, {.dtype = kFloat64}));
}

TEST(CustomFunction, SavedTensorModifiedInPlaceIsAnError) {
  Tensor leaf = random_tensor({3}, kFloat64, true);
  Tensor x = leaf * 1.0;
  Tensor y = Cube::apply(x);
  x.add_(1.0);
  EXPECT_THROW_MSG(y.sum().backward(), "modified by an inplace operation");
}

TEST(CustomFunction, BackwardTwiceNeedsRetainGraph) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = Cube::apply(x).sum();
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  expect_close(x.grad(), 6.0 * x.detach() * x.detach());
  EXPECT_THROW_MSG(y.backward(), "Trying to backward through the graph a second time");
}

TEST(CustomFunction, HooksOnOutputsSeeTheGradient) {
  Tensor x = random_tensor({3}, kFloat64, true);
  Tensor y = Scale::apply(x, 2.0);
  y.register_hook([](const Tensor& g) { return g * 10.0; });
  y.sum().backward();
  expect_close(x.grad(), full({3}, 20.0, {.dtype = kFloat64}));
}

TEST(CustomFunction, ComposesWithOrdinaryOpsAndItself) {
  Tensor x = random_tensor({2, 2}, kFloat64, true, 0.2, 0.9);
  auto f = [](const TensorList& in) { return Cube::apply(Scale::apply(sin(in[0]), 3.0)) * in[0]; };
  expect_gradcheck(f, {x});
  expect_gradgradcheck(f, {x});
}

TEST(CustomFunction, WorksOnAnotherThread) {
  Tensor x = random_tensor({3}, kFloat64, true);
  std::thread worker([&] { Cube::apply(x).sum().backward(); });
  worker.join();
  expect_close(x.grad(), 3.0 * x.detach() * x.detach());
}

}  // namespace
}  // namespace tg
