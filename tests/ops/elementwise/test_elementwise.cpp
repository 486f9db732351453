// Elementwise ops: values against hand-computed references per dtype, broadcasting, strided
// inputs, type promotion, in-place semantics, errors and meta tensors (gradients and CUDA
// agreement are in test_elementwise_grad.cpp and test_elementwise_cuda.cpp).
#include <cmath>
#include <limits>
#include <vector>

#include "ops/elementwise/elementwise.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_values;
using testing::kAll;
using testing::kNaN;
using testing::kNumeric;
using testing::make;
using testing::vals;

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

TEST(ElementwiseValues, SquareKeepsTheDtypeAndBoolBecomesInt64) {
  for (DType d : {kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(d));
    const double last = is_floating(d) ? 4.5 : 2;  // 4.5 squared is exact in every floating dtype
    const Tensor x = make({-3, 0, last}, d);
    EXPECT_EQ(square(x).dtype(), d);
    expect_values(square(x), {9, 0, last * last});
  }
  const Tensor b = make({1, 0}, kBool);
  EXPECT_EQ(square(b).dtype(), kInt64);
  expect_values(b.square(), {1, 0});
  expect_values(make({-2, 0.5}).square(), {4, 0.25});
  const Tensor strided = make({1, 2, 3, 4, 5, 6}).view({2, 3}).t();
  expect_values(square(strided), {1, 16, 4, 25, 9, 36});
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

// ---- mixed dtypes ------------------------------------------------------------------------------

// Bit-for-bit equal values of one dtype.
void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_EQ(vals(got), vals(want));
}

// Operands of other dtypes than the computation's are converted a chunk at a time on the CPU:
// lengths across chunk boundaries, strided operands and outputs, and narrowing in-place writes
// give what explicit casts followed by the typed op give.
TEST(ElementwiseMixedDtypes, ChunkedConversionsMatchExplicitCasts) {
  const Tensor ints = arange(1000, {.dtype = kInt32}) - 500;
  const Tensor floats = testing::random_tensor({2000}, kFloat32, false, -4.0, 4.0).slice(0, 0, std::nullopt, 2);
  expect_same(add(ints, floats), add(ints.to(kFloat32), floats.contiguous()));
  expect_same(mul(floats, ints), mul(floats.contiguous(), ints.to(kFloat32)));
  const Tensor longs = abs(ints.to(kInt64));
  expect_same(sqrt(longs), sqrt(longs.to(kFloat32)));
  const Tensor cond = gt(testing::random_tensor({777}), 0.0);
  const Tensor low = testing::random_tensor({777}, kBFloat16);
  const Tensor wide = testing::random_tensor({777}, kFloat32);
  expect_same(where(cond, low, wide), where(cond, low.to(kFloat32), wide));
  const Tensor halves = testing::random_tensor({515}, kBFloat16);
  const Tensor factors = testing::random_tensor({515}, kFloat32);
  Tensor target = halves.clone();
  target.mul_(factors);
  expect_same(target, (halves.to(kFloat32) * factors).to(kBFloat16));
  const Tensor column = arange(300, {.dtype = kInt64}).view({300, 1});
  const Tensor row = testing::random_tensor({1, 3}, kFloat64, false, 0.0, 300.0);
  expect_same(lt(column, row), lt(column.to(kFloat64), row));
  const Tensor strided_out = zeros({600}, {.dtype = kFloat64}).slice(0, 0, std::nullopt, 2);
  Tensor view = strided_out;
  view.add_(ints.slice(0, 0, 300));
  expect_same(strided_out, ints.slice(0, 0, 300).to(kFloat64));
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

// gt and ge run as lt and le of the swapped operands: NaN, broadcasting, mixed dtypes and a host
// value on either side give what the comparison itself does.
TEST(ElementwiseValues, GreaterRunsAsMirroredLess) {
  const Tensor a = make({1.0, kNaN, 3.0, -0.0}, kFloat64);
  const Tensor b = make({2.0, 1.0, kNaN, 0.0}, kFloat32);
  expect_values(gt(a, b), {0, 0, 0, 0});
  expect_values(ge(a, b), {0, 0, 0, 1});
  expect_values(gt(b, a), {1, 0, 0, 0});
  expect_values(ge(b, a), {1, 0, 0, 1});
  const Tensor column = make({1, 2, 3}, kInt32).view({3, 1});
  const Tensor row = make({2, 2}, kInt64).view({1, 2});
  expect_values(gt(column, row), {0, 0, 0, 0, 1, 1});
  expect_values(ge(row, column), {1, 1, 1, 1, 0, 0});
  expect_values(a.gt(1.5), {0, 0, 1, 0});
  expect_values(a.ge(3), {0, 0, 1, 0});
  expect_values(gt(make({2.0}, kFloat64).view({}), b), {0, 1, 0, 1});
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

}  // namespace
}  // namespace tg
