// Elementwise ops: gradients (first and second order) against finite differences in float64,
// PyTorch's choices at kinks, and which inputs get no gradient.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/elementwise/elementwise.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::expect_values;
using testing::make;
using testing::random_tensor;
using testing::vals;
// ---- gradients -------------------------------------------------------------------------------

using L = const TensorList&;

Tensor rnd(const Shape& s, double lo = -1, double hi = 1) { return random_tensor(s, kFloat64, true, lo, hi); }

// Values in [0.2, 1) with alternating signs: away from the kinks of abs, relu, sgn, clamp.
Tensor away_from_zero(const Shape& s) {
  Tensor mag = random_tensor(s, kFloat64, false, 0.2, 1.0);
  std::vector<double> signs(static_cast<size_t>(shape_numel(s)));
  for (size_t i = 0; i < signs.size(); ++i) signs[i] = i % 2 ? -1.0 : 1.0;
  Tensor r = mag * from_vector(signs, s);
  r.requires_grad_(true);
  return r;
}

TEST(ElementwiseGrad, BinaryOps) {
  expect_gradcheck([](L x) { return x[0] + x[1]; }, {rnd({2, 3}), rnd({2, 3})});
  expect_gradcheck([](L x) { return add(x[0], x[1], 2.5); }, {rnd({2, 3}), rnd({3})});
  expect_gradcheck([](L x) { return sub(x[0], x[1], -1.5); }, {rnd({2, 1}), rnd({1, 3})});
  expect_gradcheck([](L x) { return x[0] - x[1]; }, {rnd({3}), rnd({})});
  expect_gradcheck([](L x) { return x[0] * x[1]; }, {rnd({2, 3}), rnd({2, 1})});
  expect_gradcheck([](L x) { return x[0] / x[1]; }, {rnd({2, 3}), rnd({3}, 0.5, 1.5)});
  expect_gradcheck([](L x) { return maximum(x[0], x[1]); }, {away_from_zero({2, 3}), rnd({3}, -0.1, 0.1)});
  expect_gradcheck([](L x) { return minimum(x[0], x[1]); }, {away_from_zero({2, 3}), rnd({2, 1}, -0.1, 0.1)});
}

TEST(ElementwiseGrad, ScalarForms) {
  expect_gradcheck([](L x) { return x[0] + 2.5; }, {rnd({3})});
  expect_gradcheck([](L x) { return x[0] - 2; }, {rnd({3})});
  expect_gradcheck([](L x) { return 3 - x[0]; }, {rnd({3})});
  expect_gradcheck([](L x) { return x[0] * -1.5; }, {rnd({3})});
  expect_gradcheck([](L x) { return x[0] / 4; }, {rnd({3})});
  expect_gradcheck([](L x) { return 2 / x[0]; }, {rnd({3}, 0.5, 1.5)});
  expect_gradcheck([](L x) { return -x[0]; }, {rnd({3})});
}

TEST(ElementwiseGrad, UnaryOps) {
  expect_gradcheck([](L x) { return abs(x[0]); }, {away_from_zero({2, 3})});
  expect_gradcheck([](L x) { return exp(x[0]); }, {rnd({2, 3})});
  expect_gradcheck([](L x) { return log(x[0]); }, {rnd({2, 3}, 0.5, 2)});
  expect_gradcheck([](L x) { return sin(x[0]); }, {rnd({2, 3})});
  expect_gradcheck([](L x) { return cos(x[0]); }, {rnd({2, 3})});
  expect_gradcheck([](L x) { return tanh(x[0]); }, {rnd({2, 3})});
  expect_gradcheck([](L x) { return sigmoid(x[0]); }, {rnd({2, 3})});
  expect_gradcheck([](L x) { return relu(x[0]); }, {away_from_zero({2, 3})});
  expect_gradcheck([](L x) { return gelu(x[0]); }, {rnd({2, 3}, -3, 3)});
  expect_gradcheck([](L x) { return gelu(x[0], "tanh"); }, {rnd({2, 3}, -3, 3)});
  expect_gradcheck([](L x) { return sqrt(x[0]); }, {rnd({2, 3}, 0.5, 2)});
  expect_gradcheck([](L x) { return rsqrt(x[0]); }, {rnd({2, 3}, 0.5, 2)});
  expect_gradcheck([](L x) { return trunc(x[0]) + x[0]; }, {away_from_zero({4})});
  expect_gradcheck([](L x) { return sgn(x[0]) * x[0]; }, {away_from_zero({4})});
  for (double e : {2.0, 3.0, 0.5, -1.0, 2.5, -0.5}) {
    SCOPED_TRACE(e);
    expect_gradcheck([e](L x) { return pow(x[0], e); }, {rnd({2, 3}, 0.5, 2)});
  }
  expect_gradcheck([](L x) { return pow(x[0], 3); }, {rnd({2, 3})});  // integral exponent, negative bases
  expect_gradcheck([](L x) { return clamp(x[0], -0.5, 0.5); }, {away_from_zero({3, 4})});
  expect_gradcheck([](L x) { return clamp(x[0], -0.5, std::nullopt); }, {away_from_zero({3, 4})});
  expect_gradcheck([](L x) { return clamp(x[0], std::nullopt, 0.1); }, {away_from_zero({3, 4})});
}

TEST(ElementwiseGrad, WhereAndStridedInputs) {
  const Tensor c = make({1, 0, 0, 1, 1, 0}, kBool, {2, 3});
  expect_gradcheck([c](L x) { return where(c, x[0], x[1]); }, {rnd({2, 3}), rnd({3})});
  expect_gradcheck([](L x) { return x[0].t() * x[1]; }, {rnd({3, 2}), rnd({2, 3})});
  expect_gradcheck([](L x) { return exp(x[0].slice(1, 0, 4, 2)) + x[1].expand({3, 2}); }, {rnd({3, 4}), rnd({1, 2})});
}

TEST(ElementwiseGrad, InPlaceOnNonLeaves) {
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.add_(x[1]); return y; }, {rnd({2, 3}), rnd({3})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.add_(x[1], -2); return y; }, {rnd({2, 3}), rnd({2, 3})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.sub_(x[1], 0.5); return y; }, {rnd({2, 3}), rnd({1, 3})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.mul_(x[1]); return y; }, {rnd({2, 3}), rnd({2, 3})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.div_(x[1]); return y; }, {rnd({2, 3}), rnd({3}, 0.5, 1.5)});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.add_(2).mul_(3).sub_(1).div_(2); return y; }, {rnd({4})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.clamp_(-0.5, 0.5); return y * x[0]; }, {away_from_zero({6})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 3.0; y.trunc_(); return y + x[0]; }, {away_from_zero({5})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y += x[1]; y *= x[1]; return y; }, {rnd({3}), rnd({3})});
  // In place on a view of a non-leaf: the gradient reaches the base through CopySlices.
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.select(1, 1).mul_(x[1]); return y; }, {rnd({3, 2}), rnd({3})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.t().add_(x[1]); return y; }, {rnd({2, 3}), rnd({2})});
}

TEST(ElementwiseGradGrad, Mul) {
  expect_gradgradcheck([](L x) { return x[0] * x[1]; }, {rnd({2, 3}), rnd({3})});
}

TEST(ElementwiseGradGrad, Div) {
  expect_gradgradcheck([](L x) { return x[0] / x[1]; }, {rnd({2, 3}), rnd({2, 3}, 0.5, 1.5)});
}

TEST(ElementwiseGradGrad, Tanh) {
  expect_gradgradcheck([](L x) { return tanh(x[0]); }, {rnd({2, 3})});
}

TEST(ElementwiseGradGrad, Sigmoid) {
  expect_gradgradcheck([](L x) { return sigmoid(x[0]); }, {rnd({2, 3})});
}

TEST(ElementwiseGradGrad, Gelu) {
  expect_gradgradcheck([](L x) { return gelu(x[0]); }, {rnd({2, 3}, -3, 3)});
}

TEST(ElementwiseGradGrad, GeluTanh) {
  expect_gradgradcheck([](L x) { return gelu(x[0], "tanh"); }, {rnd({2, 3}, -3, 3)});
}

TEST(ElementwiseGradGrad, ExpRelu) {
  expect_gradgradcheck([](L x) { return exp(x[0]) * relu(x[0]); }, {away_from_zero({2, 3})});
}

TEST(ElementwiseGradGrad, PowSqrtRsqrtLog) {
  expect_gradgradcheck([](L x) { return pow(x[0], 2.5) + sqrt(x[0]) + rsqrt(x[0]) + log(x[0]); },
                       {rnd({4}, 0.5, 2)});
}

TEST(ElementwiseGradGrad, SinCos) {
  expect_gradgradcheck([](L x) { return sin(x[0]) * cos(x[1]); }, {rnd({3}), rnd({3})});
}

TEST(ElementwiseGradGrad, ScalarOverTensor) {
  expect_gradgradcheck([](L x) { return 2 / x[0]; }, {rnd({3}, 0.5, 1.5)});
}

TEST(ElementwiseGrad, KinksFollowPyTorch) {
  auto grad_at = [](const std::function<Tensor(const Tensor&)>& f, std::vector<double> v) {
    Tensor x = make(v);
    x.requires_grad_(true);
    f(x).sum().backward();
    return vals(x.grad());
  };
  EXPECT_EQ(grad_at([](const Tensor& x) { return relu(x); }, {-1, 0, 2}), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return abs(x); }, {-1, 0, 2}), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return clamp(x, -1, 1); }, {-2, -1, 0, 1, 2}),
            (std::vector<double>{0, 1, 1, 1, 0}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return pow(x, 0); }, {-1, 0, 2}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return sgn(x); }, {-1, 0, 2}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return trunc(x); }, {-1.5, 0, 2.5}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return maximum(x, make({1, 1, 1})); }, {0, 1, 2}),
            (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return minimum(x, make({1, 1, 1})); }, {0, 1, 2}),
            (std::vector<double>{1, 0.5, 0}));
}

TEST(ElementwiseGrad, IntegerInputsGetNoGradient) {
  Tensor x = rnd({3});
  const Tensor i = make({1, 2, 3}, kInt64);
  Tensor y = x * i;
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_TRUE(y.requires_grad());
  y.sum().backward();
  expect_values(x.grad(), {1, 2, 3});
  EXPECT_FALSE(lt(x, 0).requires_grad());
  EXPECT_FALSE((i + 1).requires_grad());
  // A float32 operand of a float64 result gets a float32 gradient.
  Tensor f = random_tensor({3}, kFloat32, true);
  (f * rnd({3})).sum().backward();
  EXPECT_EQ(f.grad().dtype(), kFloat32);
}

TEST(ElementwiseGrad, LeafInPlaceIsRejected) {
  Tensor x = rnd({3});
  EXPECT_THROW_MSG(x.add_(1), "a leaf Variable that requires grad is being used in an in-place operation");
  {
    NoGradGuard no_grad;
    x.add_(1);  // allowed without recording
  }
}

}  // namespace
}  // namespace tg
