// add_layer_norm against the separate ops it stands for (add, layer_norm, the cast): values and
// gradients on the CPU and, bit for bit, on CUDA, for the dtype sets its kernels take and one they
// do not; errors naming what was given. Gradchecks run with the op cases (tests/support/op_cases.h).
#include <gtest/gtest.h>

#include <optional>

#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;

struct Results {
  Tensor sum, normed, g_residual, g_update, g_weight, g_bias;
};

// Runs the fused op (or the separate ops) on copies of the operands, and the backward of a loss that
// reads both results, so the sum's gradient arrives from two places.
Results run(bool fused, const Tensor& r0, const Tensor& u0, const Tensor& w0, const Tensor& b0,
        std::optional<DType> out, const Tensor& gn, const Tensor& gs) {
  Tensor r = r0.detach().clone().requires_grad_(true), u = u0.detach().clone().requires_grad_(true);
  Tensor w = w0.defined() ? w0.detach().clone().requires_grad_(true) : Tensor();
  Tensor b = b0.defined() ? b0.detach().clone().requires_grad_(true) : Tensor();
  const Shape shape{r.size(-1)};
  Results o;
  if (fused) {
    const AddLayerNormResult res = add_layer_norm(r, u, shape, w, b, 1e-5, out);
    o.sum = res.sum;
    o.normed = res.normed;
  } else {
    o.sum = r + u;
    o.normed = layer_norm(o.sum, shape, w, b, 1e-5);
    if (out) o.normed = o.normed.to(*out);
  }
  (mul(o.normed, gn).sum() + mul(o.sum, gs).sum()).backward();
  o.g_residual = r.grad();
  o.g_update = u.grad();
  if (w.defined()) o.g_weight = w.grad();
  if (b.defined()) o.g_bias = b.grad();
  return o;
}

void expect_runs_equal(const Results& a, const Results& b, double rtol, double atol) {
  expect_close(a.sum, b.sum, rtol, atol);
  expect_close(a.normed, b.normed, rtol, atol);
  EXPECT_EQ(a.normed.dtype(), b.normed.dtype());
  EXPECT_EQ(a.g_update.dtype(), b.g_update.dtype());
  expect_close(a.g_residual, b.g_residual, rtol, atol);
  expect_close(a.g_update, b.g_update, rtol, atol);
  if (a.g_weight.defined() || b.g_weight.defined()) expect_close(a.g_weight, b.g_weight, rtol, atol);
  if (a.g_bias.defined() || b.g_bias.defined()) expect_close(a.g_bias, b.g_bias, rtol, atol);
}

// Fused against separate ops for one dtype set on one device; rows of `cols` elements.
void expect_matches_separate_ops(Device dev, DType residual, DType update, std::optional<DType> out, int64_t cols,
                                 bool affine, double rtol, double atol) {
  manual_seed(static_cast<uint64_t>(cols) * 7 + static_cast<uint64_t>(residual));
  const Shape shape{3, 5, cols};
  const Tensor r = randn(shape, {.device = dev}).to(residual), u = randn(shape, {.device = dev}).to(update);
  const DType t = promote_types(residual, update);
  const DType param = t == kFloat64 ? kFloat64 : (is_low_precision(t) ? t : kFloat32);
  const Tensor w = affine ? (randn({cols}, {.device = dev}) * 0.5 + 1.0).to(param) : Tensor();
  const Tensor b = affine ? randn({cols}, {.device = dev}).to(param) : Tensor();
  const Tensor gn = randn(shape, {.device = dev}).to(out.value_or(t));
  const Tensor gs = randn(shape, {.device = dev}).to(t);
  expect_runs_equal(run(true, r, u, w, b, out, gn, gs), run(false, r, u, w, b, out, gn, gs), rtol, atol);
}

TEST(AddLayerNorm, MatchesTheSeparateOpsOnCpu) {
  expect_matches_separate_ops(kCPU, kFloat64, kFloat64, std::nullopt, 24, true, 1e-12, 1e-12);
  expect_matches_separate_ops(kCPU, kFloat32, kFloat32, std::nullopt, 24, false, 1e-6, 1e-6);
  expect_matches_separate_ops(kCPU, kFloat32, kBFloat16, kBFloat16, 16, true, 0, 0);
  expect_matches_separate_ops(kCPU, kFloat32, kFloat32, kFloat16, 10, true, 0, 0);
}

TEST(AddLayerNorm, SumOnlyAndNormedOnlyGradients) {
  manual_seed(3);
  Tensor r = randn({4, 6}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor u = randn({4, 6}, {.dtype = kFloat64}).requires_grad_(true);
  add_layer_norm(r, u, {6}).sum.sum().backward();
  expect_close(r.grad(), ones({4, 6}, {.dtype = kFloat64}));
  expect_close(u.grad(), ones({4, 6}, {.dtype = kFloat64}));
  Tensor r2 = r.detach().clone().requires_grad_(true), u2 = u.detach().clone().requires_grad_(true);
  const Tensor g = randn({4, 6}, {.dtype = kFloat64});
  mul(add_layer_norm(r, u, {6}).normed, g).sum().backward();
  mul(layer_norm(r2 + u2, {6}), g).sum().backward();
  expect_close(r.grad(), add(r2.grad(), ones({4, 6}, {.dtype = kFloat64})), 1e-12, 1e-12);
}

TEST(AddLayerNorm, BadInputsRaiseNamingWhatWasGiven) {
  const Tensor r = randn({2, 4}), u = randn({2, 4});
  EXPECT_THROW_MSG(add_layer_norm(r, randn({1, 4}), {4}),
                   "[add_layer_norm] residual of shape [2, 4] and update of shape [1, 4]: expected one shape");
  EXPECT_THROW_MSG(add_layer_norm(r, u, {3}), "[add_layer_norm] normalized_shape [3] does not match the trailing dims");
  EXPECT_THROW_MSG(add_layer_norm(r, u, {4}, randn({3})),
                   "[add_layer_norm] weight of shape [3]: expected normalized_shape [4]");
  EXPECT_THROW_MSG(add_layer_norm(r, u, {4}, Tensor(), Tensor(), 1e-5, kInt64),
                   "[add_layer_norm] expected a floating output dtype, got int64");
  EXPECT_THROW_MSG(add_layer_norm(r, Tensor(), {4}), "[add_layer_norm] got an undefined update");
}

TEST(AddLayerNormCuda, BitForBitTheSeparateOps) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  // The fused kernels' dtype sets (rows of 768 and of 64 elements) ...
  for (int64_t cols : {768, 64}) {
    expect_matches_separate_ops(dev, kFloat32, kFloat32, std::nullopt, cols, true, 0, 0);
    expect_matches_separate_ops(dev, kFloat32, kBFloat16, kBFloat16, cols, true, 0, 0);
    expect_matches_separate_ops(dev, kFloat32, kFloat16, kFloat16, cols, false, 0, 0);
    expect_matches_separate_ops(dev, kBFloat16, kBFloat16, std::nullopt, cols, true, 0, 0);
  }
  // ... and sets or rows the kernels do not take (separate kernels inside the op).
  expect_matches_separate_ops(dev, kFloat32, kBFloat16, kFloat32, 768, true, 0, 0);
  expect_matches_separate_ops(dev, kFloat32, kFloat32, std::nullopt, 1030, true, 0, 0);
  expect_matches_separate_ops(dev, kFloat64, kFloat64, std::nullopt, 96, true, 0, 0);
}

TEST(AddLayerNormCuda, MatchesTheCpu) {
  TG_REQUIRE_CUDA();
  manual_seed(5);
  const Tensor r = randn({6, 128}), u = randn({6, 128}), w = randn({128}), b = randn({128});
  const Tensor gn = randn({6, 128}), gs = randn({6, 128});
  const Device dev = cuda_device();
  const Results cpu = run(true, r, u, w, b, std::nullopt, gn, gs);
  const Results gpu = run(true, r.to(dev), u.to(dev), w.to(dev), b.to(dev), std::nullopt, gn.to(dev), gs.to(dev));
  expect_runs_equal(gpu, cpu, 1e-5, 1e-5);
}

TEST(AddLayerNormCuda, UnderAutocastTheRowsComeOutIn16Bits) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  manual_seed(9);
  const Tensor r = randn({4, 256}, {.device = dev}), w = randn({256}, {.device = dev});
  const Tensor u = randn({4, 256}, {.device = dev}).to(kBFloat16);
  AutocastGuard autocast(dev, kBFloat16);
  const AddLayerNormResult fused = add_layer_norm(r, u, {256}, w, Tensor(), 1e-5, kBFloat16);
  const Tensor sum = r + u;
  EXPECT_EQ(fused.sum.dtype(), kFloat32);
  EXPECT_EQ(fused.normed.dtype(), kBFloat16);
  expect_close(fused.normed, layer_norm(sum, {256}, w).to(kBFloat16), 0, 0);
}

}  // namespace
}  // namespace tg
