// GradScaler: scaled losses, unscaled gradients, skipped updates decided on the device, the scale's
// back-off and growth, and a scaled float16 step against an unscaled float32 one.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/test_support.h"

namespace tg {
namespace {

using optim::GradScaler;
using optim::GradScalerOptions;
using testing::expect_close;

// A parameter with a gradient set by hand, and SGD (fused when capturable) over it.
struct OneParam {
  Tensor p = full({4}, 1.0, {.requires_grad = true});
  optim::SGD sgd{{p}, {.lr = 0.1, .momentum = 0.9}};
  explicit OneParam(bool capturable) { sgd.set_capturable(capturable); }
  void set_grad(std::vector<float> g) {
    p.set_grad(tensor<float>({g[0], g[1], g[2], g[3]}));
  }
};

TEST(GradScaler, ScalesUnscalesAndStepsLikeUnscaledSgd) {
  for (bool capturable : {false, true}) {
    OneParam scaled(capturable), plain(capturable);
    GradScaler scaler(kCPU, {.init_scale = 1024.0});
    EXPECT_EQ(scaler.scale(full({}, 2.0)).item<float>(), 2048.0f);
    for (int step = 0; step < 3; ++step) {
      scaled.set_grad({1024.f, -2048.f, 512.f, 0.f});
      plain.set_grad({1.f, -2.f, 0.5f, 0.f});
      scaler.step(scaled.sgd);
      scaler.update();
      plain.sgd.step();
      expect_close(scaled.p.detach(), plain.p.detach(), 1e-6, 1e-7);
    }
    EXPECT_EQ(scaler.get_scale().item<float>(), 1024.0f);
  }
}

TEST(GradScaler, InfOrNanSkipsTheUpdateAndBacksOff) {
  for (bool capturable : {false, true}) {
    for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      OneParam m(capturable);
      GradScaler scaler(kCPU, {.init_scale = 8.0});
      m.set_grad({8.f, 8.f, 8.f, 8.f});
      scaler.step(m.sgd);  // first step: makes the momentum buffers
      scaler.update();
      const Tensor before = m.p.detach().clone();
      m.set_grad({8.f, bad, 8.f, 8.f});
      scaler.step(m.sgd);
      EXPECT_EQ(scaler.found_inf().item<float>(), 1.0f);
      scaler.update();
      expect_close(m.p.detach(), before, 0, 0);
      EXPECT_EQ(scaler.get_scale().item<float>(), 4.0f);
      EXPECT_EQ(scaler.found_inf().item<float>(), 0.0f);
      EXPECT_FALSE(m.sgd.skip_if().defined());  // the flag is only set during the scaler's step
    }
  }
}

TEST(GradScaler, GrowsAfterTheIntervalOfFiniteSteps) {
  OneParam m(true);
  GradScaler scaler(kCPU, {.init_scale = 4.0, .growth_interval = 3});
  for (int step = 1; step <= 7; ++step) {
    m.set_grad({1.f, 1.f, 1.f, 1.f});
    scaler.step(m.sgd);
    scaler.update();
    EXPECT_EQ(scaler.get_scale().item<float>(), step < 3 ? 4.0f : step < 6 ? 8.0f : 16.0f) << step;
  }
  EXPECT_THROW_MSG(GradScaler(kCPU, {.backoff_factor = 2.0}), "[GradScaler] expected init_scale > 0");
}

TEST(GradScaler, DisabledIsAPlainStep) {
  OneParam m(false), plain(false);
  GradScaler scaler(kCPU, {.enabled = false});
  EXPECT_EQ(scaler.scale(full({}, 3.0)).item<float>(), 3.0f);
  m.set_grad({1.f, 2.f, 3.f, 4.f});
  plain.set_grad({1.f, 2.f, 3.f, 4.f});
  scaler.step(m.sgd);
  scaler.update();
  plain.sgd.step();
  expect_close(m.p.detach(), plain.p.detach(), 0, 0);
}

// float16 forward and backward with a scaled loss, Adam with float32 parameters: the gradients reach
// the update unscaled, and an overflowing scale is backed off until the step goes through.
TEST(GradScaler, ScaledFloat16TrainingOnCuda) {
  TG_REQUIRE_CUDA();
  manual_seed(3);
  nn::Linear layer(16, 4);
  layer.to(cuda_device());
  optim::Adam adam(layer.parameters(), {.lr = 1e-2});
  adam.set_capturable(true);
  GradScaler scaler(cuda_device(), {.init_scale = 1e30});  // overflows float16 at first
  const Tensor x = testing::random_tensor({32, 16}, kFloat32).to(cuda_device());
  const Tensor y = randint(0, 4, {32}).to(cuda_device());
  const Tensor w0 = layer.parameters()[0].detach().clone();
  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < 120; ++step) {
    Tensor loss;
    {
      AutocastGuard amp(cuda_device(), kFloat16);
      loss = cross_entropy(layer.forward(x), y);
    }
    adam.zero_grad();
    scaler.scale(loss).backward();
    scaler.step(adam);
    scaler.update();
    if (step == 0) {
      first_loss = loss.item<float>();
      expect_close(layer.parameters()[0].detach(), w0, 0, 0);  // the inf step changed nothing
    }
    last_loss = loss.item<float>();
  }
  EXPECT_LT(scaler.get_scale().item<float>(), 1e30f);
  EXPECT_LT(last_loss, 0.8f * first_loss);
}

}  // namespace
}  // namespace tg
