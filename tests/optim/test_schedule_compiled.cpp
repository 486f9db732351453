// A learning-rate schedule on a compiled step: 1,000 steps of AdamW under SequentialLR (a linear
// warm-up, then cosine annealing), with gradient clipping inside the compiled update, trace once
// (and record one CUDA graph with a GPU) and end with the parameters of the same eager loop.
#include <gtest/gtest.h>

#include <memory>

#include "nn/nn.h"
#include "optim/optim.h"
#include "support/test_support.h"

namespace tg::optim {
namespace {

constexpr int kSteps = 1000;
constexpr int kWarmup = 100;

// The schedule of the acceptance criterion on `opt`: warm-up from 1% over kWarmup steps, then
// cosine down to 1e-5 over the rest.
std::unique_ptr<SequentialLR> warmup_cosine(Optimizer& opt) {
  return std::make_unique<SequentialLR>(
      opt,
      std::vector<std::shared_ptr<LRScheduler>>{std::make_shared<LinearLR>(opt, 0.01, 1.0, kWarmup),
                                                std::make_shared<CosineAnnealingLR>(opt, kSteps - kWarmup, 1e-5)},
      std::vector<int64_t>{kWarmup});
}

// Trains two copies of a small float64 model for kSteps: eagerly (AdamW on the host learning rate,
// clip_grad_norm_ before each step) and with a CompiledStep (clipping inside the compiled update);
// checks the parameters agree and returns the compiled step's counters.
graphs::CompileCounters train(CompileOptions compile, Device device) {
  manual_seed(7);
  nn::Sequential eager_model{std::make_shared<nn::Linear>(5, 8), std::make_shared<nn::Tanh>(),
                             std::make_shared<nn::Linear>(8, 2)};
  nn::Sequential compiled_model{std::make_shared<nn::Linear>(5, 8), std::make_shared<nn::Tanh>(),
                                std::make_shared<nn::Linear>(8, 2)};
  for (nn::Sequential* m : {&eager_model, &compiled_model}) {
    m->to(kFloat64);
    m->to(device);
  }
  compiled_model.load_state_dict(eager_model.state_dict());
  const AdamOptions o{.lr = 3e-3, .weight_decay = 0.01};
  AdamW eager_opt(eager_model.parameters(), o), compiled_opt(compiled_model.parameters(), o);
  auto eager_sched = warmup_cosine(eager_opt);
  auto compiled_sched = warmup_cosine(compiled_opt);
  CompiledStep step(compiled_opt, compile);
  step.set_grad_transform([](const TensorList& grads) { nn::utils::clip_norm_(grads, 0.5); });
  const Tensor x = randn({16, 5}, {.dtype = kFloat64}).to(device);
  const Tensor y = randn({16, 2}, {.dtype = kFloat64}).to(device);
  for (int i = 0; i < kSteps; ++i) {
    eager_opt.zero_grad();
    compiled_opt.zero_grad();
    mse_loss(eager_model(x), y).backward();
    mse_loss(compiled_model(x), y).backward();
    nn::utils::clip_grad_norm_(eager_model.parameters(), 0.5);
    eager_opt.step();
    step.step();
    eager_sched->step();
    compiled_sched->step();
    EXPECT_EQ(compiled_opt.lr(), eager_opt.lr());
  }
  // The schedule ended where PyTorch's does: the cosine's last value before eta_min.
  EXPECT_NEAR(compiled_opt.lr(), 1e-5, 1e-9);
  const TensorList a = eager_model.parameters(), b = compiled_model.parameters();
  for (size_t k = 0; k < a.size(); ++k)
    testing::expect_close(b[k].detach().to(kCPU), a[k].detach().to(kCPU), 1e-9, 1e-11);
  return step.counters();
}

TEST(ScheduledCompiledStep, ThousandStepWarmupCosineTracesOnce) {
  const graphs::CompileCounters c = train({.backend = "aot_eager"}, kCPU);
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.recompiles, 0) << (c.recompile_reasons.empty() ? "" : c.recompile_reasons[0]);
  EXPECT_EQ(c.eager_fallbacks, 0);
  EXPECT_EQ(c.compiled_calls, kSteps - 1);  // the first step runs eagerly to create the state
}

TEST(ScheduledCompiledStepCuda, ThousandStepWarmupCosineRecordsOneGraph) {
  TG_REQUIRE_CUDA();
  const graphs::CompileCounters c = train({.backend = "cudagraphs"}, cuda_device());
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.recompiles, 0);
  EXPECT_EQ(c.graphs_captured, 1);
  EXPECT_EQ(c.rerecords, 0);
  EXPECT_EQ(c.eager_nodes, 0);
}

}  // namespace
}  // namespace tg::optim
