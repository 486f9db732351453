// softmax, log_softmax and the losses (mse_loss, l1_loss, nll_loss, cross_entropy): values against
// hand references, numerical stability, strided inputs, errors, first and second derivatives,
// meta shapes, and CPU-vs-CUDA agreement (forward and backward) on small and large inputs.
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "support/test_support.h"
#include "tensor/cuda_runtime.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::random_tensor;
using L = const TensorList&;

const double kInf = std::numeric_limits<double>::infinity();

Tensor make(std::vector<double> v, DType d = kFloat64, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return from_vector(v, s).to(d);
}

Tensor labels(std::vector<int64_t> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else if (std::isinf(expected[i])) EXPECT_EQ(got[i], expected[i]) << "element " << i;
    else EXPECT_NEAR(got[i], expected[i], tol * (1 + std::abs(expected[i]))) << "element " << i;
  }
}

// softmax of one row in double.
std::vector<double> softmax_row(const std::vector<double>& x) {
  double m = -kInf, s = 0;
  for (double v : x) m = std::max(m, v);
  for (double v : x) s += std::exp(v - m);
  std::vector<double> out;
  for (double v : x) out.push_back(std::exp(v - m) / s);
  return out;
}

// ---- softmax -----------------------------------------------------------------------------------

TEST(Softmax, ValuesAlongEachDim) {
  const Tensor x = make({1, 2, 3, -1, 0, 4}, kFloat64, {2, 3});
  const auto r0 = softmax_row({1, 2, 3});
  const auto r1 = softmax_row({-1, 0, 4});
  expect_values(softmax(x, 1), {r0[0], r0[1], r0[2], r1[0], r1[1], r1[2]}, 1e-12);
  expect_values(softmax(x, -1), {r0[0], r0[1], r0[2], r1[0], r1[1], r1[2]}, 1e-12);
  std::vector<double> cols;
  for (auto [a, b] : {std::pair{1.0, -1.0}, {2.0, 0.0}, {3.0, 4.0}}) cols.push_back(softmax_row({a, b})[0]);
  const auto c = softmax(x, 0).to_vector<double>();
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(c[static_cast<size_t>(j)], cols[static_cast<size_t>(j)], 1e-12);
  expect_values(log_softmax(x, 1), {std::log(r0[0]), std::log(r0[1]), std::log(r0[2]), std::log(r1[0]),
                                    std::log(r1[1]), std::log(r1[2])}, 1e-12);
  EXPECT_EQ(x.softmax(1).sizes(), (Shape{2, 3}));
  expect_close(x.log_softmax(0), log(softmax(x, 0)), 1e-12, 1e-12);
}

TEST(Softmax, RowsSumToOneForEveryDimAndDtype) {
  for (DType d : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({3, 4, 5}, d, false, -5, 5);
    for (int64_t dim = -3; dim < 3; ++dim) {
      SCOPED_TRACE(dim);
      const Tensor y = softmax(x, dim);
      EXPECT_EQ(y.dtype(), d);
      const Tensor totals = sum(y, {dim});
      expect_close(totals, ones_like(totals), 1e-5, 1e-6);
    }
  }
}

TEST(Softmax, StableForLargeAndInfiniteInputs) {
  const Tensor big = make({1000, 1001, 1002}, kFloat32);
  const auto r = softmax_row({0, 1, 2});
  expect_values(softmax(big, 0), r, 1e-6);
  expect_values(log_softmax(big, 0), {std::log(r[0]), std::log(r[1]), std::log(r[2])}, 1e-6);
  const Tensor tiny = make({-1000, -1001}, kFloat64);
  expect_values(log_softmax(tiny, 0), {-std::log1p(std::exp(-1.0)), -1 - std::log1p(std::exp(-1.0))}, 1e-12);
  const Tensor masked = make({0, -kInf, 0}, kFloat64);
  expect_values(softmax(masked, 0), {0.5, 0, 0.5});
  expect_values(log_softmax(masked, 0), {-std::log(2.0), -kInf, -std::log(2.0)});
}

TEST(Softmax, StridedInputsAndScalars) {
  const Tensor base = random_tensor({4, 5, 6}, kFloat64, false, -3, 3);
  for (const Tensor& x : {base.permute({2, 0, 1}), base.slice(2, 1, 6, 2), base.transpose(0, 1)}) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      expect_close(softmax(x, dim), softmax(x.contiguous(), dim), 1e-12, 1e-14);
      expect_close(log_softmax(x, dim), log_softmax(x.contiguous(), dim), 1e-12, 1e-14);
    }
  }
  const Tensor e = base.select(1, 0).unsqueeze(1).expand({4, 3, 6});
  expect_close(softmax(e, 1), full({4, 3, 6}, 1.0 / 3, {.dtype = kFloat64}), 1e-12, 1e-14);
  const Tensor s = scalar_tensor(3.0, {.dtype = kFloat64});
  EXPECT_DOUBLE_EQ(softmax(s, 0).item<double>(), 1.0);
  EXPECT_DOUBLE_EQ(log_softmax(s, -1).item<double>(), 0.0);
  EXPECT_EQ(softmax(zeros({0, 3}), 1).sizes(), (Shape{0, 3}));
}

TEST(Softmax, Errors) {
  EXPECT_THROW_MSG(softmax(zeros({2, 3}), 2), "[softmax] dimension out of range");
  EXPECT_THROW_MSG(log_softmax(zeros({2, 3}), -3), "[log_softmax] dimension out of range");
  EXPECT_THROW_MSG(softmax(zeros({2}, {.dtype = kInt64}), 0), "[softmax] expected a floating point tensor");
}

TEST(SoftmaxGrad, FirstAndSecondOrder) {
  const Tensor x = random_tensor({3, 4}, kFloat64, true, -2, 2);
  const Tensor y = random_tensor({2, 3, 2}, kFloat64, true, -2, 2);
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE(dim);
    expect_gradcheck([dim](L v) { return softmax(v[0], dim); }, {x});
    expect_gradcheck([dim](L v) { return log_softmax(v[0], dim); }, {x});
    expect_gradgradcheck([dim](L v) { return softmax(v[0], dim); }, {x});
    expect_gradgradcheck([dim](L v) { return log_softmax(v[0], dim); }, {x});
  }
  expect_gradcheck([](L v) { return softmax(v[0], 1); }, {y});
  expect_gradgradcheck([](L v) { return log_softmax(v[0].transpose(0, 2), 0); }, {y});
}

TEST(SoftmaxGrad, ThirdOrderThroughTheBackwardOps) {
  // Differentiating the fused backward ops twice more checks their own backward formulas.
  const Tensor x = random_tensor({2, 3}, kFloat64, true, -2, 2);
  auto second = [](std::function<Tensor(const Tensor&)> f) {
    return [f](L v) {
      GradModeGuard enable(true);  // gradcheck evaluates under no-grad; this function differentiates inside
      const Tensor w = make({0.3, -1.2, 0.7, 1.1, 0.4, -0.5}, kFloat64, {2, 3});
      const Tensor g1 = grad({(f(v[0]) * w).sum()}, {v[0]}, {}, true, true)[0];
      return grad({(g1 * g1).sum()}, {v[0]}, {}, true, true)[0];
    };
  };
  expect_gradcheck(second([](const Tensor& t) { return softmax(t, 1); }), {x});
  expect_gradcheck(second([](const Tensor& t) { return log_softmax(t, 0); }), {x});
}

// ---- nll_loss and cross_entropy ----------------------------------------------------------------

TEST(NllLoss, ValuesForEveryReduction) {
  const Tensor logp = make({-1, -2, -3, -4, -5, -6}, kFloat64, {2, 3});
  const Tensor t = labels({2, 0});
  expect_values(nll_loss(logp, t, Reduction::None), {3, 4});
  expect_values(nll_loss(logp, t, Reduction::Sum), {7});
  expect_values(nll_loss(logp, t), {3.5});
  EXPECT_EQ(nll_loss(logp, t).dim(), 0);
  // Unbatched [C] input with a 0-dim target.
  const Tensor one = scalar_tensor(1, {.dtype = kInt64});
  expect_values(nll_loss(make({-0.5, -1.5}), one), {1.5});
  EXPECT_EQ(nll_loss(make({-0.5, -1.5}), one, Reduction::None).dim(), 0);
  // Strided input (a transposed view).
  const Tensor tr = make({-1, -4, -2, -5, -3, -6}, kFloat64, {3, 2}).t();
  expect_values(nll_loss(tr, t, Reduction::None), {3, 4});
  // An empty batch averages to NaN and sums to 0, as in PyTorch.
  const Tensor none = zeros({0, 3}, {.dtype = kFloat64});
  const Tensor no_labels = zeros({0}, {.dtype = kInt64});
  EXPECT_TRUE(std::isnan(nll_loss(none, no_labels).item<double>()));
  EXPECT_EQ(nll_loss(none, no_labels, Reduction::Sum).item<double>(), 0.0);
}

TEST(NllLoss, Errors) {
  const Tensor logp = zeros({2, 3});
  EXPECT_THROW_MSG(nll_loss(logp, labels({0, 3})),
                   "[nll_loss] target 3 is out of bounds: expected a class index in [0, 2] (at batch index 1)");
  EXPECT_THROW_MSG(nll_loss(logp, labels({-1, 0})), "target -1 is out of bounds");
  EXPECT_THROW_MSG(nll_loss(logp, labels({0, 1}).to(kInt32)), "[nll_loss] expected target of dtype int64");
  EXPECT_THROW_MSG(nll_loss(logp, labels({0, 1, 2})), "[nll_loss] expected target of shape [2] for input [2, 3]");
  EXPECT_THROW_MSG(nll_loss(zeros({2, 3, 4}), labels({0, 1})), "[nll_loss] expected target of shape [2, 4] for input");
  EXPECT_THROW_MSG(nll_loss(zeros({}), scalar_tensor(0, {.dtype = kInt64})), "[nll_loss] expected input of shape [C]");
  EXPECT_THROW_MSG(nll_loss(zeros({2, 3}, {.dtype = kInt64}), labels({0, 1})), "[nll_loss] expected a floating");
  EXPECT_THROW_MSG(cross_entropy(zeros({2, 3, 4}), labels({0, 1})), "[cross_entropy] expected target of shape [2, 4]");
  EXPECT_THROW_MSG(cross_entropy(zeros({}), scalar_tensor(0, {.dtype = kInt64})), "[cross_entropy] expected input of shape");
}

TEST(NllLoss, GradientsToEveryOrder) {
  const Tensor x = random_tensor({4, 3}, kFloat64, true, -2, 0);
  const Tensor t = labels({2, 0, 1, 2});
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_gradcheck([t, r](L v) { return nll_loss(v[0], t, r); }, {x});
    expect_gradgradcheck([t, r](L v) { return nll_loss(v[0] * v[0], t, r); }, {x});
  }
  const Tensor u = random_tensor({3}, kFloat64, true);
  expect_gradcheck([](L v) { return nll_loss(v[0], scalar_tensor(2, {.dtype = kInt64})); }, {u});
  // The gradient itself: -1/N at each target.
  Tensor leaf = make({-1, -2, -3, -4, -5, -6}, kFloat64, {2, 3});
  leaf.requires_grad_();
  nll_loss(leaf, labels({2, 0})).backward();
  expect_values(leaf.grad(), {0, 0, -0.5, -0.5, 0, 0});
}

TEST(CrossEntropy, MatchesLogSoftmaxThenNll) {
  const Tensor x = random_tensor({5, 4}, kFloat64, false, -3, 3);
  const Tensor t = labels({3, 0, 1, 1, 2});
  const auto xv = x.to_vector<double>();
  double expected = 0;
  for (int n = 0; n < 5; ++n) {
    const std::vector<double> row(xv.begin() + n * 4, xv.begin() + n * 4 + 4);
    expected -= std::log(softmax_row(row)[static_cast<size_t>(t.to_vector<int64_t>()[static_cast<size_t>(n)])]);
  }
  EXPECT_NEAR(cross_entropy(x, t).item<double>(), expected / 5, 1e-12);
  EXPECT_NEAR(cross_entropy(x, t, Reduction::Sum).item<double>(), expected, 1e-12);
  EXPECT_EQ(cross_entropy(x, t, Reduction::None).sizes(), (Shape{5}));
  // Unbatched, and class probabilities as targets.
  EXPECT_NEAR(cross_entropy(x[0], scalar_tensor(3, {.dtype = kInt64})).item<double>(),
              -std::log(softmax_row({xv[0], xv[1], xv[2], xv[3]})[3]), 1e-12);
  const Tensor onehot = make({0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, kFloat64, {5, 4});
  EXPECT_NEAR(cross_entropy(x, onehot).item<double>(), expected / 5, 1e-12);
}

TEST(CrossEntropy, Gradients) {
  const Tensor x = random_tensor({4, 5}, kFloat64, true, -2, 2);
  const Tensor t = labels({4, 0, 2, 2});
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_gradcheck([t, r](L v) { return cross_entropy(v[0], t, r); }, {x});
    expect_gradgradcheck([t, r](L v) { return cross_entropy(v[0], t, r); }, {x});
  }
  Tensor p = softmax(random_tensor({4, 5}, kFloat64), 1).detach();
  p.requires_grad_();
  expect_gradcheck([](L v) { return cross_entropy(v[0], v[1]); }, {x, p});
  // softmax(x) - onehot, over N.
  Tensor leaf = x.detach().clone().requires_grad_();
  cross_entropy(leaf, t).backward();
  const Tensor onehot = make({0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0}, kFloat64, {4, 5});
  expect_close(leaf.grad(), (softmax(x.detach(), 1) - onehot) / 4.0, 1e-12, 1e-14);
}

// ---- mse_loss and l1_loss ----------------------------------------------------------------------

TEST(RegressionLosses, Values) {
  const Tensor a = make({1, 2, 3, 4}, kFloat32, {2, 2});
  const Tensor b = make({1.5, 0, 3, 7}, kFloat32, {2, 2});
  expect_values(mse_loss(a, b, Reduction::None), {0.25, 4, 0, 9});
  expect_values(mse_loss(a, b, Reduction::Sum), {13.25});
  expect_values(mse_loss(a, b), {13.25 / 4});
  expect_values(l1_loss(a, b, Reduction::None), {0.5, 2, 0, 3});
  expect_values(l1_loss(a, b), {5.5 / 4});
  expect_values(l1_loss(a, b, Reduction::Sum), {5.5});
  EXPECT_EQ(mse_loss(a, b).dtype(), kFloat32);
  EXPECT_THROW_MSG(mse_loss(zeros({2}, {.dtype = kInt64}), zeros({2}, {.dtype = kInt64})), "[mse_loss]");
  EXPECT_THROW_MSG(l1_loss(zeros({2}, {.dtype = kInt32}), zeros({2})), "[l1_loss]");
}

TEST(RegressionLosses, Gradients) {
  const Tensor a = random_tensor({3, 4}, kFloat64, true);
  const Tensor b = random_tensor({3, 4}, kFloat64, true);
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_gradcheck([r](L v) { return mse_loss(v[0], v[1], r); }, {a, b});
    expect_gradgradcheck([r](L v) { return mse_loss(v[0], v[1], r); }, {a, b});
    expect_gradcheck([r](L v) { return l1_loss(v[0], v[1], r); }, {a, b});
  }
  // l1's gradient is sgn(input - target) / N.
  Tensor x = make({1, 5, -2, 0.5});
  x.requires_grad_();
  l1_loss(x, make({2, 1, -2.5, 0.5 - 1e-3})).backward();
  expect_values(x.grad(), {-0.25, 0.25, 0.25, 0.25});
}

// ---- meta --------------------------------------------------------------------------------------

TEST(SoftmaxLossMeta, ShapesWithoutData) {
  const TensorOptions meta{.dtype = kFloat32, .device = kMeta};
  const Tensor x = empty({8, 10}, meta);
  const Tensor t = empty({8}, {.dtype = kInt64, .device = kMeta});
  EXPECT_EQ(softmax(x, 1).sizes(), (Shape{8, 10}));
  EXPECT_TRUE(log_softmax(x, 0).is_meta());
  EXPECT_EQ(nll_loss(x, t).sizes(), (Shape{}));
  EXPECT_EQ(nll_loss(x, t, Reduction::None).sizes(), (Shape{8}));
  EXPECT_EQ(cross_entropy(x, t).sizes(), (Shape{}));
  EXPECT_EQ(mse_loss(x, x, Reduction::None).sizes(), (Shape{8, 10}));
  EXPECT_EQ(l1_loss(x, x).sizes(), (Shape{}));
  EXPECT_THROW_MSG(nll_loss(x, empty({7}, {.dtype = kInt64, .device = kMeta})), "expected target of shape [8]");
  // Backward shapes are inferred too.
  const Tensor leaf = empty({8, 10}, {.dtype = kFloat32, .device = kMeta, .requires_grad = true});
  const Tensor g = grad({cross_entropy(leaf, t)}, {leaf})[0];
  EXPECT_EQ(g.sizes(), (Shape{8, 10}));
  EXPECT_TRUE(g.is_meta());
}

// ---- CUDA --------------------------------------------------------------------------------------

// Gradient of sum(f(x) * w) w.r.t. x, for comparing backward kernels across devices.
testing::TensorFn grad_of(std::function<Tensor(const Tensor&)> f) {
  return [f](L v) {
    Tensor leaf = v[0].detach().requires_grad_();
    const Tensor out = f(leaf);
    const Tensor w = v[1].reshape(out.sizes());
    return grad({(out * w).sum()}, {leaf})[0];
  };
}

TEST(SoftmaxCuda, EveryDimSmallAndLarge) {
  TG_REQUIRE_CUDA();
  // Covers warp rows, block rows, thread rows (dim not innermost) and few very long rows.
  const std::vector<Shape> shapes = {{64, 10},   {3, 5, 7},   {4096, 1000}, {2, 3000},
                                     {20000, 3}, {5000, 40},  {3, 40000},   {50000}};
  for (const Shape& s : shapes) {
    const Tensor x = random_tensor(s, kFloat32, false, -5, 5);
    const Tensor w = random_tensor(s, kFloat32);
    for (int64_t dim = 0; dim < static_cast<int64_t>(s.size()); ++dim) {
      SCOPED_TRACE(shape_str(s) + " dim " + std::to_string(dim));
      expect_cuda_matches_cpu([dim](L v) { return softmax(v[0], dim); }, {x}, 1e-5, 1e-7);
      expect_cuda_matches_cpu([dim](L v) { return log_softmax(v[0], dim); }, {x}, 1e-5, 1e-5);
      expect_cuda_matches_cpu(grad_of([dim](const Tensor& t) { return softmax(t, dim); }), {x, w}, 1e-4, 1e-6);
      expect_cuda_matches_cpu(grad_of([dim](const Tensor& t) { return log_softmax(t, dim); }), {x, w}, 1e-4, 1e-5);
    }
  }
}

TEST(SoftmaxCuda, StridedAndDouble) {
  TG_REQUIRE_CUDA();
  const Tensor base = random_tensor({30, 20, 10}, kFloat64, false, -4, 4);
  for (const Tensor& x : {base.permute({2, 0, 1}), base.slice(1, 0, 20, 3), base.transpose(0, 2)}) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      expect_cuda_matches_cpu([dim](L v) { return softmax(v[0], dim); }, {x}, 1e-12, 1e-14);
      expect_cuda_matches_cpu([dim](L v) { return log_softmax(v[0], dim); }, {x}, 1e-12, 1e-12);
    }
  }
  // Few long strided rows (the reduction-engine path) in double, including the backward; the
  // transposes happen inside the functions so that the CUDA inputs are strided too.
  const Tensor columns = random_tensor({40000, 2}, kFloat64, false, -4, 4);
  const Tensor w = random_tensor({2, 40000}, kFloat64);
  expect_cuda_matches_cpu([](L v) { return log_softmax(v[0].t(), 1); }, {columns}, 1e-12, 1e-12);
  expect_cuda_matches_cpu(grad_of([](const Tensor& t) { return softmax(t.t(), 1); }), {columns, w}, 1e-10, 1e-14);
  expect_cuda_matches_cpu(grad_of([](const Tensor& t) { return softmax(t.t().narrow(0, 1, 1), 1); }), {columns, w[0]},
                          1e-10, 1e-14);
  expect_cuda_matches_cpu(grad_of([](const Tensor& t) { return log_softmax(t.t(), 1); }), {columns, w}, 1e-10,
                          1e-12);
  const Tensor inf_row = make({0, -kInf, 1, 2}, kFloat32, {2, 2});
  expect_cuda_matches_cpu([](L v) { return softmax(v[0], 1); }, {inf_row});
}

TEST(LossCuda, ForwardAndBackwardMatchCpu) {
  TG_REQUIRE_CUDA();
  for (int64_t n : {64, 100000}) {
    SCOPED_TRACE(n);
    const Tensor x = random_tensor({n, 10}, kFloat32, false, -3, 3);
    const Tensor t = randint(0, 10, {n});
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      const Tensor w = random_tensor(r == Reduction::None ? Shape{n} : Shape{}, kFloat32);
      expect_cuda_matches_cpu([r](L v) { return cross_entropy(v[0], v[1], r); }, {x, t}, 1e-4, 1e-5);
      expect_cuda_matches_cpu([r](L v) { return nll_loss(v[0], v[1], r); }, {x, t}, 1e-4, 1e-5);
      expect_cuda_matches_cpu(
          [r](L v) {
            Tensor leaf = v[0].detach().requires_grad_();
            return grad({(cross_entropy(leaf, v[1], r) * v[2]).sum()}, {leaf})[0];
          },
          {x, t, w}, 1e-4, 1e-7);
    }
    // The fused kernel reads strided logits (a transposed [C, N] tensor) in float64 too.
    const Tensor xt = random_tensor({10, n}, kFloat64, false, -3, 3);
    expect_cuda_matches_cpu([](L v) { return cross_entropy(v[0].t(), v[1]); }, {xt, t}, 1e-10, 1e-12);
    const Tensor y = random_tensor({n, 10}, kFloat32);
    expect_cuda_matches_cpu([](L v) { return mse_loss(v[0], v[1]); }, {x, y}, 1e-4, 1e-6);
    expect_cuda_matches_cpu([](L v) { return l1_loss(v[0], v[1], Reduction::Sum); }, {x, y}, 1e-4, 1e-3);
  }
}

// The kernel does not synchronize to check targets: a bad one gives NaN and is reported on the
// device, raised at the next host synchronization.
TEST(LossCuda, OutOfRangeTargetGivesNaNAndRaisesAtTheNextSync) {
  TG_REQUIRE_CUDA();
  const Tensor x = zeros({2, 3}, {.device = cuda_device()});
  const Tensor t = labels({0, 7}).cuda();
  const Tensor loss = nll_loss(x, t);
  EXPECT_THROW_MSG(loss.item<float>(), "[nll_loss] target 7 is out of range for 3 classes (at batch index 1)");
  EXPECT_TRUE(std::isnan(loss.item<float>()));
  const Tensor per_sample = nll_loss(x, t, Reduction::None);
  EXPECT_THROW_MSG(cuda::synchronize(0), "[nll_loss] target 7 is out of range for 3 classes");
  const auto none = per_sample.to_vector<float>();
  EXPECT_EQ(none[0], -0.0f);
  EXPECT_TRUE(std::isnan(none[1]));
  // The fused cross_entropy reports the same way, forward and backward.
  const Tensor logits = zeros({2, 3}, {.device = cuda_device()}).requires_grad_();
  const Tensor ce = cross_entropy(logits, t);
  EXPECT_THROW_MSG(ce.item<float>(), "[nll_loss] target 7 is out of range for 3 classes (at batch index 1)");
  ce.backward();
  EXPECT_THROW_MSG(cuda::synchronize(0), "[nll_loss_backward] target 7 is out of range for 3 classes");
}

}  // namespace
}  // namespace tg
