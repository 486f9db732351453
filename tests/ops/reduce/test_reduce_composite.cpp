// Reductions composed from others (max/min with indices, argmin, std, vector_norm) and repeat,
// masked_fill_: values, PyTorch's tie, NaN and zero-vector gradients, integer extremes, 0-dim
// inputs, errors, and CPU-vs-CUDA agreement. Gradchecks of every form are in test_op_coverage.
#include <cstdint>
#include <limits>
#include <vector>

#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_cuda_matches_cpu;
using testing::expect_values;
using testing::kNaN;
using testing::make;
using testing::random_tensor;

const double kInf = std::numeric_limits<double>::infinity();

TEST(MaxMin, AlongADimGiveValuesAndTheFirstIndexOfEqualOnes) {
  const Tensor x = make({3, 1, 3, 2, 5, 5}, kFloat64, {2, 3});
  auto [v, i] = x.max(1);
  expect_values(v, {3, 5});
  EXPECT_EQ(i.dtype(), kInt64);
  expect_values(i, {0, 1});
  auto [vk, ik] = x.min(0, true);
  EXPECT_EQ(vk.sizes(), (Shape{1, 3}));
  expect_values(vk, {2, 1, 3});
  expect_values(ik, {1, 0, 0});
  auto [vn, in] = min(x, -1);
  expect_values(vn, {1, 2});
  expect_values(in, {1, 0});
}

TEST(MaxMin, WholeTensorReductions) {
  const Tensor x = make({3, -1, 7, 2}, kFloat32, {2, 2});
  EXPECT_EQ(x.max().dim(), 0);
  EXPECT_EQ(x.max().item<float>(), 7.0f);
  EXPECT_EQ(x.min().item<float>(), -1.0f);
  EXPECT_EQ(x.argmin().item<int64_t>(), 1);
  expect_values(x.argmin(0), {0, 0});
}

TEST(MaxMin, NanIsTheMaximumAndTheMinimum) {
  const Tensor x = make({1, kNaN, 3, 0, 2, -1}, kFloat64, {2, 3});
  auto [v, i] = x.max(1);
  expect_values(v, {kNaN, 2});
  expect_values(i, {1, 1});
  auto [w, j] = x.min(1);
  expect_values(w, {kNaN, -1});
  expect_values(j, {1, 2});
  EXPECT_TRUE(std::isnan(x.max().item<double>()));
  EXPECT_TRUE(std::isnan(x.min().item<double>()));
}

TEST(MaxMin, IntegersOverTheirWholeRange) {
  for (DType dtype : {kInt32, kInt64}) {
    const double lo = dtype == kInt32 ? double(std::numeric_limits<int32_t>::min()) : -9.2e18;
    const double hi = dtype == kInt32 ? double(std::numeric_limits<int32_t>::max()) : 9.2e18;
    const Tensor x = make({0, hi, lo, -1, hi, lo}, dtype);
    EXPECT_EQ(x.argmin().item<int64_t>(), 2) << dtype_name(dtype);
    EXPECT_EQ(x.min(0).second.item<int64_t>(), 2) << dtype_name(dtype);
    EXPECT_EQ(x.max(0).second.item<int64_t>(), 1) << dtype_name(dtype);
    EXPECT_EQ(x.min(0).first.dtype(), dtype);
  }
  const Tensor extremes = from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::max(), 5,
                                                           std::numeric_limits<int64_t>::min()},
                                      {3});
  EXPECT_EQ(extremes.argmin().item<int64_t>(), 2);
  EXPECT_EQ(extremes.min().item<int64_t>(), std::numeric_limits<int64_t>::min());
}

TEST(MaxMin, ZeroDimInputsTakeDimZeroOrMinusOne) {
  const Tensor x = scalar_tensor(4.0);
  auto [v, i] = x.max(0);
  EXPECT_EQ(v.dim(), 0);
  EXPECT_EQ(v.item<double>(), 4.0);
  EXPECT_EQ(i.item<int64_t>(), 0);
  EXPECT_EQ(x.min(-1).first.item<double>(), 4.0);
  EXPECT_THROW_MSG(x.max(1), "[max] dim 1 is out of range for a 0-dim tensor (expected 0 or -1)");
}

// The gradient of max(x, dim) goes to the index it returns; that of max(x) is shared among ties.
TEST(MaxMin, GradientsFollowPyTorchAtTies) {
  const Tensor x = make({2, 5, 5, 1}, kFloat64, {1, 4}).requires_grad_(true);
  x.max(1).first.sum().backward();
  expect_values(x.grad(), {0, 1, 0, 0});
  const Tensor y = make({2, 5, 5, 1}, kFloat64, {1, 4}).requires_grad_(true);
  y.max().backward();
  expect_values(y.grad(), {0, 0.5, 0.5, 0});
  const Tensor z = make({3, 1, 1}, kFloat64).requires_grad_(true);
  (z.min(0).first * 2.0).backward();
  expect_values(z.grad(), {0, 2, 0});
}

TEST(MaxMin, BadInputsRaiseNamingWhatWasGiven) {
  EXPECT_THROW_MSG(zeros({0}).max(), "[max] cannot reduce an empty tensor (shape [0]) without a dim");
  EXPECT_THROW_MSG(zeros({2, 0}).min(1), "[min] cannot reduce dim 1 of size 0 (shape [2, 0])");
  EXPECT_THROW_MSG(zeros({2, 3}).max(2), "[max] dim 2 is out of range for a tensor of 2 dims");
  EXPECT_THROW_MSG(argmin(ne(zeros({2}), 0)), "[argmin] expected a numeric dtype, got bool");
}

TEST(Std, IsTheRootOfTheVariance) {
  const Tensor x = make({1, 2, 3, 4, 6, 8}, kFloat64, {2, 3});
  expect_values(x.std(), {std::sqrt(var(x).item<double>())});
  expect_values(x.std({1}), {1, 2});
  expect_values(x.std({1}, 0), {std::sqrt(2.0 / 3.0), std::sqrt(8.0 / 3.0)});
  EXPECT_EQ(x.std({0}, 1, true).sizes(), (Shape{1, 3}));
}

// Where the deviation is 0 (one element with correction 0, or equal ones) its gradient is 0, as
// PyTorch's, not NaN (found by the PyTorch oracle).
TEST(Std, ZeroDeviationsHaveZeroGradients) {
  const Tensor x = make({2, 2, 1, 3}, kFloat64, {2, 2}).requires_grad_(true);
  const Tensor s = x.std({1});
  expect_values(s.detach(), {0, std::sqrt(2.0)});
  s.sum().backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_EQ(g[0], 0.0);
  EXPECT_EQ(g[1], 0.0);
  EXPECT_TRUE(std::isfinite(g[2]) && std::isfinite(g[3]));
  const Tensor one = make({5}, kFloat64, {1, 1}).requires_grad_(true);
  one.std({0}, 0).sum().backward();
  expect_values(one.grad(), {0});
}

TEST(VectorNorm, OrdersAndDims) {
  const Tensor x = make({3, -4, 0, 1, -2, 2}, kFloat64, {2, 3});
  expect_values(x.norm(), {std::sqrt(34.0)});
  expect_values(x.norm(2, {1}), {5, 3});
  expect_values(vector_norm(x, 1, {1}), {7, 5});
  expect_values(vector_norm(x, kInf, {0}), {3, 4, 2});
  expect_values(vector_norm(x, -kInf, {1}), {0, 1});
  expect_values(vector_norm(x, 3, {1}), {std::cbrt(91.0), std::cbrt(17.0)});
  EXPECT_EQ(vector_norm(x, 2, {1}, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(vector_norm(x.to(kFloat32)).dtype(), kFloat32);
}

// A zero vector's norm is 0 with a zero gradient (PyTorch's), not NaN, for ord 2 and ord 3.
TEST(VectorNorm, ZeroVectorsHaveZeroGradients) {
  for (double ord : {2.0, 3.0}) {
    const Tensor x = make({0, 0, 0, 1, -2, 2}, kFloat64, {2, 3}).requires_grad_(true);
    const Tensor n = vector_norm(x, ord, {1});
    expect_values(n.detach(), {0, ord == 2 ? 3.0 : std::cbrt(17.0)});
    n.sum().backward();
    const std::vector<double> g = x.grad().to_vector<double>();
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(g[i], 0.0) << "ord " << ord << ", element " << i;
    for (size_t i = 3; i < 6; ++i) EXPECT_TRUE(std::isfinite(g[i]) && g[i] != 0.0) << "ord " << ord;
  }
}

TEST(VectorNorm, BadInputsRaiseNamingWhatWasGiven) {
  EXPECT_THROW_MSG(vector_norm(zeros({3}, {.dtype = kInt64})), "[vector_norm] expected a floating dtype, got int64");
  EXPECT_THROW_MSG(vector_norm(zeros({3}), 0), "[vector_norm] ord 0 is not supported");
  EXPECT_THROW_MSG(vector_norm(zeros({3}), -2), "[vector_norm] ord -2 is not supported");
}

TEST(Repeat, TilesAndAddsLeadingDims) {
  const Tensor x = make({1, 2, 3}, kFloat64, {1, 3});
  const Tensor r = x.repeat({2, 2});
  EXPECT_EQ(r.sizes(), (Shape{2, 6}));
  expect_values(r, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  const Tensor lead = make({1, 2}, kFloat64).repeat({3, 1, 2});
  EXPECT_EQ(lead.sizes(), (Shape{3, 1, 4}));
  expect_values(lead, {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2});
  EXPECT_EQ(x.repeat({0, 1}).sizes(), (Shape{0, 3}));
  // Every copy's gradient reaches the one source element.
  const Tensor y = make({1, 2}, kFloat64).requires_grad_(true);
  (y.repeat({3}) * make({1, 1, 2, 2, 3, 3})).sum().backward();
  expect_values(y.grad(), {6, 6});
  EXPECT_THROW_MSG(x.repeat({2}), "[repeat] expected at least as many repeats as the tensor has dims (2), got [2]");
  EXPECT_THROW_MSG(x.repeat({1, -1}), "[repeat] expected repeats of at least 0, got [1, -1]");
}

TEST(MaskedFillInPlace, WritesWhereTheMaskIsTrueAndKeepsTheGradient) {
  Tensor x = make({1, 2, 3, 4}, kFloat64, {2, 2});
  const Tensor mask = ne(make({1, 0}, kInt64), 0);
  Tensor& same = x.masked_fill_(mask, -5);
  EXPECT_EQ(&same, &x);
  expect_values(x, {-5, 2, -5, 4});
  const Tensor w = make({1, 2, 3, 4}, kFloat64, {2, 2}).requires_grad_(true);
  Tensor h = w * 1.0;
  h.masked_fill_(mask, 0.0);
  h.sum().backward();
  expect_values(w.grad(), {0, 1, 0, 1});
  EXPECT_THROW_MSG(x.masked_fill_(ne(zeros({3}), 0), 1), "[masked_fill] mask of shape [3] must be broadcastable");
}

TEST(ReduceCompositeCuda, MatchesTheCpu) {
  TG_REQUIRE_CUDA();
  const TensorList in{random_tensor({5, 7}, kFloat32, true)};
  expect_cuda_matches_cpu([](const TensorList& x) { return x[0].max(1).first; }, in);
  expect_cuda_matches_cpu([](const TensorList& x) { return x[0].min(0).second.to(kFloat32); }, in);
  expect_cuda_matches_cpu([](const TensorList& x) { return x[0].std({1}); }, in);
  expect_cuda_matches_cpu([](const TensorList& x) { return x[0].norm(2, {0}); }, in);
  expect_cuda_matches_cpu([](const TensorList& x) { return vector_norm(x[0], kInf); }, in);
  expect_cuda_matches_cpu([](const TensorList& x) { return x[0].repeat({2, 1, 3}); }, in);
  const Tensor ints = from_vector(std::vector<int64_t>{4, -9, 7, -9, 0, 3}, {2, 3});
  EXPECT_TRUE(equal(ints.cuda().argmin(1).cpu(), ints.argmin(1)));
}

}  // namespace
}  // namespace tg
