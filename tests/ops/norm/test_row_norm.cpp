// layer_norm and group_norm as fused ops: statistics in float32 for 16-bit inputs, a closed-form
// backward, float32 parameters beside 16-bit inputs, each device's autocast list, and the CUDA
// kernels against the CPU ones.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "support/test_support.h"
#include "tapegraph.h"

namespace tg {
namespace {

// The float64 result of fn on float64 copies of `inputs` (which keep their requires_grad flags).
Tensor reference(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  return fn(x.detach().to(kFloat64));
}

// x.grad of fn(x) against upstream gradient g, with x in x's own dtype.
Tensor input_grad(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x_in, const Tensor& g) {
  Tensor x = x_in.detach().requires_grad_(true);
  fn(x).backward(g.to(x.dtype()));
  return x.grad();
}

// The snippet of the bug report: float16 statistics made this [[0, 0.3015]] and the gradient NaN.
TEST(RowNorm, Float16LayerNormComputesStatisticsInFloat32) {
  Tensor x = tensor({1.0f, 1.001f}).reshape({1, 2}).to(kFloat16);
  auto ln = [](const Tensor& t) { return layer_norm(t, {2}); };
  const Tensor y = ln(x);
  EXPECT_EQ(y.dtype(), kFloat16);
  // PyTorch 2.x (CUDA, float16): [[-0.1526, 0.1526]].
  testing::expect_close(y.to(kFloat64), tensor({-0.1526, 0.1526}).reshape({1, 2}), 2e-3, 1e-4);
  const Tensor g = tensor({1.0f, 0.0f}).reshape({1, 2});
  const Tensor gx = input_grad(ln, x, g);
  EXPECT_EQ(gx.dtype(), kFloat16);
  // The float64 gradient of the same (rounded) input: [[152.6, -152.6]].
  const Tensor truth = input_grad(ln, x.to(kFloat64), g.to(kFloat64));
  testing::expect_close(gx.to(kFloat64), truth, 2e-3, 1e-3);
  EXPECT_NEAR(gx.to(kFloat64)[0][0].item<double>(), 152.6, 0.2);
}

TEST(RowNorm, BFloat16LayerNormOfNearlyEqualValues) {
  Tensor x = tensor({1.0f, 1.0078125f}).reshape({1, 2}).to(kBFloat16);
  const Tensor y = layer_norm(x, {2}).to(kFloat64);
  // Truth: +-0.7766 (var = 1.5e-5 beside eps = 1e-5).
  testing::expect_close(y, reference([](const Tensor& t) { return layer_norm(t, {2}); }, x), 1e-2, 1e-3);
  EXPECT_NEAR(y[0][1].item<double>(), 0.7766, 5e-3);
}

// Each element is rounded once from the exact value, in every floating dtype.
TEST(RowNorm, ValuesAndGradientsRoundOnceFromTheTruth) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == kFloat32 ? 1e-5 : (dt == kBFloat16 ? 1.6e-2 : 2e-3);
    const Tensor x = (testing::random_tensor({6, 33}, kFloat32, false, -1.0, 1.0) * 0.01 + 3.0).to(dt);
    const Tensor w = testing::random_tensor({33}, kFloat32, false, 0.5, 1.5).to(dt);
    const Tensor b = testing::random_tensor({33}, kFloat32).to(dt);
    const Tensor g = testing::random_tensor({6, 33}, kFloat32).to(dt);
    auto run = [&](DType as) {
      Tensor xi = x.to(as).detach().requires_grad_(true), wi = w.to(as).detach().requires_grad_(true),
             bi = b.to(as).detach().requires_grad_(true);
      Tensor y = layer_norm(xi, {33}, wi, bi);
      y.backward(g.to(as));
      return TensorList{y.to(kFloat64), xi.grad().to(kFloat64), wi.grad().to(kFloat64), bi.grad().to(kFloat64)};
    };
    const TensorList got = run(dt), truth = run(kFloat64);
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE(i);
      const double scale = truth[i].abs().amax().item<double>();
      testing::expect_close(got[i], truth[i], tol, tol * scale);
    }
  }
}

TEST(RowNorm, GroupNormFloat16StatisticsAndGradients) {
  const Tensor x = (testing::random_tensor({2, 4, 3, 2}, kFloat32) * 1e-3 + 1.0).to(kFloat16);
  const Tensor w = testing::random_tensor({4}, kFloat32, false, 0.5, 1.5).to(kFloat16);
  const Tensor b = testing::random_tensor({4}, kFloat32).to(kFloat16);
  const Tensor g = testing::random_tensor({2, 4, 3, 2}, kFloat32).to(kFloat16);
  auto run = [&](DType as) {
    Tensor xi = x.to(as).detach().requires_grad_(true), wi = w.to(as).detach().requires_grad_(true);
    Tensor y = group_norm(xi, 2, wi, b.to(as));
    y.backward(g.to(as));
    return TensorList{y.to(kFloat64), xi.grad().to(kFloat64), wi.grad().to(kFloat64)};
  };
  const TensorList got = run(kFloat16), truth = run(kFloat64);
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(std::isfinite(got[i].sum().item<double>()));
    testing::expect_close(got[i], truth[i], 4e-3, 4e-3 * truth[i].abs().amax().item<double>());
  }
}

TEST(RowNorm, GradcheckLayerNormAndGroupNorm) {
  const Tensor x = testing::random_tensor({3, 4, 5}, kFloat64, true);
  const Tensor w = testing::random_tensor({4, 5}, kFloat64, true);
  const Tensor b = testing::random_tensor({4, 5}, kFloat64, true);
  testing::expect_gradcheck([](const TensorList& a) { return layer_norm(a[0], {4, 5}, a[1], a[2]); }, {x, w, b});
  testing::expect_gradcheck([](const TensorList& a) { return layer_norm(a[0], {5}); }, {x});
  testing::expect_gradgradcheck([](const TensorList& a) { return layer_norm(a[0], {4, 5}, a[1], a[2]); }, {x, w, b});
  const Tensor gw = testing::random_tensor({4}, kFloat64, true), gb = testing::random_tensor({4}, kFloat64, true);
  testing::expect_gradcheck([](const TensorList& a) { return group_norm(a[0], 2, a[1], a[2]); }, {x, gw, gb});
  testing::expect_gradcheck([](const TensorList& a) { return group_norm(a[0], 4); }, {x});
  testing::expect_gradgradcheck([](const TensorList& a) { return group_norm(a[0], 2, a[1], a[2]); }, {x, gw, gb});
}

TEST(RowNorm, Float32ParametersBesideA16BitInput) {
  const Tensor x = testing::random_tensor({3, 8}, kFloat32).to(kBFloat16);
  Tensor w = testing::random_tensor({8}, kFloat32, true), b = testing::random_tensor({8}, kFloat32, true);
  const Tensor y = layer_norm(x, {8}, w, b);
  EXPECT_EQ(y.dtype(), kBFloat16);
  y.to(kFloat32).sum().backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
  testing::expect_close(y.to(kFloat64), layer_norm(x.to(kFloat64), {8}, w.detach().to(kFloat64), b.detach().to(kFloat64)),
                        1e-2, 1e-2);
  EXPECT_THROW_MSG(layer_norm(x.to(kFloat32), {8}, w.to(kFloat64)), "weight has dtype float64 but input has float32");
}

TEST(RowNorm, NoncontiguousAndEmptyInputs) {
  const Tensor x = testing::random_tensor({5, 4}, kFloat64).t();
  testing::expect_close(layer_norm(x, {5}), layer_norm(x.contiguous(), {5}), 1e-12, 1e-12);
  Tensor e = zeros({0, 6}).requires_grad_(true);
  Tensor w = ones({6}).requires_grad_(true);
  Tensor y = layer_norm(e, {6}, w);
  EXPECT_EQ(y.numel(), 0);
  y.sum().backward();
  testing::expect_close(w.grad(), zeros({6}));
}

// PyTorch's CPU autocast list does not hold layer_norm (16-bit stays 16-bit there); CUDA's does.
TEST(RowNorm, AutocastFollowsEachDevicesList) {
  const Tensor x = testing::random_tensor({2, 8}, kFloat32).to(kBFloat16);
  {
    AutocastGuard guard(kCPU, kBFloat16);
    EXPECT_EQ(layer_norm(x, {8}).dtype(), kBFloat16);
    EXPECT_EQ(group_norm(x.reshape({2, 4, 2}), 2).dtype(), kBFloat16);
  }
  if (!cuda_is_available()) return;
  const Device cuda{DeviceType::CUDA, 0};
  AutocastGuard guard(cuda, kBFloat16);
  EXPECT_EQ(layer_norm(x.to(cuda), {8}).dtype(), kFloat32);
  EXPECT_EQ(group_norm(x.to(cuda).reshape({2, 4, 2}), 2).dtype(), kFloat32);
}

TEST(RowNormCuda, MatchesCpuInEveryDtypeAndRowLength) {
  TG_REQUIRE_CUDA();
  const Device cuda{DeviceType::CUDA, 0};
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    // Rows of up to 1024 elements, a multiple of 4, take the register-resident kernels (768 and 1024
    // as several vectors per lane, 64 and 256 as few); the others the general ones. 3000 rows give
    // every warp of the vectorized backward several rows.
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
             {9, 1}, {9, 7}, {9, 64}, {9, 256}, {9, 768}, {9, 1024}, {9, 1500}, {9, 5000}, {3000, 128}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols));
      const double tol = dt == kFloat64 ? 1e-10 : (dt == kFloat32 ? 1e-4 : 2e-2);
      const Tensor x = testing::random_tensor({rows, cols}, kFloat32).to(dt);
      const Tensor w = testing::random_tensor({cols}, kFloat32).to(dt), b = testing::random_tensor({cols}, kFloat32).to(dt);
      const Tensor g = testing::random_tensor({rows, cols}, kFloat32).to(dt);
      auto run = [&](Device d) {
        Tensor xi = x.to(d).detach().requires_grad_(true), wi = w.to(d).detach().requires_grad_(true),
               bi = b.to(d).detach().requires_grad_(true);
        Tensor y = layer_norm(xi, {cols}, wi, bi);
        y.backward(g.to(d));
        return TensorList{y, xi.grad(), wi.grad(), bi.grad()};
      };
      const TensorList c = run(kCPU), d = run(cuda);
      for (size_t i = 0; i < c.size(); ++i)
        testing::expect_close(d[i].to(kCPU).to(kFloat64), c[i].to(kFloat64), tol,
                              tol * std::max(1.0, c[i].to(kFloat64).abs().amax().item<double>()));
    }
  }
  // bfloat16 rows with float32 parameters (autocast's layer_norm of a 16-bit input), vectorized.
  {
    const Tensor x = testing::random_tensor({40, 96}, kFloat32).to(kBFloat16);
    const Tensor w = testing::random_tensor({96}, kFloat32), b = testing::random_tensor({96}, kFloat32);
    const Tensor g = testing::random_tensor({40, 96}, kFloat32).to(kBFloat16);
    auto run = [&](Device d) {
      Tensor xi = x.to(d).detach().requires_grad_(true), wi = w.to(d).detach().requires_grad_(true),
             bi = b.to(d).detach().requires_grad_(true);
      Tensor y = layer_norm(xi, {96}, wi, bi);
      y.backward(g.to(d));
      return TensorList{y, xi.grad(), wi.grad(), bi.grad()};
    };
    const TensorList c = run(kCPU), d = run(cuda);
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(d[i].dtype(), c[i].dtype());
      testing::expect_close(d[i].to(kCPU).to(kFloat64), c[i].to(kFloat64), 2e-2, 2e-2);
    }
  }
  const Tensor x = testing::random_tensor({3, 6, 5, 4}, kFloat32);
  const Tensor w = testing::random_tensor({6}, kFloat32), b = testing::random_tensor({6}, kFloat32);
  testing::expect_cuda_matches_cpu([](const TensorList& a) { return group_norm(a[0], 3, a[1], a[2]); }, {x, w, b},
                                   1e-4, 1e-5);
  auto grads = [&](Device d) {
    Tensor xi = x.to(d).detach().requires_grad_(true), wi = w.to(d).detach().requires_grad_(true),
           bi = b.to(d).detach().requires_grad_(true);
    (group_norm(xi, 3, wi, bi) * x.to(d)).sum().backward();
    return TensorList{xi.grad().to(kCPU), wi.grad().to(kCPU), bi.grad().to(kCPU)};
  };
  const TensorList gc = grads(kCPU), gd = grads(cuda);
  for (size_t i = 0; i < gc.size(); ++i) testing::expect_close(gd[i], gc[i], 1e-4, 1e-4);
}

// A row of equal values normalizes to exactly the bias on every device (its mean is the value
// itself): a mean off by an ulp, times rstd ~ 1/sqrt(eps), gave 1e-5 noise after a padded conv.
TEST(RowNorm, EqualValuesGiveExactlyTheBias) {
  std::vector<Device> devices{kCPU};
  if (cuda_is_available()) devices.push_back(cuda_device(0));
  for (Device d : devices)
    for (DType dt : {kFloat32, kBFloat16}) {
      Tensor x = mul(ones({3, 6}, {.dtype = kFloat32}), from_vector(std::vector<float>{0.1f, -0.7f, 3.3f}, {3, 1}))
                     .to(dt)
                     .to(d);
      Tensor w = randn({6}).to(d), b = randn({6}).to(d);
      Tensor y = layer_norm(x, {6}, w, b).to(kCPU).to(kFloat32);
      for (int64_t r = 0; r < 3; ++r)
        EXPECT_EQ(y.select(0, r).to_vector<float>(), b.to(kCPU).to(dt).to(kFloat32).to_vector<float>())
            << d.str() << " " << dtype_name(dt) << " row " << r;
    }
}

TEST(RowNorm, CompiledMatchesEager) {
  nn::LayerNorm ln(Shape{6});
  auto f = compile([&ln](const Tensor& x) { return ln(x).sin().sum(); }, {.backend = "aot_eager"});
  for (int i = 0; i < 2; ++i) {
    Tensor x = testing::random_tensor({4, 6}, kFloat32, true);
    Tensor xe = x.detach().requires_grad_(true);
    Tensor lc = f(x), le = ln(xe).sin().sum();
    testing::expect_close(lc, le, 1e-6, 1e-6);
    lc.backward();
    le.backward();
    testing::expect_close(x.grad(), xe.grad(), 1e-5, 1e-6);
  }
}

}  // namespace
}  // namespace tg
