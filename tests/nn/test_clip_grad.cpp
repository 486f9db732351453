// nn::utils::clip_grad_norm_ and its halves: values against PyTorch (printed by PyTorch 1.13's
// torch.nn.utils.clip_grad_norm_), every norm order, non-finite norms, mixed dtypes, compiled
// (aot_eager on the CPU; CUDA graphs with a GPU) against eager, and CPU against CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nn/nn.h"
#include "optim/optim.h"
#include "support/test_support.h"

namespace tg::nn::utils {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Three parameters: a [2,3] and a [2] with fixed gradients, and a [4] without one. With PyTorch:
//   a.grad = torch.tensor([[0.5, -1.0, 2.0], [3.0, -0.25, 0.0]]); b.grad = torch.tensor([1.5, -2.5])
TensorList make_params(DType dtype, Device device = kCPU) {
  Tensor a = zeros({2, 3}, {.dtype = dtype, .device = device}).requires_grad_(true);
  Tensor b = zeros({2}, {.dtype = dtype, .device = device}).requires_grad_(true);
  Tensor c = zeros({4}, {.dtype = dtype, .device = device}).requires_grad_(true);
  a.set_grad(tensor({0.5, -1.0, 2.0, 3.0, -0.25, 0.0}, {.dtype = dtype}).reshape({2, 3}).to(device));
  b.set_grad(tensor({1.5, -2.5}, {.dtype = dtype}).to(device));
  return {a, b, c};
}

// The clip coefficients PyTorch applied: clip_grad_norm_(params, max_norm=2.0, norm_type=p) returned
// `norm` and left a.grad = g_a * coef, b.grad = g_b * coef (float64 run; coef read off b.grad[0] / 1.5).
struct Expected {
  double p, norm, a0, b1;
};
const std::vector<Expected> kFloat64Cases = {
    {2.0, 4.776243293635701, 0.2093695252004782, -1.046847626002391},
    {1.0, 10.75, 0.09302324716062818, -0.4651162358031409},
    {kInf, 3.0, 0.33333322222225925, -1.6666661111112964},
    {3.0, 3.806190854997902, 0.262729793477673, -1.3136489673883651},
    {0.5, 66.5734397497468, 0.015021005204749064, -0.07510502602374532},
    {0.0, 2.0, 0.499999750000125, -2.499998750000625},  // order 0 counts the tensors with a nonzero grad
};

TEST(ClipGradNorm, MatchesPyTorchForEveryOrderFloat64) {
  for (const Expected& e : kFloat64Cases) {
    TensorList ps = make_params(kFloat64);
    const Tensor norm = clip_grad_norm_(ps, 2.0, e.p);
    EXPECT_EQ(norm.dim(), 0);
    EXPECT_EQ(norm.dtype(), kFloat64);
    EXPECT_NEAR(norm.item<double>(), e.norm, 1e-13 * e.norm) << "p=" << e.p;
    const double coef = e.b1 / -2.5;
    testing::expect_close(ps[0].grad(),
                          tensor({0.5, -1.0, 2.0, 3.0, -0.25, 0.0}, {.dtype = kFloat64}).reshape({2, 3}) * coef, 1e-13,
                          0);
    EXPECT_NEAR(ps[0].grad().reshape({6})[0].item<double>(), e.a0, 1e-13);
    EXPECT_NEAR(ps[1].grad()[1].item<double>(), e.b1, 1e-13);
    EXPECT_FALSE(ps[2].grad().defined());
  }
}

TEST(ClipGradNorm, MatchesPyTorchFloat32) {
  // PyTorch float32: p=2 norm 4.776243209838867, a.grad[0,0] 0.20936952531337738, b.grad[1] -1.0468475818634033;
  // p=inf norm 3.0, b.grad[1] -1.6666661500930786.
  TensorList ps = make_params(kFloat32);
  Tensor norm = clip_grad_norm_(ps, 2.0);
  EXPECT_EQ(norm.dtype(), kFloat32);
  EXPECT_NEAR(norm.item<float>(), 4.776243209838867, 1e-6);
  EXPECT_NEAR(ps[0].grad().reshape({6})[0].item<float>(), 0.20936952531337738, 1e-7);
  EXPECT_NEAR(ps[1].grad()[1].item<float>(), -1.0468475818634033, 1e-6);
  ps = make_params(kFloat32);
  norm = clip_grad_norm_(ps, 2.0, kInf);
  EXPECT_EQ(norm.item<float>(), 3.0f);
  EXPECT_NEAR(ps[1].grad()[1].item<float>(), -1.6666661500930786, 1e-6);
}

// Below max_norm the coefficient clamps to 1: the gradients stay exactly as they were.
TEST(ClipGradNorm, BelowMaxNormLeavesGradientsAlone) {
  TensorList ps = make_params(kFloat64);
  const Tensor norm = clip_grad_norm_(ps, 100.0);
  EXPECT_DOUBLE_EQ(norm.item<double>(), 4.776243293635701);
  testing::expect_close(ps[1].grad(), tensor({1.5, -2.5}, {.dtype = kFloat64}), 0, 0);
}

// -inf takes the smallest |g| of all (PyTorch: the min of the per-tensor min |g|): 0 here, so the
// coefficient clamps to 1.
TEST(ClipGradNorm, NegativeInfinityOrder) {
  TensorList ps = make_params(kFloat64);
  EXPECT_EQ(clip_grad_norm_(ps, 2.0, -kInf).item<double>(), 0.0);
  EXPECT_EQ(ps[1].grad()[0].item<double>(), 1.5);
}

TEST(ClipGradNorm, HalvesAgreeWithTheWhole) {
  TensorList whole = make_params(kFloat64), halves = make_params(kFloat64);
  const Tensor n1 = clip_grad_norm_(whole, 2.0, 3.0);
  const Tensor n2 = get_total_norm({halves[0].grad(), halves[1].grad()}, 3.0);
  clip_grads_with_norm_(halves, 2.0, n2);
  testing::expect_close(n2, n1, 0, 0);
  for (size_t i = 0; i < 2; ++i) testing::expect_close(halves[i].grad(), whole[i].grad(), 0, 0);
}

TEST(ClipGradNorm, NoGradientsGiveAZeroNorm) {
  Tensor p = zeros({3}).requires_grad_(true);
  const Tensor n = clip_grad_norm_({p}, 1.0);
  EXPECT_EQ(n.dim(), 0);
  EXPECT_EQ(n.dtype(), kFloat32);
  EXPECT_EQ(n.item<float>(), 0.f);
  EXPECT_EQ(clip_grad_norm_({}, 1.0).item<float>(), 0.f);
}

TEST(ClipGradNorm, NonFiniteNorm) {
  TensorList ps = make_params(kFloat64);
  ps[1].grad().fill_(kInf);
  EXPECT_THROW_MSG(clip_grad_norm_(ps, 2.0, 2.0, true),
                   "[clip_grad_norm_] The total norm of order 2.0 for gradients from `parameters` is non-finite, so "
                   "it cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                   "anyway, set `error_if_nonfinite=False`");
  EXPECT_THROW_MSG(clip_grad_norm_(ps, 2.0, kInf, true), "The total norm of order inf");
  // Nothing was scaled by the raising calls.
  EXPECT_EQ(ps[0].grad()[1][0].item<double>(), 3.0);
  // Without the check, as PyTorch: the norm is inf and the coefficient 0 (inf * 0 = NaN).
  const Tensor n = clip_grad_norm_(ps, 2.0);
  EXPECT_TRUE(std::isinf(n.item<double>()));
  EXPECT_EQ(ps[0].grad()[1][0].item<double>(), 0.0);
  EXPECT_TRUE(std::isnan(ps[1].grad()[0].item<double>()));
  // A NaN gradient makes a NaN norm, for the inf order too.
  TensorList qs = make_params(kFloat32);
  qs[0].grad()[0][0].fill_(std::nan(""));
  EXPECT_TRUE(std::isnan(get_total_norm({qs[0].grad(), qs[1].grad()}, kInf).item<float>()));
  EXPECT_THROW_MSG(clip_grad_norm_(qs, 1.0, 2.0, true), "is non-finite");
}

TEST(ClipGradNorm, RejectsBadInput) {
  Tensor e = zeros({0}).requires_grad_(true);
  e.set_grad(zeros({0}));
  EXPECT_THROW_MSG(clip_grad_norm_({e}, 1.0, kInf), "cannot compute the inf norm on an empty tensor");
  EXPECT_EQ(clip_grad_norm_({e}, 1.0).item<float>(), 0.f);  // the 2-norm of nothing is 0
  TensorList ps = make_params(kFloat64);
  EXPECT_THROW_MSG(clip_grads_with_norm_(ps, 1.0, zeros({2})), "[clip_grads_with_norm_] total_norm must be one number");
}

// Mixed dtypes: partials accumulate in float32 (float64 where a gradient is float64), and the norm
// has the gradients' promoted dtype; bfloat16 gradients are summed in float32, not in bfloat16.
TEST(ClipGradNorm, MixedAndSixteenBitDtypes) {
  Tensor a = zeros({2, 3}).requires_grad_(true);
  Tensor b = zeros({2}, {.dtype = kFloat64}).requires_grad_(true);
  a.set_grad(tensor({0.5, -1.0, 2.0, 3.0, -0.25, 0.0}, {.dtype = kFloat32}).reshape({2, 3}));
  b.set_grad(tensor({1.5, -2.5}, {.dtype = kFloat64}));
  const Tensor n = clip_grad_norm_({a, b}, 2.0);
  EXPECT_EQ(n.dtype(), kFloat64);
  EXPECT_NEAR(n.item<double>(), 4.776243293635701, 1e-12);
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_NEAR(b.grad()[1].item<double>(), -1.046847626002391, 1e-12);

  // 4096 gradients of 1/64 in bfloat16: the exact norm is 1; a bfloat16 running sum would stall.
  Tensor h = zeros({4096}, {.dtype = kBFloat16}).requires_grad_(true);
  h.set_grad(full({4096}, 1.0 / 64, {.dtype = kBFloat16}));
  const Tensor hn = clip_grad_norm_({h}, 0.5);
  EXPECT_EQ(hn.dtype(), kBFloat16);
  EXPECT_EQ(hn.to(kFloat32).item<float>(), 1.0f);
  EXPECT_NEAR(h.grad()[0].to(kFloat32).item<float>(), 0.5 / 64, 1e-5);
}

// A non-contiguous gradient (a transposed view) is reduced and scaled in place.
TEST(ClipGradNorm, NonContiguousGradient) {
  Tensor p = zeros({3, 2}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor g = tensor({0.5, -1.0, 2.0, 3.0, -0.25, 0.0}, {.dtype = kFloat64}).reshape({2, 3}).t();
  ASSERT_FALSE(g.is_contiguous());
  p.set_grad(g);
  Tensor q = zeros({2}, {.dtype = kFloat64}).requires_grad_(true);
  q.set_grad(tensor({1.5, -2.5}, {.dtype = kFloat64}));
  EXPECT_NEAR(clip_grad_norm_({p, q}, 2.0).item<double>(), 4.776243293635701, 1e-13);
  EXPECT_NEAR(p.grad()[0][1].item<double>(), 3.0 * 0.2093695252004782 / 0.5, 1e-13);
}

// clip_norm_ inside a compiled function (aot_eager): one trace, the same norm and gradients as eager,
// no eager fallback (nothing reads a value on the host).
TEST(ClipGradNormCompiled, CompiledFunctionMatchesEager) {
  auto clip = compile([](const std::vector<Tensor>& grads) { return clip_norm_(grads, 1.0); });
  for (int call = 0; call < 3; ++call) {
    manual_seed(10 + call);
    TensorList eager_grads{randn({4, 5}), randn({5}), randn({3, 3, 2})};
    std::vector<Tensor> compiled_grads;
    for (const Tensor& g : eager_grads) compiled_grads.push_back(g.clone());
    const Tensor expected = clip_norm_(eager_grads, 1.0);
    const Tensor got = clip(compiled_grads);
    testing::expect_close(got, expected, 1e-6, 1e-7);
    for (size_t i = 0; i < eager_grads.size(); ++i) testing::expect_close(compiled_grads[i], eager_grads[i], 1e-6, 1e-7);
  }
  EXPECT_EQ(clip.counters().compilations, 1);
  EXPECT_EQ(clip.counters().eager_fallbacks, 0);
  // One op for the three gradients' norms, one reduction over them.
  EXPECT_EQ(clip.counters().forward_ops.at("multi_tensor_norm"), 1);
  EXPECT_EQ(clip.counters().forward_ops.at("sum"), 1);
  EXPECT_EQ(clip.counters().forward_ops.count("cat"), 0u);
  EXPECT_EQ(clip.counters().forward_ops.at("mul_"), 3);  // the gradients scaled in place
}

// error_if_nonfinite reads the norm on the host: under compile() that is data-dependent code, which
// runs eagerly with the reason (or raises with fullgraph), and still raises on a non-finite norm.
TEST(ClipGradNormCompiled, NonFiniteCheckRunsEagerly) {
  auto clip = compile([](const std::vector<Tensor>& grads) { return clip_norm_(grads, 1.0, 2.0, true); });
  std::vector<Tensor> grads{full({3}, 2.0), ones({2})};
  testing::expect_close(clip(grads), full({}, std::sqrt(14.0)), 1e-6, 0);
  EXPECT_EQ(clip.counters().eager_fallbacks, 1);
  grads[1].fill_(std::nan(""));
  EXPECT_THROW_MSG(clip(grads), "is non-finite");
}

// Runs `steps` SGD steps on two copies of a small regression model: clip_grad_norm_ then step()
// eagerly, and a CompiledStep that clips inside its compiled update. Returns the compiled step's
// counters after checking the parameters agree.
graphs::CompileCounters clipped_steps_match(CompileOptions compile, Device device, int steps) {
  manual_seed(4);
  Linear eager_model(6, 3), compiled_model(6, 3);
  eager_model.to(device);
  compiled_model.to(device);
  compiled_model.load_state_dict(eager_model.state_dict());
  optim::SGD eager_opt(eager_model.parameters(), {.lr = 0.5, .momentum = 0.9});
  optim::SGD compiled_opt(compiled_model.parameters(), {.lr = 0.5, .momentum = 0.9});
  optim::CompiledStep step(compiled_opt, compile);
  step.set_grad_transform([](const TensorList& grads) { clip_norm_(grads, 0.1); });
  const Tensor x = randn({8, 6}).to(device), y = randn({8, 3}).to(device);
  for (int i = 0; i < steps; ++i) {
    eager_opt.zero_grad();
    compiled_opt.zero_grad();
    mse_loss(eager_model(x), y).backward();
    mse_loss(compiled_model(x), y).backward();
    clip_grad_norm_(eager_model.parameters(), 0.1);
    eager_opt.step();
    step.step();
  }
  const TensorList a = eager_model.parameters(), b = compiled_model.parameters();
  for (size_t k = 0; k < a.size(); ++k) {
    testing::expect_close(b[k].detach().to(kCPU), a[k].detach().to(kCPU), 1e-5, 1e-6);
    testing::expect_close(b[k].grad().to(kCPU), a[k].grad().to(kCPU), 1e-5, 1e-6);  // clipped in place too
  }
  return step.counters();
}

TEST(ClipGradNormCompiled, ClippingInsideACompiledStep) {
  const graphs::CompileCounters c = clipped_steps_match({.backend = "aot_eager"}, kCPU, 6);
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.eager_fallbacks, 0);
}

TEST(ClipGradNormCuda, MatchesCpu) {
  TG_REQUIRE_CUDA();
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Expected& e : kFloat64Cases) {
      TensorList cpu = make_params(dtype), gpu = make_params(dtype, cuda_device());
      const Tensor n_cpu = clip_grad_norm_(cpu, 2.0, e.p);
      const Tensor n_gpu = clip_grad_norm_(gpu, 2.0, e.p);
      EXPECT_TRUE(n_gpu.is_cuda());
      const double tol = dtype == kFloat32 ? 1e-6 : 1e-13;
      testing::expect_close(n_gpu.to(kCPU), n_cpu, tol, tol);
      for (size_t i = 0; i < 2; ++i) testing::expect_close(gpu[i].grad().to(kCPU), cpu[i].grad(), tol, tol);
    }
  }
}

// In a CUDA graph: clipping and the update are one recording, replayed, with no eager node (no
// host synchronization anywhere).
TEST(ClipGradNormCuda, ClippingInsideACudaGraphStep) {
  TG_REQUIRE_CUDA();
  const graphs::CompileCounters c = clipped_steps_match({.backend = "cudagraphs"}, cuda_device(), 6);
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.graphs_captured, 1);
  EXPECT_EQ(c.eager_nodes, 0);
}

}  // namespace
}  // namespace tg::nn::utils
