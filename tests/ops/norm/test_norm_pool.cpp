// Pooling and normalization: values against hand-computed results, running statistics, modules,
// clear errors, and compiled training steps whose buffer updates match eager (aot_eager, cudagraphs).
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"

namespace tg {
namespace {

Tensor grid(int64_t h, int64_t w) { return arange(h * w, {.dtype = kFloat32}).view({1, 1, h, w}); }

std::vector<float> values(const Tensor& t) { return t.contiguous().to(kFloat32).to_vector<float>(); }

TEST(MaxPool2d, ValuesAndIndices) {
  auto [v, i] = max_pool2d_with_indices(grid(4, 4), {2});
  EXPECT_EQ(v.sizes(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(v), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{5, 7, 13, 15}));
}

TEST(MaxPool2d, CeilModePaddingAndDilation) {
  EXPECT_EQ(max_pool2d(grid(5, 5), {2}).sizes(), (Shape{1, 1, 2, 2}));
  Tensor c = max_pool2d(grid(5, 5), {2}, {2}, {0}, {1}, true);
  EXPECT_EQ(values(c), (std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24}));
  // Padding: windows reaching outside see -inf; dilation 2 picks every other element.
  Tensor p = max_pool2d(-grid(3, 3), {3}, {1}, {1});
  EXPECT_EQ(values(p), (std::vector<float>{0, 0, -1, 0, 0, -1, -3, -3, -4}));
  Tensor d = max_pool2d(grid(5, 5), {2}, {1}, {0}, {2});
  EXPECT_EQ(values(d), (std::vector<float>{12, 13, 14, 17, 18, 19, 22, 23, 24}));
}

TEST(MaxPool2d, GradientGoesToTheMaximum) {
  Tensor x = grid(4, 4).to(kFloat64).requires_grad_(true);
  max_pool2d(x, {2}).sum().backward();
  std::vector<float> expect(16, 0.0f);
  for (int k : {5, 7, 13, 15}) expect[k] = 1;
  EXPECT_EQ(values(x.grad()), expect);
}

TEST(MaxPool2d, NanPropagates) {
  Tensor x = grid(2, 2).clone();
  x = where(eq(x, 1.0), full_like(x, std::nan("")), x);
  EXPECT_TRUE(std::isnan(max_pool2d(x, {2}).item<float>()));
}

TEST(AvgPool2d, CountIncludePad) {
  Tensor x = ones({1, 1, 3, 3});
  testing::expect_close(avg_pool2d(x, {3}, {1}, {1}),
                        from_vector<float>({4 / 9.f, 6 / 9.f, 4 / 9.f, 6 / 9.f, 1, 6 / 9.f, 4 / 9.f, 6 / 9.f, 4 / 9.f},
                                           {1, 1, 3, 3}));
  testing::expect_close(avg_pool2d(x, {3}, {1}, {1}, false, false), ones({1, 1, 3, 3}));
  // ceil_mode: the last window is clipped at the input edge and divides by what it covers.
  testing::expect_close(avg_pool2d(grid(1, 5), {1, 2}, {1, 2}, {0}, true), from_vector<float>({0.5, 2.5, 4}, {1, 1, 1, 3}));
}

TEST(AdaptiveAvgPool2d, PyTorchWindows) {
  testing::expect_close(adaptive_avg_pool2d(grid(1, 5), {1, 3}), from_vector<float>({0.5, 2, 3.5}, {1, 1, 1, 3}));
  Tensor x = randn({2, 3, 4, 6});
  testing::expect_close(adaptive_avg_pool2d(x, {1}), mean(x, {2, 3}, true), 1e-5, 1e-6);
  testing::expect_close(adaptive_avg_pool2d(x, {2, 3}), avg_pool2d(x, {2}), 1e-5, 1e-6);
}

TEST(Pooling, ZeroBatchAndNonContiguousInputs) {
  EXPECT_EQ(max_pool2d(zeros({0, 2, 4, 4}), {2}).sizes(), (Shape{0, 2, 2, 2}));
  EXPECT_EQ(avg_pool2d(zeros({0, 2, 4, 4}), {2}).sizes(), (Shape{0, 2, 2, 2}));
  Tensor x = randn({2, 4, 5, 3}).permute({0, 3, 1, 2});
  ASSERT_FALSE(x.is_contiguous());
  testing::expect_close(max_pool2d(x, {2}), max_pool2d(x.contiguous(), {2}));
  testing::expect_close(avg_pool2d(x, {3}, {1}, {1}), avg_pool2d(x.contiguous(), {3}, {1}, {1}));
}

TEST(Pooling, ClearErrors) {
  EXPECT_THROW_MSG(max_pool2d(zeros({4, 4}), {2}), "[max_pool2d] input of shape [4, 4] has the wrong rank");
  EXPECT_THROW_MSG(max_pool2d(zeros({1, 1, 2, 2}), {3}), "is too small for kernel");
  EXPECT_THROW_MSG(avg_pool2d(zeros({1, 1, 4, 4}), {2}, {1}, {2}), "should be at most half of kernel_size");
  EXPECT_THROW_MSG(max_pool2d(zeros({1, 1, 4, 4}), {2, 2, 2}), "kernel_size must have 1 or 2 elements");
  EXPECT_THROW_MSG(max_pool2d(zeros({1, 1, 4, 4}), {2}, {0}), "stride [0] must be >= 1");
  EXPECT_THROW_MSG(adaptive_avg_pool2d(zeros({1, 1, 4, 4}), {0}), "output_size [0] must be >= 1");
  EXPECT_THROW_MSG(avg_pool2d(zeros({1, 1, 4, 4}, {.dtype = kInt64}), {2}), "[avg_pool2d]");
}

TEST(BatchNorm, TrainingUsesBatchStatisticsAndUpdatesRunningStats) {
  Tensor x = randn({6, 3, 2}, {.dtype = kFloat64});
  Tensor rm = zeros({3}, {.dtype = kFloat64}), rv = ones({3}, {.dtype = kFloat64});
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5);
  const Tensor mu = mean(x, {0, 2}, true), var_b = var(x, {0, 2}, 0, true);
  testing::expect_close(y, (x - mu) / sqrt(var_b + 1e-5), 1e-10, 1e-12);
  testing::expect_close(rm, mu.view({3}) * 0.1, 1e-10, 1e-12);
  testing::expect_close(rv, var(x, {0, 2}, 1) * 0.1 + 0.9, 1e-10, 1e-12);
  // Eval normalizes with the running statistics.
  Tensor w = randn({3}, {.dtype = kFloat64}), b = randn({3}, {.dtype = kFloat64});
  testing::expect_close(batch_norm(x, rm, rv, w, b, false),
                        (x - rm.view({1, 3, 1})) / sqrt(rv.view({1, 3, 1}) + 1e-5) * w.view({1, 3, 1}) + b.view({1, 3, 1}),
                        1e-10, 1e-12);
}

// Training-mode batch_norm is one op with one backward op; the composed formula is
// the reference for its values, gradients and running statistics.
TEST(BatchNorm, FusedOpMatchesTheComposedFormula) {
  Tensor x = randn({5, 3, 4, 2}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor w = randn({3}, {.dtype = kFloat64}).requires_grad_(true), b = randn({3}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor rm = randn({3}, {.dtype = kFloat64}), rv = rand({3}, {.dtype = kFloat64}) + 0.5;
  const Tensor rm0 = rm.clone(), rv0 = rv.clone();
  Tensor g = randn({5, 3, 4, 2}, {.dtype = kFloat64});
  Tensor y = batch_norm(x, rm, rv, w, b, true, 0.3, 1e-3);
  auto [gx, gw, gb] = [&] {
    TensorList r = grad({y}, {x, w, b}, {g});
    return std::make_tuple(r[0], r[1], r[2]);
  }();
  Tensor xr = x.detach().requires_grad_(true), wr = w.detach().requires_grad_(true), br = b.detach().requires_grad_(true);
  const Tensor mu = mean(xr, {0, 2, 3}, true), var_b = var(xr, {0, 2, 3}, 0, true);
  Tensor yr = (xr - mu) / sqrt(var_b + 1e-3) * wr.view({1, 3, 1, 1}) + br.view({1, 3, 1, 1});
  TensorList r = grad({yr}, {xr, wr, br}, {g});
  testing::expect_close(y, yr, 1e-10, 1e-12);
  testing::expect_close(gx, r[0], 1e-9, 1e-11);
  testing::expect_close(gw, r[1], 1e-9, 1e-11);
  testing::expect_close(gb, r[2], 1e-9, 1e-11);
  testing::expect_close(rm, rm0 * 0.7 + mu.detach().view({3}) * 0.3, 1e-10, 1e-12);
  testing::expect_close(rv, rv0 * 0.7 + var(x.detach(), {0, 2, 3}, 1) * 0.3, 1e-10, 1e-12);
  // The tape holds one batch_norm node whose gradient is one batch_norm_backward op.
  EXPECT_EQ(y.grad_fn()->name(), "BatchNormBackward0");
}

TEST(BatchNorm, CompiledGraphsHoldOneForwardOpAndOneBackwardOp) {
  nn::BatchNorm2d bn(3);
  auto f = compile([&bn](const Tensor& x) { return bn(x).sum(); }, {.backend = "aot_eager"});
  Tensor x = randn({4, 3, 2, 2}).requires_grad_(true);
  f(x).backward();
  EXPECT_EQ(f.counters().forward_ops.count("batch_norm"), 1u);
  EXPECT_EQ(f.counters().backward_ops.count("batch_norm_backward"), 1u);
  EXPECT_EQ(f.counters().forward_ops.count("rsqrt"), 0u);
}

TEST(BatchNormCuda, MatchesCpuWithRunningStatisticsAndGradients) {
  TG_REQUIRE_CUDA();
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tol = dtype == kFloat32 ? 1e-4 : 1e-10;
    Tensor x = testing::random_tensor({6, 4, 5, 3}, dtype) * 2 + 0.5;
    Tensor w = testing::random_tensor({4}, dtype), b = testing::random_tensor({4}, dtype);
    Tensor rm = testing::random_tensor({4}, dtype), rv = testing::random_tensor({4}, dtype, false, 0.5, 1.5);
    Tensor g = testing::random_tensor({6, 4, 5, 3}, dtype);
    auto run = [&](Device d) {  // on copies: to() of a tensor already on `d` returns the tensor itself
      Tensor xd = x.clone().to(d).requires_grad_(true), wd = w.clone().to(d).requires_grad_(true);
      Tensor bd = b.clone().to(d).requires_grad_(true);
      Tensor rmd = rm.clone().to(d), rvd = rv.clone().to(d);
      Tensor y = batch_norm(xd, rmd, rvd, wd, bd, true, 0.2, 1e-5);
      TensorList gr = grad({y}, {xd, wd, bd}, {g.to(d)});
      return TensorList{y.detach().cpu(), rmd.cpu(), rvd.cpu(), gr[0].cpu(), gr[1].cpu(), gr[2].cpu()};
    };
    const TensorList c = run(kCPU), u = run(cuda_device(0));
    for (size_t i = 0; i < c.size(); ++i) {
      SCOPED_TRACE("output " + std::to_string(i) + " " + std::string(dtype_name(dtype)));
      testing::expect_close(u[i], c[i], tol, tol);
    }
  }
}

// A nearly constant channel (invstd ~ 1e2): the saved statistics of a 16-bit input stay float32 (a
// bfloat16 mean swamped x - mean, PyTorch-oracle seed 529) and the input gradient subtracts before
// it scales, so float32 and bfloat16 keep their precision against a float64 truth on every device.
TEST(BatchNorm, NearlyConstantChannelGradientKeepsItsPrecision) {
  // 1 + k/128 for k in {0, 1, 2}: three neighbouring bfloat16 values, whose mean bfloat16 cannot hold.
  Tensor x64 = add(div(randint(0, 3, {5, 2, 3}).to(kFloat64), 128.0), 1.0);
  Tensor g64 = testing::random_tensor({5, 2, 3}, kFloat64);
  std::vector<Device> devices{kCPU};
  if (cuda_is_available()) devices.push_back(cuda_device(0));
  for (Device d : devices)
    for (DType dt : {kFloat32, kBFloat16}) {
      Tensor x = x64.to(dt).to(d).requires_grad_(true);
      Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
      const Tensor gx = grad({y}, {x}, {g64.to(dt).to(d)})[0].to(kCPU).to(kFloat64);
      // The truth: the same rounded input and gradient in float64 on the CPU.
      Tensor xr = x64.to(dt).to(kFloat64).requires_grad_(true);
      Tensor yr = batch_norm(xr, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
      const Tensor truth = grad({yr}, {xr}, {g64.to(dt).to(kFloat64)})[0];
      const double scale = truth.abs().amax().item<double>();
      const double tol = dt == kFloat32 ? 1e-4 : 1e-2;  // the float32 mean's rounding, or a bfloat16 ulp
      SCOPED_TRACE(d.str() + " " + std::string(dtype_name(dt)));
      testing::expect_close(gx, truth, 0.0, tol * scale);
    }
}

TEST(BatchNorm, ClearErrors) {
  EXPECT_THROW_MSG(batch_norm(zeros({4}), Tensor(), Tensor(), Tensor(), Tensor(), true), "has the wrong rank");
  EXPECT_THROW_MSG(batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                   "expected more than 1 value per channel when training");
  EXPECT_THROW_MSG(batch_norm(zeros({2, 3}), zeros({4}), ones({4}), Tensor(), Tensor(), true),
                   "running_mean of shape [4] does not match [3]");
  EXPECT_THROW_MSG(batch_norm(zeros({2, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false), "eval mode needs");
  EXPECT_THROW_MSG(batch_norm(zeros({2, 3}), Tensor(), Tensor(), zeros({3}, {.dtype = kFloat64}), Tensor(), true),
                   "weight has dtype float64 but input has float32");
  EXPECT_THROW_MSG(batch_norm(zeros({2, 3}, {.dtype = kInt64}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                   "[batch_norm]");
}

TEST(LayerAndGroupNorm, ValuesAndErrors) {
  Tensor x = randn({2, 3, 4}, {.dtype = kFloat64});
  const Tensor c = x - mean(x, {-1}, true);
  testing::expect_close(layer_norm(x, {4}), c / sqrt(var(x, {-1}, 0, true) + 1e-5), 1e-10, 1e-12);
  // group_norm with one channel per group equals instance normalization; one group equals layer_norm over [C, L].
  testing::expect_close(group_norm(x, 1), layer_norm(x, {3, 4}), 1e-10, 1e-12);
  testing::expect_close(group_norm(x, 3), layer_norm(x.unsqueeze(2), {1, 4}).squeeze(2), 1e-10, 1e-12);
  EXPECT_THROW_MSG(layer_norm(x, {3}), "normalized_shape [3] does not match the trailing dims of input [2, 3, 4]");
  EXPECT_THROW_MSG(layer_norm(x, {4}, ones({3}, {.dtype = kFloat64})), "weight of shape [3] does not match [4]");
  EXPECT_THROW_MSG(group_norm(x, 2), "num_groups 2 must be positive and divide the number of channels 3");
}

TEST(NormModules, InitBuffersAndModes) {
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(bn.named_buffers().size(), 3u);
  EXPECT_EQ(bn.named_buffers()[2].first, "num_batches_tracked");
  EXPECT_EQ(bn.parameters().size(), 2u);
  testing::expect_close(bn.weight(), ones({3}));
  Tensor x = randn({4, 3, 2, 2});
  bn(x);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked().item<int64_t>(), 2);
  testing::expect_close(bn.running_mean(), mean(x, {0, 2, 3}) * 0.19, 1e-5, 1e-6);
  bn.eval();
  Tensor y = bn(x);
  EXPECT_EQ(bn.num_batches_tracked().item<int64_t>(), 2);
  testing::expect_close(y, batch_norm(x, bn.running_mean(), bn.running_var(), bn.weight(), bn.bias(), false));
  EXPECT_EQ(bn.to_string(), "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
  nn::BatchNorm1d plain(5, 1e-5, 0.1, false, false);
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_TRUE(plain.buffers().empty());
  plain.eval();  // without running stats, eval still uses batch statistics
  testing::expect_close(mean(plain(randn({8, 5})), {0}), zeros({5}), 1e-5, 1e-5);
  EXPECT_THROW_MSG(nn::BatchNorm2d(3)(randn({4, 3})), "[BatchNorm2d] expected 4-D input");
  EXPECT_THROW_MSG(nn::BatchNorm1d(3)(randn({4, 2})), "expected input with 3 channels");
  nn::LayerNorm ln({4});
  EXPECT_EQ(ln.parameters().size(), 2u);
  EXPECT_EQ(ln.extra_repr(), "(4,), eps=1e-05, elementwise_affine=true");
  nn::GroupNorm gn(2, 4);
  EXPECT_EQ(gn(randn({2, 4, 3})).sizes(), (Shape{2, 4, 3}));
  EXPECT_THROW_MSG(nn::GroupNorm(3, 4), "num_channels 4 must be divisible by num_groups 3");
}

TEST(PoolModules, ForwardAndContainers) {
  nn::Sequential net{std::make_shared<nn::MaxPool2d>(Shape{2}), std::make_shared<nn::AvgPool2d>(Shape{2}),
                     std::make_shared<nn::AdaptiveAvgPool2d>(Shape{1}), std::make_shared<nn::Identity>()};
  EXPECT_EQ(net(randn({2, 3, 8, 8})).sizes(), (Shape{2, 3, 1, 1}));
  nn::ModuleList list{std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::BatchNorm1d>(3)};
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.named_parameters()[2].first, "1.weight");
  EXPECT_EQ(list.named_buffers()[0].first, "1.running_mean");
  EXPECT_EQ(list[1].type_name(), "BatchNorm1d");
  EXPECT_THROW_MSG(list(randn({1, 2})), "[ModuleList] a ModuleList has no forward");
  EXPECT_THROW_MSG(list[2], "index 2 is out of range");
}

// A training step through BatchNorm2d (and pooling) compiled vs eager: outputs, gradients and the
// buffers agree after every call (first call, capture and replays under cudagraphs).
void expect_compiled_batchnorm_matches_eager(const std::string& backend, Device device) {
  manual_seed(5);
  nn::BatchNorm2d eager(3), compiled_bn(3);
  eager.to(device);
  compiled_bn.to(device);
  auto step = compile([&compiled_bn](const Tensor& x) { return (max_pool2d(compiled_bn(x), {2}) * 1.5).sum(); },
                      {.backend = backend});
  for (int i = 0; i < 5; ++i) {
    Tensor x = randn({4, 3, 4, 4}, {.device = device}) * (i + 1) + i;
    Tensor le = (max_pool2d(eager(x), {2}) * 1.5).sum();
    Tensor lc = step(x);
    le.backward();
    lc.backward();
    testing::expect_close(lc.detach(), le.detach(), 1e-4, 1e-4);
    testing::expect_close(compiled_bn.running_mean(), eager.running_mean(), 1e-5, 1e-6);
    testing::expect_close(compiled_bn.running_var(), eager.running_var(), 1e-5, 1e-6);
    EXPECT_EQ(compiled_bn.num_batches_tracked().to(kCPU).item<int64_t>(), i + 1);
    testing::expect_close(compiled_bn.weight().grad(), eager.weight().grad(), 1e-4, 1e-4);
    testing::expect_close(compiled_bn.bias().grad(), eager.bias().grad(), 1e-4, 1e-4);
  }
  EXPECT_EQ(step.counters().compilations, 1);
}

TEST(CompiledBatchNorm, BuffersMatchEagerAotEager) { expect_compiled_batchnorm_matches_eager("aot_eager", kCPU); }

TEST(CompiledBatchNorm, BuffersMatchEagerCudagraphs) {
  TG_REQUIRE_CUDA();
  expect_compiled_batchnorm_matches_eager("cudagraphs", Device{DeviceType::CUDA, 0});
}

// A residual conv-BN network trained for 20 SGD steps (momentum) eagerly and with forward, backward
// and update as CUDA graphs, from the same seed: the running statistics (and the parameters) agree.
TEST(CompiledBatchNorm, ConvNetBuffersMatchEagerAfter20SgdSteps) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  auto make = [&] {
    manual_seed(3);
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<nn::Conv2d>(3, 8, Shape{3}, Shape{1}, ConvPadding(1), Shape{1}, 1, false));
    m->push_back(std::make_shared<nn::BatchNorm2d>(8));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::Conv2d>(8, 8, Shape{3}, Shape{2}, ConvPadding(1), Shape{1}, 1, false));
    m->push_back(std::make_shared<nn::BatchNorm2d>(8));
    m->push_back(std::make_shared<nn::AdaptiveAvgPool2d>(Shape{1}));
    m->push_back(std::make_shared<nn::Flatten>());
    m->push_back(std::make_shared<nn::Linear>(8, 4));
    m->to(dev);
    return m;
  };
  auto eager = make(), graphed = make();
  manual_seed(4);
  Tensor x = randn({16, 3, 8, 8}, {.device = dev}), y = randint(0, 4, {16}, {.device = dev});
  optim::SGD eager_sgd(eager->parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD graphed_sgd(graphed->parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::CompiledStep graphed_step(graphed_sgd);
  auto loss = compile([m = graphed](const Tensor& a, const Tensor& b) { return cross_entropy((*m)(a), b); },
                      {.backend = "cudagraphs"});
  for (int i = 0; i < 20; ++i) {
    eager_sgd.zero_grad();
    cross_entropy((*eager)(x), y).backward();
    eager_sgd.step();
    Tensor l = loss(x, y);
    graphed_sgd.zero_grad();
    l.backward();
    graphed_step.step();
  }
  EXPECT_GE(loss.counters().replays, 18);
  const auto eb = eager->named_buffers(), gb = graphed->named_buffers();
  ASSERT_EQ(eb.size(), gb.size());
  for (size_t i = 0; i < eb.size(); ++i) {
    SCOPED_TRACE(eb[i].first);
    testing::expect_close(gb[i].second, eb[i].second, 1e-4, 1e-5);
  }
  const auto ep = eager->named_parameters(), gp = graphed->named_parameters();
  for (size_t i = 0; i < ep.size(); ++i) testing::expect_close(gp[i].second, ep[i].second, 1e-4, 1e-5);
  EXPECT_EQ(gb[2].second.to(kCPU).item<int64_t>(), 20);  // num_batches_tracked of the first BatchNorm2d
}

TEST(CompiledBatchNorm, EvalSwitchRecompilesAndLeavesBuffersAlone) {
  nn::BatchNorm2d bn(2);
  auto f = compile([&bn](const Tensor& x) { return bn(x); }, {.backend = "aot_eager"});
  Tensor x = randn({3, 2, 2, 2});
  f(x);
  const Tensor rm = bn.running_mean().clone();
  bn.eval();
  testing::expect_close(f(x), batch_norm(x, bn.running_mean(), bn.running_var(), bn.weight(), bn.bias(), false), 1e-5,
                        1e-6);
  testing::expect_close(bn.running_mean(), rm);
  EXPECT_EQ(bn.num_batches_tracked().item<int64_t>(), 1);
  EXPECT_EQ(f.counters().compilations, 2);
}

TEST(NormPoolCuda, MatchesCpuForwardAndBackward) {
  TG_REQUIRE_CUDA();
  Tensor x = testing::random_tensor({3, 4, 9, 7}, kFloat32);
  auto check = [&](testing::TensorFn fn) { testing::expect_cuda_matches_cpu(fn, {x}, 1e-4, 1e-5); };
  check([](const TensorList& a) { return max_pool2d(a[0], {3}, {2}, {1}, {1}, true); });
  check([](const TensorList& a) { return max_pool2d_with_indices(a[0], {2, 3}, {1, 2}, {1}, {2}).second; });
  check([](const TensorList& a) { return avg_pool2d(a[0], {3}, {2}, {1}, true, false); });
  check([](const TensorList& a) { return adaptive_avg_pool2d(a[0], {4, 3}); });
  check([](const TensorList& a) { return group_norm(a[0], 2); });
  check([](const TensorList& a) { return layer_norm(a[0], {9, 7}); });
  check([](const TensorList& a) { return batch_norm(a[0], Tensor(), Tensor(), Tensor(), Tensor(), true); });
  // Gradients through the dedicated backward ops, on both devices.
  auto grads = [&](Device d) {
    Tensor xd = x.to(d).detach().requires_grad_(true);
    Tensor y = max_pool2d(xd, {3}, {2}, {1}).sum() + (avg_pool2d(xd, {2}, {1}) * 2).sum() +
               (adaptive_avg_pool2d(xd, {2, 5}) * 3).sum();
    y.backward();
    return xd.grad().to(kCPU);
  };
  testing::expect_close(grads(Device{DeviceType::CUDA, 0}), grads(kCPU), 1e-4, 1e-5);
}

}  // namespace
}  // namespace tg
