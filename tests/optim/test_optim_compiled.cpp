// Compiled optimizer steps: the traced update(grads) matches the eager optimizer step for step, on
// the CPU (aot_eager) and, with a GPU, as one replayed CUDA graph (cudagraphs).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "nn/nn.h"
#include "optim/optim.h"
#include "support/test_support.h"

namespace tg::optim {
namespace {

// Two copies of the same parameters with the same gradient sequence, stepped eagerly and compiled.
template <typename Opt, typename Options>
void expect_compiled_matches_eager(Options options, CompileOptions compile, Device device, int steps = 5) {
  manual_seed(3);
  TensorList a, b;
  for (const Shape& s : {Shape{4, 3}, Shape{3}}) {
    Tensor p = randn(s, {.device = device});
    a.push_back(p.clone().requires_grad_(true));
    b.push_back(p.clone().requires_grad_(true));
  }
  Opt eager(a, options), compiled_opt(b, options);
  eager.set_capturable(true);
  CompiledStep compiled(compiled_opt, compile);
  for (int i = 0; i < steps; ++i) {
    for (size_t k = 0; k < a.size(); ++k) {
      Tensor g = randn(a[k].sizes(), {.device = device});
      a[k].set_grad(g.clone());
      b[k].set_grad(g.clone());
    }
    eager.step();
    compiled.step();
    for (size_t k = 0; k < a.size(); ++k) testing::expect_close(b[k].detach(), a[k].detach(), 1e-5, 1e-6);
  }
  EXPECT_EQ(compiled.counters().compilations, 1);
}

TEST(CompiledStep, SgdMatchesEager) {
  expect_compiled_matches_eager<SGD>(SGDOptions{.lr = 0.1}, {.backend = "aot_eager"}, kCPU);
  expect_compiled_matches_eager<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01},
                                     {.backend = "aot_eager"}, kCPU);
}

TEST(CompiledStep, AdamAndAdamWMatchEager) {
  expect_compiled_matches_eager<Adam>(AdamOptions{.lr = 0.01}, {.backend = "aot_eager"}, kCPU);
  expect_compiled_matches_eager<AdamW>(AdamOptions{.lr = 0.01, .weight_decay = 0.1}, {.backend = "aot_eager"}, kCPU);
}

TEST(CompiledStep, CapturableAdamMatchesHostCountedAdam) {
  Tensor p1 = randn({5}).requires_grad_(true);
  Tensor p2 = p1.detach().clone().requires_grad_(true);
  Adam host({p1}, {.lr = 0.05}), device({p2}, {.lr = 0.05});
  device.set_capturable(true);
  for (int i = 0; i < 4; ++i) {
    Tensor g = randn({5});
    p1.set_grad(g.clone());
    p2.set_grad(g.clone());
    host.step();
    device.step();
  }
  testing::expect_close(p2.detach(), p1.detach(), 1e-5, 1e-6);
}

// Three compiled steps of `Opt` over a weight and a bias; checks the weight kept its memory and
// returns the ops of the compiled update.
template <typename Opt, typename Options>
std::map<std::string, int> ops_of_three_compiled_steps(Options options) {
  Tensor w = randn({8, 8}).requires_grad_(true), b = randn({8}).requires_grad_(true);
  Opt opt({w, b}, options);
  CompiledStep step(opt, {.backend = "aot_eager"});
  const void* w_data = w.raw_data();
  for (int i = 0; i < 3; ++i) {
    w.set_grad(ones({8, 8}));
    b.set_grad(ones({8}));
    step.step();
  }
  EXPECT_EQ(w.raw_data(), w_data);
  return step.counters().forward_ops;
}

// The fused SGD (capturable) follows the unfused update step for step, momentum and Nesterov included.
TEST(CompiledStep, FusedSgdMatchesTheUnfusedUpdate) {
  for (bool nesterov : {false, true}) {
    Tensor p1 = randn({5, 2}, {.dtype = kFloat64}).requires_grad_(true);
    Tensor p2 = p1.detach().clone().requires_grad_(true);
    const SGDOptions o{.lr = 0.05, .momentum = 0.9, .dampening = nesterov ? 0.0 : 0.1, .nesterov = nesterov,
                       .weight_decay = 0.01};
    SGD plain({p1}, o), fused({p2}, o);
    fused.set_capturable(true);
    for (int i = 0; i < 4; ++i) {
      Tensor g = randn({5, 2}, {.dtype = kFloat64});
      p1.set_grad(g.clone());
      p2.set_grad(g.clone());
      plain.step();
      fused.step();
    }
    testing::expect_close(p2.detach(), p1.detach(), 1e-12, 1e-12);
  }
}

TEST(CompiledStep, ParametersAreUpdatedInPlaceWithoutASecondBuffer) {
  const auto ops = ops_of_three_compiled_steps<SGD>(SGDOptions{.lr = 0.1});
  EXPECT_EQ(ops.count("add"), 0u) << "functional copies of the parameters remain";
  EXPECT_EQ(ops.at("sgd_step_"), 1);  // one fused update for both parameters
  EXPECT_EQ(ops.count("sgd_step"), 0u) << "the functional form was not turned back into the in-place op";
  EXPECT_EQ(ops.count("copy_back_"), 0u);
}

// The fused Adam writes parameters and moments in one node; the compiled graph runs it in place
// (no functional copies, no write-backs).
TEST(CompiledStep, AdamIsOneFusedNodeRunInPlace) {
  const auto ops = ops_of_three_compiled_steps<Adam>(AdamOptions{.lr = 0.1});
  EXPECT_EQ(ops.at("adam_step_"), 1);
  EXPECT_EQ(ops.count("adam_step"), 0u) << "the functional form was not turned back into the in-place op";
  EXPECT_EQ(ops.count("copy_back_"), 0u);
}

// The learning rate lives on the device: a new one is read by the same trace, not re-traced.
TEST(CompiledStep, LearningRateChangeTakesEffectWithoutARetrace) {
  Tensor p = randn({3}).requires_grad_(true);
  SGD sgd({p}, {.lr = 0.1});
  CompiledStep step(sgd, {.backend = "aot_eager"});
  for (int i = 0; i < 3; ++i) {
    p.set_grad(ones({3}));
    step.step();
  }
  const int traces = step.counters().compilations;
  EXPECT_EQ(traces, 1);
  sgd.set_lr(0.5);
  Tensor before = p.detach().clone();
  p.set_grad(ones({3}));
  step.step();
  testing::expect_close(p.detach(), before - 0.5);
  EXPECT_EQ(step.counters().compilations, traces);
}

TEST(CompiledStep, CudaGraphSgdAndAdam) {
  TG_REQUIRE_CUDA();
  expect_compiled_matches_eager<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9}, {.backend = "cudagraphs"}, cuda_device(), 6);
  expect_compiled_matches_eager<Adam>(AdamOptions{.lr = 0.01}, {.backend = "cudagraphs"}, cuda_device(), 6);
}

TEST(CompiledStep, CudaGraphUpdateIsOneReplayPerStep) {
  TG_REQUIRE_CUDA();
  Tensor p = randn({64}, {.device = cuda_device()}).requires_grad_(true);
  Adam adam({p}, {.lr = 0.01});
  CompiledStep step(adam);
  for (int i = 0; i < 6; ++i) {
    p.set_grad(randn({64}, {.device = cuda_device()}));
    step.step();
  }
  EXPECT_EQ(step.counters().graphs_captured, 1);
  EXPECT_EQ(step.counters().eager_nodes, 0);
  EXPECT_EQ(step.counters().replays, 4);  // step 1 eager, 2 traced + warm-up, 3 recorded + replayed, then replays
}

}  // namespace
}  // namespace tg::optim
