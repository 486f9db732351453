// Elementwise ops: values against hand-computed references per dtype, broadcasting, strided
// inputs, type promotion, in-place semantics, errors, gradients (first and second order), meta
// tensors, and CPU-vs-CUDA agreement.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/elementwise.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::random_tensor;
using testing::TensorFn;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A tensor of the given dtype holding `v` (converted) with sizes `s` (1-D when omitted).
Tensor make(std::vector<double> v, DType d = kFloat64, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return from_vector(v, s).to(d);
}

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const std::vector<double> got = vals(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i] << ", expected nan";
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], tol * (1 + std::abs(expected[i]))) << "element " << i;
    }
  }
}

const std::vector<DType> kNumeric = {kInt32, kInt64, kFloat32, kFloat64};
const std::vector<DType> kAll = {kBool, kInt32, kInt64, kFloat32, kFloat64};

// ---- binary values ---------------------------------------------------------------------------

TEST(ElementwiseValues, ArithmeticEveryNumericDtype) {
  for (DType d : kNumeric) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor a = make({7, -3, 0, 5}, d);
    const Tensor b = make({2, 4, -6, 5}, d);
    Tensor r = a + b;
    EXPECT_EQ(r.dtype(), d);
    expect_values(r, {9, 1, -6, 10});
    expect_values(a - b, {5, -7, 6, 0});
    expect_values(a * b, {14, -12, 0, 25});
    expect_values(add(a, b, 3), {13, 9, -18, 20});
    expect_values(sub(a, b, 2), {3, -11, 12, -5});
    expect_values(maximum(a, b), {7, 4, 0, 5});
    expect_values(minimum(a, b), {2, -3, -6, 5});
    expect_values(a + 2, {9, -1, 2, 7});
    expect_values(a - 2, {5, -5, -2, 3});
    expect_values(a * 3, {21, -9, 0, 15});
    expect_values(10 - a, {3, 13, 10, 5});
    expect_values(2 * a, {14, -6, 0, 10});
    expect_values(1 + a, {8, -2, 1, 6});
  }
}

TEST(ElementwiseValues, TrueDivisionAndIntegerInputsGiveFloat32) {
  const Tensor a = make({7, -7, 1, 0}, kInt64);
  const Tensor b = make({2, 2, 4, 5}, kInt32);
  Tensor q = a / b;
  EXPECT_EQ(q.dtype(), kFloat32);
  expect_values(q, {3.5, -3.5, 0.25, 0});
  EXPECT_EQ((a / 2).dtype(), kFloat32);
  expect_values(a / 2, {3.5, -3.5, 0.5, 0});
  Tensor r = 1 / make({2, 4, -8}, kInt32);
  EXPECT_EQ(r.dtype(), kFloat32);
  expect_values(r, {0.5, 0.25, -0.125});
  expect_values(make({1, -1, 0}) / make({0, 0, 0}), {INFINITY, -INFINITY, kNaN});
  expect_values(make({3, 6}, kFloat32) / make({2, 4}, kFloat64), {1.5, 1.5});
}

TEST(ElementwiseValues, BoolArithmeticIsLogical) {
  const Tensor a = make({1, 1, 0, 0}, kBool);
  const Tensor b = make({1, 0, 1, 0}, kBool);
  EXPECT_EQ((a + b).dtype(), kBool);
  expect_values(a + b, {1, 1, 1, 0});
  expect_values(a * b, {1, 0, 0, 0});
  expect_values(maximum(a, b), {1, 1, 1, 0});
  expect_values(minimum(a, b), {1, 0, 0, 0});
  EXPECT_EQ((a + 1).dtype(), kInt64);  // an int scalar lifts bool to int64
  expect_values(a + 1, {2, 2, 1, 1});
  EXPECT_THROW_MSG(a - b, "subtraction, the `-` operator, with bool tensors is not supported");
}

TEST(ElementwiseValues, MaximumMinimumPropagateNaN) {
  const Tensor a = make({kNaN, 1, 2});
  const Tensor b = make({0, kNaN, 3});
  expect_values(maximum(a, b), {kNaN, kNaN, 3});
  expect_values(minimum(a, b), {kNaN, kNaN, 2});
}

TEST(ElementwiseValues, AlphaRules) {
  const Tensor i = make({1, 2}, kInt64);
  EXPECT_THROW_MSG(add(i, i, 0.5), "for integral input tensors, argument alpha must not be a floating point number");
  expect_values(add(make({1, 2}), i, 0.5), {1.5, 3});
  expect_values(add(make({1, 2}, kFloat32), make({4, 8}, kFloat32), -0.25), {0, 0});
}

// ---- unary values ----------------------------------------------------------------------------

TEST(ElementwiseValues, UnaryFloatFunctions) {
  for (DType d : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor x = make({-2, -0.5, 0, 0.5, 2}, d);
    const std::vector<double> xs = {-2, -0.5, 0, 0.5, 2};
    auto map = [&](double (*f)(double)) {
      std::vector<double> r;
      for (double v : xs) r.push_back(f(v));
      return r;
    };
    EXPECT_EQ(exp(x).dtype(), d);
    expect_values(exp(x), map([](double v) { return std::exp(v); }));
    expect_values(sin(x), map([](double v) { return std::sin(v); }));
    expect_values(cos(x), map([](double v) { return std::cos(v); }));
    expect_values(tanh(x), map([](double v) { return std::tanh(v); }));
    expect_values(sigmoid(x), map([](double v) { return 1 / (1 + std::exp(-v)); }));
    expect_values(relu(x), {0, 0, 0, 0.5, 2});
    expect_values(neg(x), {2, 0.5, 0, -0.5, -2});
    expect_values(abs(x), {2, 0.5, 0, 0.5, 2});
    expect_values(sgn(x), {-1, -1, 0, 1, 1});
    expect_values(gelu(x), map([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }));
    expect_values(gelu(x, "tanh"), map([](double v) {
                    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
                  }));
    const Tensor p = make({0.25, 1, 4, 9}, d);
    expect_values(sqrt(p), {0.5, 1, 2, 3});
    expect_values(rsqrt(p), {2, 1, 0.5, 1.0 / 3});
    expect_values(log(p), {std::log(0.25), 0, std::log(4.0), std::log(9.0)});
    expect_values(trunc(make({-2.7, -0.5, 0.5, 2.7}, d)), {-2, -0, 0, 2});
  }
  expect_values(log(make({0, -1})), {-INFINITY, kNaN});
  expect_values(relu(make({kNaN})), {kNaN});
}

TEST(ElementwiseValues, UnaryIntegerInputs) {
  const Tensor i = make({-3, 0, 4}, kInt64);
  EXPECT_EQ(neg(i).dtype(), kInt64);
  expect_values(neg(i), {3, 0, -4});
  expect_values(abs(i), {3, 0, 4});
  expect_values(sgn(i), {-1, 0, 1});
  expect_values(relu(i), {0, 0, 4});
  expect_values(trunc(i), {-3, 0, 4});
  EXPECT_EQ(relu(i).dtype(), kInt64);
  // Float-only functions compute integer and bool inputs in float32.
  EXPECT_EQ(exp(i).dtype(), kFloat32);
  expect_values(exp(i), {std::exp(-3.0), 1, std::exp(4.0)});
  EXPECT_EQ(sqrt(make({4, 9}, kInt32)).dtype(), kFloat32);
  expect_values(sqrt(make({4, 9}, kInt32)), {2, 3});
  expect_values(sigmoid(make({1, 0}, kBool)), {1 / (1 + std::exp(-1.0)), 0.5});
  EXPECT_THROW_MSG(neg(make({1}, kBool)), "negation, the `-` operator, on a bool tensor is not supported");
  EXPECT_THROW_MSG(gelu(i), "expected a floating point tensor");
  EXPECT_THROW_MSG(gelu(make({1}), "fast"), "approximate must be \"none\" or \"tanh\"");
}

TEST(ElementwiseValues, Pow) {
  const Tensor x = make({-2, 0.5, 3});
  expect_values(pow(x, 2), {4, 0.25, 9});
  expect_values(pow(x, 3), {-8, 0.125, 27});
  expect_values(pow(x, 0), {1, 1, 1});
  expect_values(pow(x, -1), {-0.5, 2, 1.0 / 3});
  expect_values(pow(make({4, 0.25}), 0.5), {2, 0.5});
  expect_values(pow(make({2, 8}), 1.5), {std::pow(2.0, 1.5), std::pow(8.0, 1.5)});
  const Tensor i = make({-2, 3, 0}, kInt32);
  EXPECT_EQ(pow(i, 3).dtype(), kInt32);
  expect_values(pow(i, 3), {-8, 27, 0});
  expect_values(pow(i, 0), {1, 1, 1});
  EXPECT_EQ(pow(i, 0.5).dtype(), kFloat32);
  expect_values(pow(make({4, 9}, kInt64), 0.5), {2, 3});
  EXPECT_THROW_MSG(pow(i, -1), "integers to negative integer powers are not allowed");
  EXPECT_EQ(pow(make({1}, kBool), 2).dtype(), kInt64);
}

TEST(ElementwiseValues, Clamp) {
  const Tensor x = make({-3, -1, 0, 1, 3, kNaN});
  expect_values(clamp(x, -1, 1), {-1, -1, 0, 1, 1, kNaN});
  expect_values(clamp(x, 0, std::nullopt), {0, 0, 0, 1, 3, kNaN});
  expect_values(clamp(x, std::nullopt, 0), {-3, -1, 0, 0, 0, kNaN});
  expect_values(clamp(x, 2, 1), {1, 1, 1, 1, 1, kNaN});  // min > max: everything becomes max
  const Tensor i = make({-5, 2, 9}, kInt64);
  EXPECT_EQ(clamp(i, 0, 4).dtype(), kInt64);
  expect_values(clamp(i, 0, 4), {0, 2, 4});
  EXPECT_EQ(clamp(i, 0.5, std::nullopt).dtype(), kFloat32);
  expect_values(clamp(i, 0.5, std::nullopt), {0.5, 2, 9});
  EXPECT_THROW_MSG(clamp(x, std::nullopt, std::nullopt), "at least one of 'min' or 'max' must not be None");
}

// ---- comparisons and where -------------------------------------------------------------------

TEST(ElementwiseValues, ComparisonsEveryDtype) {
  for (DType d : kAll) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor a = d == kBool ? make({0, 1, 1}, d) : make({1, 2, 3}, d);
    const Tensor b = d == kBool ? make({1, 1, 0}, d) : make({2, 2, 2}, d);
    for (const Tensor& r : {eq(a, b), ne(a, b), lt(a, b), le(a, b), gt(a, b), ge(a, b)}) EXPECT_EQ(r.dtype(), kBool);
    expect_values(eq(a, b), {0, 1, 0});
    expect_values(ne(a, b), {1, 0, 1});
    expect_values(lt(a, b), {1, 0, 0});
    expect_values(le(a, b), {1, 1, 0});
    expect_values(gt(a, b), {0, 0, 1});
    expect_values(ge(a, b), {0, 1, 1});
  }
  const Tensor x = make({1, 2, 3}, kInt64);
  expect_values(x.lt(2), {1, 0, 0});
  expect_values(x.ge(2), {0, 1, 1});
  expect_values(x.eq(2.5), {0, 0, 0});  // compared in float, not truncated
  expect_values(x.lt(2.5), {1, 1, 0});
  expect_values(make({0.5, 1.5}, kFloat32).gt(make({1}, kInt64)), {0, 1});
  expect_values(eq(make({kNaN}), make({kNaN})), {0});
  expect_values(ne(make({kNaN}), make({kNaN})), {1});
}

TEST(ElementwiseValues, WherePromotesAndBroadcasts) {
  const Tensor c = make({1, 0, 1}, kBool);
  Tensor r = where(c, make({1, 2, 3}, kInt32), make({0.5}, kFloat32));
  EXPECT_EQ(r.dtype(), kFloat32);
  expect_values(r, {1, 0.5, 3});
  Tensor r2 = where(make({1, 0}, kBool, {2, 1}), make({1, 2, 3}), make({-1, -2, -3}));
  EXPECT_EQ(r2.sizes(), (Shape{2, 3}));
  expect_values(r2, {1, 2, 3, -1, -2, -3});
  EXPECT_THROW_MSG(where(make({1, 0}), make({1, 2}), make({1, 2})),
                   "expected condition to be a boolean tensor, but got a tensor with dtype float64");
}

TEST(ElementwiseValues, AllcloseAndEqual) {
  const Tensor a = make({1, 2, kNaN});
  EXPECT_FALSE(allclose(a, a));
  EXPECT_TRUE(allclose(a, a, 1e-5, 1e-8, true));
  EXPECT_TRUE(allclose(make({1, 2}), make({1 + 1e-9, 2})));
  EXPECT_FALSE(allclose(make({1, 2}), make({1.1, 2})));
  EXPECT_TRUE(allclose(make({INFINITY}), make({INFINITY})));
  EXPECT_FALSE(allclose(make({INFINITY}), make({-INFINITY})));
  EXPECT_FALSE(allclose(make({1, 2}), make({1, 2, 3})));
  EXPECT_TRUE(equal(make({1, 2}, kInt64), make({1, 2}, kInt64)));
  EXPECT_FALSE(equal(make({1, 2}, kInt64), make({1, 3}, kInt64)));
  EXPECT_FALSE(equal(make({1, 2}), make({1, 2}, kFloat64, {2, 1})));
}

// ---- type promotion --------------------------------------------------------------------------

TEST(ElementwisePromotion, TensorTensorTable) {
  // Rows and columns in the order bool, int32, int64, float32, float64.
  const DType table[5][5] = {
      {kBool, kInt32, kInt64, kFloat32, kFloat64},
      {kInt32, kInt32, kInt64, kFloat32, kFloat64},
      {kInt64, kInt64, kInt64, kFloat32, kFloat64},
      {kFloat32, kFloat32, kFloat32, kFloat32, kFloat64},
      {kFloat64, kFloat64, kFloat64, kFloat64, kFloat64},
  };
  for (size_t i = 0; i < 5; ++i) {
    for (size_t j = 0; j < 5; ++j) {
      const Tensor a = make({1, 0}, kAll[i]);
      const Tensor b = make({1, 1}, kAll[j]);
      SCOPED_TRACE(std::string(dtype_name(kAll[i])) + " with " + std::string(dtype_name(kAll[j])));
      EXPECT_EQ((a * b).dtype(), table[i][j]);
      EXPECT_EQ(maximum(a, b).dtype(), table[i][j]);
      EXPECT_EQ(where(gt(b, 0), a, b).dtype(), table[i][j]);
      EXPECT_EQ((a / b).dtype(), is_floating(table[i][j]) ? table[i][j] : kFloat32);
      EXPECT_EQ(eq(a, b).dtype(), kBool);
      expect_values(a * b, {1, 0});
    }
  }
}

TEST(ElementwisePromotion, ScalarOperands) {
  EXPECT_EQ((make({1}, kInt32) + 2).dtype(), kInt32);
  EXPECT_EQ((make({1}, kInt32) + 2.5).dtype(), kFloat32);
  EXPECT_EQ((make({1}, kInt64) * 2.5).dtype(), kFloat32);
  EXPECT_EQ((make({1}, kFloat32) + 2.5).dtype(), kFloat32);
  EXPECT_EQ((make({1}, kFloat64) + 2).dtype(), kFloat64);
  EXPECT_EQ((make({1}, kBool) + true).dtype(), kBool);
  EXPECT_EQ((make({1}, kBool) * 2).dtype(), kInt64);
  EXPECT_EQ((make({1}, kBool) * 2.0).dtype(), kFloat32);
  expect_values(make({3}, kInt32) + 2.5, {5.5});
  expect_values(make({3}, kInt32) * 0.5, {1.5});
}

TEST(ElementwisePromotion, ZeroDimTensorsOnlyLiftTheCategory) {
  const Tensor s64 = scalar_tensor(2.0, {.dtype = kFloat64});
  const Tensor i64 = scalar_tensor(int64_t{2});
  EXPECT_EQ((make({1, 2}, kFloat32) + s64).dtype(), kFloat32);
  EXPECT_EQ((make({1, 2}, kInt32) + i64).dtype(), kInt32);
  EXPECT_EQ((make({1, 2}, kInt32) + s64).dtype(), kFloat64);
  EXPECT_EQ((make({1, 2}, kBool) + i64).dtype(), kInt64);
  EXPECT_EQ((scalar_tensor(1.0, {.dtype = kFloat32}) + s64).dtype(), kFloat64);  // both 0-dim: normal promotion
  expect_values(make({1, 2}, kFloat32) + s64, {3, 4});
}

// ---- broadcasting and strided inputs ---------------------------------------------------------

TEST(ElementwiseBroadcast, ShapesAndValues) {
  const Tensor a = make({1, 2, 3, 4, 5, 6}, kFloat64, {2, 3});
  Tensor r = a + make({10, 20, 30});
  EXPECT_EQ(r.sizes(), (Shape{2, 3}));
  expect_values(r, {11, 22, 33, 14, 25, 36});
  Tensor outer = make({1, 2}, kFloat64, {2, 1}) * make({1, 10, 100}, kFloat64, {1, 3});
  EXPECT_EQ(outer.sizes(), (Shape{2, 3}));
  expect_values(outer, {1, 10, 100, 2, 20, 200});
  Tensor s = scalar_tensor(2.0, {.dtype = kFloat64}) * a;
  expect_values(s, {2, 4, 6, 8, 10, 12});
  Tensor z = make({}, kFloat64, {0, 3}) + make({1, 2, 3});
  EXPECT_EQ(z.sizes(), (Shape{0, 3}));
  Tensor zd = scalar_tensor(1.0, {.dtype = kFloat64}) + scalar_tensor(2.0, {.dtype = kFloat64});
  EXPECT_EQ(zd.dim(), 0);
  EXPECT_EQ(zd.item<double>(), 3.0);
  EXPECT_THROW_MSG(a + make({1, 2, 3, 4}), "[add] shapes [2, 3] and [4] cannot broadcast");
  EXPECT_THROW_MSG(eq(a, make({1, 2})), "[eq] shapes [2, 3] and [2] cannot broadcast");
  EXPECT_THROW_MSG(where(make({1, 0, 1}, kBool), a, make({1, 2})), "cannot broadcast");
}

TEST(ElementwiseBroadcast, NonContiguousInputs) {
  const Tensor base = arange(24, {.dtype = kFloat64}).view({4, 6});
  const Tensor tr = base.t();                      // [6, 4], strides [1, 6]
  const Tensor stepped = base.slice(1, 1, 6, 2);   // [4, 3], strides [6, 2]
  const Tensor expanded = make({1, 2, 3}).expand({4, 3});
  ASSERT_FALSE(tr.is_contiguous());
  ASSERT_FALSE(stepped.is_contiguous());
  expect_values(stepped, {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23});
  expect_values(stepped + expanded, {2, 5, 8, 8, 11, 14, 14, 17, 20, 20, 23, 26});
  expect_values(exp(stepped), vals(exp(stepped.contiguous())));
  expect_values(tr * tr, vals(tr.contiguous() * tr.contiguous()));
  expect_values(tr.t() - base, std::vector<double>(24, 0.0));
  expect_values(gt(tr, 10.5), vals(gt(tr.contiguous(), 10.5)));
  expect_values(tr + base.t().contiguous(), vals(tr.contiguous() * 2));
  // Mixed dtypes through the converting loop, with a strided and a broadcast operand.
  expect_values(stepped.to(kInt32) + make({0.5}, kFloat32).expand({4, 3}),
                {1.5, 3.5, 5.5, 7.5, 9.5, 11.5, 13.5, 15.5, 17.5, 19.5, 21.5, 23.5});
  // A permuted 3-D tensor whose dims coalesce only after reordering.
  const Tensor cube = arange(24, {.dtype = kFloat64}).view({2, 3, 4}).permute({2, 0, 1});
  expect_values(cube * 1, vals(cube.contiguous()));
  expect_values(cube + cube.contiguous(), vals(cube.contiguous() * 2));
}

// ---- in-place semantics ----------------------------------------------------------------------

TEST(ElementwiseInPlace, WritesThroughAndBumpsVersion) {
  Tensor a = make({1, 2, 3});
  const Tensor alias = a;
  const uint64_t v0 = a.version();
  Tensor& r = a.add_(make({1, 1, 1}));
  EXPECT_TRUE(r.is_same(a));
  EXPECT_EQ(a.version(), v0 + 1);
  expect_values(alias, {2, 3, 4});
  a.sub_(1).mul_(2).div_(make({2, 4, 6}));
  EXPECT_EQ(a.version(), v0 + 4);
  expect_values(a, {1, 1, 1});
  a.add_(make({1, 2, 3}), 2);
  expect_values(a, {3, 5, 7});
  a.sub_(make({1, 1, 1}), 3);
  expect_values(a, {0, 2, 4});
  a.clamp_(1, 3);
  expect_values(a, {1, 2, 3});
  a.div_(2).trunc_();
  expect_values(a, {0, 1, 1});
  a += 1;
  a *= make({2, 3, 4});
  a -= make({1, 1, 1});
  a /= 2;
  expect_values(a, {0.5, 2.5, 3.5});
  Tensor b = make({1, 2});
  b += b;
  expect_values(b, {2, 4});
}

TEST(ElementwiseInPlace, ThroughViewsAndStridedTargets) {
  Tensor base = zeros({3, 4}, {.dtype = kFloat64});
  const uint64_t v0 = base.version();
  Tensor col = base.select(1, 2);
  col.add_(make({1, 2, 3}));
  EXPECT_EQ(base.version(), v0 + 1);
  expect_values(base, {0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0});
  Tensor tr = base.t();
  tr.mul_(2).add_(make({1, 2, 3}));  // broadcast over the transposed target's rows
  expect_values(base, {1, 1, 3, 1, 2, 2, 6, 2, 3, 3, 9, 3});
  base.slice(1, 0, 4, 2).fill_(-1);
  expect_values(base, {-1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3});
}

TEST(ElementwiseInPlace, DtypeCastRules) {
  Tensor l = make({1, 2}, kInt64);
  EXPECT_THROW_MSG(l.add_(make({0.5, 0.5}, kFloat32)), "[add_] result type Float can't be cast to the desired "
                   "output type Long");
  EXPECT_THROW_MSG(l.mul_(1.5), "result type Float can't be cast to the desired output type Long");
  EXPECT_THROW_MSG(l.div_(2), "[div_] result type Float can't be cast to the desired output type Long");
  EXPECT_THROW_MSG(make({1}, kBool).add_(make({1}, kInt32)), "result type Int can't be cast to the desired "
                   "output type Bool");
  EXPECT_THROW_MSG(make({1}, kInt32).clamp_(0.5, std::nullopt), "[clamp_] result type Float can't be cast");
  l.add_(make({1, 1}, kInt32));  // int32 into int64 is fine
  expect_values(l, {2, 3});
  Tensor f = make({1, 2}, kFloat32);
  f.add_(make({0.25, 0.5}, kFloat64));  // computed in float64, stored as float32
  EXPECT_EQ(f.dtype(), kFloat32);
  expect_values(f, {1.25, 2.5});
  f.mul_(make({2, 3}, kInt64));
  expect_values(f, {2.5, 7.5});
}

TEST(ElementwiseInPlace, ShapeAndOverlapErrors) {
  Tensor a = make({1, 2, 3});
  EXPECT_THROW_MSG(a.add_(make({1, 2, 3, 4, 5, 6}, kFloat64, {2, 3})),
                   "[add_] output with shape [3] doesn't match the broadcast shape [2, 3]");
  EXPECT_THROW_MSG(a.mul_(make({1, 2})), "[mul_] shapes [3] and [2] cannot broadcast");
  Tensor m = arange(9, {.dtype = kFloat64}).view({3, 3});
  EXPECT_THROW_MSG(m.add_(m.t()), "some elements of the input tensor and the written-to tensor refer to a single "
                   "memory location");
  Tensor e = make({1}).expand({3});
  EXPECT_THROW_MSG(e.add_(1), "more than one element of the written-to tensor refers to a single memory location");
  m.add_(m);  // exactly the same elements is fine
  expect_values(m, {0, 2, 4, 6, 8, 10, 12, 14, 16});
}

TEST(ElementwiseErrors, DeviceMismatch) {
  const Tensor meta = empty({3}, {.dtype = kFloat64, .device = kMeta});
  EXPECT_THROW_MSG(meta + make({1, 2, 3}), "[add] expected all tensors to be on the same device, but found at "
                   "least two devices, meta and cpu!");
  EXPECT_THROW_MSG(lt(make({1, 2, 3}), meta), "expected all tensors to be on the same device");
  Tensor cpu = make({1, 2, 3});
  EXPECT_THROW_MSG(cpu.add_(meta), "[add_] expected all tensors to be on the same device");
  // A 0-dim CPU tensor joins any device.
  Tensor r = meta * scalar_tensor(2.0, {.dtype = kFloat64});
  EXPECT_TRUE(r.is_meta());
}

// ---- meta tensors ----------------------------------------------------------------------------

TEST(ElementwiseMeta, OutputMetadataWithoutData) {
  const Tensor a = empty({2, 1}, {.dtype = kInt32, .device = kMeta});
  const Tensor b = empty({3}, {.dtype = kFloat32, .device = kMeta});
  Tensor r = a + b;
  EXPECT_TRUE(r.is_meta());
  EXPECT_EQ(r.sizes(), (Shape{2, 3}));
  EXPECT_EQ(r.strides(), (Shape{3, 1}));
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_EQ((a / a).dtype(), kFloat32);
  EXPECT_EQ(exp(a).dtype(), kFloat32);
  EXPECT_EQ(lt(a, b).dtype(), kBool);
  EXPECT_EQ(lt(a, b).sizes(), (Shape{2, 3}));
  EXPECT_EQ(where(lt(a, b), a, 2 * b).sizes(), (Shape{2, 3}));
  EXPECT_EQ(clamp(a, 0.5, std::nullopt).dtype(), kFloat32);
  EXPECT_EQ(pow(b, 2).sizes(), (Shape{3}));
  EXPECT_EQ(gelu(b, "tanh").dtype(), kFloat32);
  EXPECT_THROW_MSG(a + empty({3, 4}, {.device = kMeta}), "[add] shapes [2, 1] and [3, 4] cannot broadcast");
  Tensor t = empty({2, 3}, {.dtype = kInt64, .device = kMeta});
  const uint64_t v0 = t.version();
  EXPECT_TRUE(t.add_(b.to(kInt64)).is_same(t));
  EXPECT_EQ(t.version(), v0 + 1);
  EXPECT_THROW_MSG(t.mul_(b), "result type Float can't be cast to the desired output type Long");
  EXPECT_THROW_MSG(r.raw_data(), "meta");
}

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

// ---- CUDA ------------------------------------------------------------------------------------

TEST(ElementwiseCuda, EveryOpMatchesCpu) {
  TG_REQUIRE_CUDA();
  const Tensor a = random_tensor({33, 65}, kFloat32, false, -2, 2);
  const Tensor b = random_tensor({65}, kFloat32, false, -2, 2);
  const Tensor p = random_tensor({33, 65}, kFloat32, false, 0.5, 2);
  // Each op also runs on a transposed first operand (the transfer to CUDA makes inputs contiguous,
  // so the op itself must see the transposed view).
  auto on_transposed = [](TensorFn fn) { return [fn](L x) { return fn({x[0].t(), x[1]}); }; };
  auto check1 = [&](TensorFn fn, const Tensor& x) {
    expect_cuda_matches_cpu(fn, {x}, 1e-5, 1e-5);
    const Tensor xt = x.t().contiguous();
    expect_cuda_matches_cpu([fn](L y) { return fn({y[0].t()}); }, {xt}, 1e-5, 1e-5);
  };
  auto check2 = [&](TensorFn fn) {
    expect_cuda_matches_cpu(fn, {a, b}, 1e-5, 1e-5);
    expect_cuda_matches_cpu(on_transposed(fn), {a.t().contiguous(), b}, 1e-5, 1e-5);
  };
  check2([](L x) { return x[0] + x[1]; });
  check2([](L x) { return add(x[0], x[1], 0.5); });
  check2([](L x) { return x[0] - x[1]; });
  check2([](L x) { return x[0] * x[1]; });
  check2([](L x) { return x[0] / x[1]; });
  check2([](L x) { return maximum(x[0], x[1]); });
  check2([](L x) { return minimum(x[0], x[1]); });
  check2([](L x) { return x[0] + 2; });
  check2([](L x) { return 2 - x[0]; });
  check2([](L x) { return 2 / x[1]; });
  check2([](L x) { return x[0] * 0.5; });
  for (auto fn : std::vector<TensorFn>{
           [](L x) { return neg(x[0]); }, [](L x) { return abs(x[0]); }, [](L x) { return sgn(x[0]); },
           [](L x) { return exp(x[0]); }, [](L x) { return sin(x[0]); }, [](L x) { return cos(x[0]); },
           [](L x) { return tanh(x[0]); }, [](L x) { return sigmoid(x[0]); }, [](L x) { return relu(x[0]); },
           [](L x) { return gelu(x[0]); }, [](L x) { return gelu(x[0], "tanh"); }, [](L x) { return trunc(x[0]); },
           [](L x) { return pow(x[0], 2); }, [](L x) { return pow(x[0], 3); }, [](L x) { return clamp(x[0], -1, 1); },
           [](L x) { return clamp(x[0], std::nullopt, 0.25); }}) {
    check1(fn, a);
  }
  for (auto fn : std::vector<TensorFn>{[](L x) { return log(x[0]); }, [](L x) { return sqrt(x[0]); },
                                       [](L x) { return rsqrt(x[0]); }, [](L x) { return pow(x[0], 0.5); },
                                       [](L x) { return pow(x[0], 2.5); }}) {
    check1(fn, p);
  }
  for (auto fn : std::vector<TensorFn>{[](L x) { return eq(x[0], x[1]); }, [](L x) { return ne(x[0], x[1]); },
                                       [](L x) { return lt(x[0], x[1]); }, [](L x) { return le(x[0], x[1]); },
                                       [](L x) { return gt(x[0], x[1]); }, [](L x) { return ge(x[0], x[1]); },
                                       [](L x) { return gt(x[0], 0.5); },
                                       [](L x) { return where(gt(x[0], x[1]), x[0], x[1]); }}) {
    check2(fn);
  }
}

TEST(ElementwiseCuda, DtypesAndPromotionMatchCpu) {
  TG_REQUIRE_CUDA();
  for (DType da : kAll) {
    for (DType db : kAll) {
      SCOPED_TRACE(std::string(dtype_name(da)) + " with " + std::string(dtype_name(db)));
      const Tensor a = random_tensor({5, 7}, kFloat64, false, -5, 5).to(da);
      const Tensor b = random_tensor({7}, kFloat64, false, 1, 5).to(db);
      expect_cuda_matches_cpu([](L x) { return x[0] * x[1]; }, {a, b});
      expect_cuda_matches_cpu([](L x) { return x[0] / x[1]; }, {a, b});
      expect_cuda_matches_cpu([](L x) { return maximum(x[0], x[1]); }, {a, b});
      expect_cuda_matches_cpu([](L x) { return le(x[0], x[1]); }, {a, b});
      if (da != kBool || db != kBool) expect_cuda_matches_cpu([](L x) { return x[0] - x[1]; }, {a, b});
    }
  }
  const Tensor i = random_tensor({100}, kFloat64, false, -50, 50).to(kInt64);
  expect_cuda_matches_cpu([](L x) { return pow(x[0], 3); }, {i});
  expect_cuda_matches_cpu([](L x) { return exp(x[0] / 25); }, {i});
  expect_cuda_matches_cpu([](L x) { return clamp(x[0], -3, 7); }, {i});
  expect_cuda_matches_cpu([](L x) { return abs(x[0]) + relu(x[0]) - neg(x[0]); }, {i});
}

TEST(ElementwiseCuda, NonContiguousAndHostScalarOperands) {
  TG_REQUIRE_CUDA();
  const Tensor m = random_tensor({40, 30}, kFloat32, false, -2, 2);
  expect_cuda_matches_cpu([](L x) { return x[0].t() + x[0].t().contiguous(); }, {m});
  expect_cuda_matches_cpu([](L x) { return exp(x[0].slice(1, 1, 30, 3)); }, {m});
  expect_cuda_matches_cpu([](L x) { return x[0].slice(0, 0, 40, 2) * x[0].select(0, 3); }, {m});
  expect_cuda_matches_cpu([](L x) { return gt(x[0].t().slice(0, 1, 30, 2), 0); }, {m});
  expect_cuda_matches_cpu([](L x) { return x[0].slice(1, 1, 30) + 1; }, {m});  // misaligned start
  expect_cuda_matches_cpu([](L x) { return x[0].t().to(kFloat64) - x[0].to(kInt32).t(); }, {m});
  // A 0-dim CPU tensor as an operand of a CUDA op, on either side and in place.
  const Tensor s = scalar_tensor(1.5, {.dtype = kFloat64});
  Tensor g = m.cuda();
  expect_close(g * s, m * s);
  expect_close(s - g, s - m);
  expect_close(where(gt(g, 0), g, s), where(gt(m, 0), m, s));
  expect_close(tanh_backward(g, s), tanh_backward(m, s));
  Tensor h = g.clone();
  h.add_(s);
  expect_close(h, m + 1.5);
  EXPECT_THROW_MSG(g + make({1, 2}), "expected all tensors to be on the same device, but found at least two devices");
  EXPECT_THROW_MSG(make({1, 2}).add_(g.slice(0, 0, 2).select(1, 0)), "expected all tensors to be on the same device");
  // Large enough for every path: vectorized with a tail, and strided.
  const Tensor big = random_tensor({1000003}, kFloat32);
  expect_cuda_matches_cpu([](L x) { return x[0] * x[0] + 1; }, {big});
  expect_cuda_matches_cpu([](L x) { return x[0].slice(0, 1, 1000003, 7) * 2; }, {big});
}

TEST(ElementwiseCuda, GradientsMatchCpu) {
  TG_REQUIRE_CUDA();
  const Tensor a = random_tensor({6, 5}, kFloat64, false, 0.5, 2);
  const Tensor b = random_tensor({5}, kFloat64, false, 0.5, 2);
  auto grads = [](L x) {
    TensorList leaves;
    for (const Tensor& t : x) leaves.push_back(t.detach().requires_grad_(true));
    Tensor y = tanh(leaves[0]) * sigmoid(leaves[1]) + gelu(leaves[0]) / leaves[1] + relu(leaves[0] - 1) +
               maximum(leaves[0], leaves[1]) + pow(leaves[0], 2.5) + clamp(leaves[0], 0.7, 1.5);
    TensorList g = grad({y.sum()}, leaves);
    return g[0] * 2 + g[1].sum();
  };
  expect_cuda_matches_cpu(grads, {a, b}, 1e-9, 1e-9);
}

}  // namespace
}  // namespace tg
