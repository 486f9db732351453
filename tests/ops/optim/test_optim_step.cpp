// The fused optimizer ops adam_step_ and sgd_step_: agreement with Adam's unfused formula, its errors, CPU against
// CUDA (16-bit floats and more parameters than one launch takes included), one launch for every
// parameter inside a CUDA graph, and tracing (an op writing several inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "graphs/cudagraphs/graph_recorder.h"
#include "graphs/testing/parity.h"
#include "ops/optim/optim_step.h"
#include "optim/optim.h"
#include "support/test_support.h"

namespace tg {
namespace {

// n parameters of assorted sizes (a zero-element one included) with their state, on `device`.
struct AdamState {
  TensorList params, grads, exp_avgs, exp_avg_sqs, steps;
};

AdamState make_state(int n, DType dtype, Device device) {
  AdamState s;
  for (int i = 0; i < n; ++i) {
    const Shape shape = i == 1 ? Shape{0, 3} : Shape{i % 5 + 1, 2 * i + 1};
    s.params.push_back(randn(shape, {.dtype = dtype}).to(device));
    s.grads.push_back(randn(shape, {.dtype = dtype}).to(device));
    s.exp_avgs.push_back(randn(shape, {.dtype = dtype}).mul_(0.1).to(device));
    s.exp_avg_sqs.push_back(rand(shape, {.dtype = dtype}).mul_(0.1).to(device));
    s.steps.push_back(full({}, static_cast<double>(i % 3), {.dtype = kFloat32, .device = device}));
  }
  return s;
}

// A copy of every tensor of `s` on `device`.
AdamState copy_state(const AdamState& s, Device device) {
  AdamState c;
  for (auto [from, to] : {std::pair{&s.params, &c.params}, {&s.grads, &c.grads}, {&s.exp_avgs, &c.exp_avgs},
                          {&s.exp_avg_sqs, &c.exp_avg_sqs}, {&s.steps, &c.steps}})
    for (const Tensor& t : *from) to->push_back(t.to(device).clone());
  return c;
}

void step(AdamState& s, const AdamStepOptions& o) {
  NoGradGuard no_grad;
  adam_step_(s.params, s.grads, s.exp_avgs, s.exp_avg_sqs, s.steps, o);
}

TEST(AdamStep, MatchesTheUnfusedFormulaForAdamAndAdamW) {
  for (bool decoupled : {false, true}) {
    manual_seed(1);
    AdamState s = make_state(4, kFloat64, kCPU);
    const AdamStepOptions o{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1,
                            .decoupled = decoupled};
    std::vector<Tensor> expected;
    for (size_t i = 0; i < s.params.size(); ++i) {
      const double t = s.steps[i].item<double>() + 1;
      Tensor p = s.params[i].clone(), g = s.grads[i];
      if (decoupled) p = p * (1 - o.lr * o.weight_decay);
      else g = g + p * o.weight_decay;
      const Tensor m = s.exp_avgs[i] * o.beta1 + g * (1 - o.beta1);
      const Tensor v = s.exp_avg_sqs[i] * o.beta2 + g * g * (1 - o.beta2);
      const double bias1 = 1 - std::pow(o.beta1, t), bias2_sqrt = std::sqrt(1 - std::pow(o.beta2, t));
      expected.push_back(p - m / (sqrt(v) / bias2_sqrt + o.eps) * (o.lr / bias1));
    }
    const TensorList steps_before = {s.steps[0].clone(), s.steps[2].clone()};
    step(s, o);
    for (size_t i = 0; i < s.params.size(); ++i) testing::expect_close(s.params[i], expected[i], 1e-12, 1e-12);
    EXPECT_EQ(s.steps[0].item<double>(), steps_before[0].item<double>() + 1);
    EXPECT_EQ(s.steps[2].item<double>(), steps_before[1].item<double>() + 1);
  }
}

TEST(AdamStep, RejectsMismatchedListsShapesAndDtypes) {
  AdamState s = make_state(2, kFloat32, kCPU);
  NoGradGuard no_grad;
  EXPECT_THROW_MSG(adam_step_(s.params, {s.grads[0]}, s.exp_avgs, s.exp_avg_sqs, s.steps, {}),
                   "expected 2 grads, exp_avgs, exp_avg_sqs and steps");
  EXPECT_THROW_MSG(adam_step_(s.params, {s.grads[1], s.grads[0]}, s.exp_avgs, s.exp_avg_sqs, s.steps, {}),
                   "grad 0 has shape [0, 3], expected the shape of parameter 0 [1, 1]");
  TensorList wrong_dtype = s.exp_avgs;
  wrong_dtype[1] = wrong_dtype[1].to(kFloat64);
  EXPECT_THROW_MSG(adam_step_(s.params, s.grads, wrong_dtype, s.exp_avg_sqs, s.steps, {}),
                   "tensors of parameter 1 are float64 on cpu, expected float32 on cpu");
  TensorList double_steps = s.steps;
  double_steps[0] = double_steps[0].to(kFloat64);
  EXPECT_THROW_MSG(adam_step_(s.params, s.grads, s.exp_avgs, s.exp_avg_sqs, double_steps, {}),
                   "step 0 must be one float32 count, got float64 of shape []");
  TensorList shared = s.exp_avg_sqs;
  shared[0] = s.exp_avgs[0];
  EXPECT_THROW_MSG(adam_step_(s.params, s.grads, s.exp_avgs, shared, s.steps, {}), "shares memory");
  EXPECT_THROW_MSG(adam_step_({}, {}, {}, {}, {}, {}), "at least one parameter");
}

TEST(AdamStep, WritingATensorThatRequiresGradNeedsNoGrad) {
  AdamState s = make_state(1, kFloat32, kCPU);
  s.params[0].requires_grad_(true);
  EXPECT_THROW_MSG(adam_step_(s.params, s.grads, s.exp_avgs, s.exp_avg_sqs, s.steps, {}),
                   "requires grad and would be written in place");
}

// A compiled function that runs the fused step on its arguments writes them back as eager does.
TEST(AdamStep, TracedStepWritesEveryTargetBack) {
  manual_seed(2);
  auto fn = [](const TensorList& in) {
    NoGradGuard no_grad;
    const size_t n = in.size() / 5;
    auto part = [&](size_t k) { return TensorList(in.begin() + k * n, in.begin() + (k + 1) * n); };
    adam_step_(part(0), part(1), part(2), part(3), part(4), {.lr = 0.1, .weight_decay = 0.01});
    return TensorList{in[0] * 2};
  };
  AdamState s = make_state(3, kFloat32, kCPU);
  TensorList args;
  for (const TensorList* l : {&s.params, &s.grads, &s.exp_avgs, &s.exp_avg_sqs, &s.steps})
    args.insert(args.end(), l->begin(), l->end());
  testing::expect_compiled_matches_eager(fn, args, {.compile = {.backend = "aot_eager"}, .calls = 3});
}

TEST(SgdStep, MatchesTheUnfusedFormulaWithAndWithoutMomentum) {
  for (double momentum : {0.0, 0.9}) {
    manual_seed(5);
    AdamState s = make_state(3, kFloat64, kCPU);  // exp_avgs serve as the momentum buffers
    const SgdStepOptions o{.lr = 0.1, .momentum = momentum, .dampening = 0.2, .weight_decay = 0.05};
    std::vector<Tensor> expected, expected_buf;
    for (size_t i = 0; i < s.params.size(); ++i) {
      Tensor d = s.grads[i] + s.params[i] * o.weight_decay;
      if (momentum != 0.0) {
        expected_buf.push_back(s.exp_avgs[i] * momentum + d * (1 - o.dampening));
        d = expected_buf.back();
      }
      expected.push_back(s.params[i] - d * o.lr);
    }
    {
      NoGradGuard no_grad;
      sgd_step_(s.params, s.grads, momentum != 0.0 ? s.exp_avgs : TensorList{}, o);
    }
    for (size_t i = 0; i < s.params.size(); ++i) {
      testing::expect_close(s.params[i], expected[i], 1e-12, 1e-12);
      if (momentum != 0.0) testing::expect_close(s.exp_avgs[i], expected_buf[i], 1e-12, 1e-12);
    }
  }
  AdamState s = make_state(2, kFloat32, kCPU);
  NoGradGuard no_grad;
  EXPECT_THROW_MSG(sgd_step_(s.params, s.grads, {}, {.momentum = 0.9}), "expected 2 grads and 2 momentum buffers");
}

TEST(SgdStepCuda, MatchesCpuInOneLaunch) {
  TG_REQUIRE_CUDA();
  manual_seed(6);
  AdamState cpu = make_state(40, kFloat32, kCPU);  // the momentum buffers are the exp_avgs
  AdamState gpu = copy_state(cpu, cuda_device());
  const SgdStepOptions o{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  NoGradGuard no_grad;
  for (int k = 0; k < 3; ++k) {
    sgd_step_(cpu.params, cpu.grads, cpu.exp_avgs, o);
    sgd_step_(gpu.params, gpu.grads, gpu.exp_avgs, o);
  }
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    testing::expect_close(gpu.params[i].to(kCPU), cpu.params[i], 1e-5, 1e-5);
    testing::expect_close(gpu.exp_avgs[i].to(kCPU), cpu.exp_avgs[i], 1e-5, 1e-5);
  }
}

TEST(AdamStepCuda, MatchesCpuOverSeveralLaunches) {
  TG_REQUIRE_CUDA();
  for (DType dtype : {kFloat32, kFloat64}) {
    manual_seed(4);
    AdamState cpu = make_state(400, dtype, kCPU);  // more parameters than one launch takes
    AdamState gpu = copy_state(cpu, cuda_device());
    const AdamStepOptions o{.lr = 0.01, .weight_decay = 0.05, .decoupled = true};
    for (int k = 0; k < 3; ++k) {
      step(cpu, o);
      step(gpu, o);
    }
    const double tol = dtype == kFloat32 ? 1e-5 : 1e-12;
    for (size_t i = 0; i < cpu.params.size(); ++i) {
      testing::expect_close(gpu.params[i].to(kCPU), cpu.params[i], tol, tol);
      testing::expect_close(gpu.exp_avg_sqs[i].to(kCPU), cpu.exp_avg_sqs[i], tol, tol);
      testing::expect_close(gpu.steps[i].to(kCPU), cpu.steps[i], 0, 0);
    }
  }
}

// 16-bit parameters and state are computed in float32 by the CUDA kernels and rounded once, as the
// CPU's widened step does.
TEST(OptimStepCuda, SixteenBitFloatsMatchCpu) {
  TG_REQUIRE_CUDA();
  for (DType dtype : {kBFloat16, kFloat16}) {
    manual_seed(8);
    AdamState cpu = make_state(20, dtype, kCPU);
    AdamState gpu = copy_state(cpu, cuda_device());
    const AdamStepOptions adam{.lr = 0.01, .weight_decay = 0.05};
    const SgdStepOptions sgd{.lr = 0.1, .momentum = 0.9};
    NoGradGuard no_grad;
    for (AdamState* s : {&cpu, &gpu}) {
      step(*s, adam);
      sgd_step_(s->params, s->grads, s->exp_avgs, sgd);
    }
    const double tol = dtype == kBFloat16 ? 1e-2 : 1e-3;
    for (size_t i = 0; i < cpu.params.size(); ++i) {
      EXPECT_EQ(gpu.params[i].dtype(), dtype);
      testing::expect_close(gpu.params[i].to(kCPU), cpu.params[i], tol, tol);
      testing::expect_close(gpu.exp_avgs[i].to(kCPU), cpu.exp_avgs[i], tol, tol);
      testing::expect_close(gpu.steps[i].to(kCPU), cpu.steps[i], 0, 0);
    }
  }
}

// Records `fn` into a CUDA graph, replays it once and returns the kernels one replay launches.
int64_t replayed_kernels(const std::function<void()>& fn) {
  auto [graph, outputs] = graphs::cuda_graph_recorder(cuda_device())->record([&] {
    fn();
    return TensorList{};
  });
  graph->replay();
  return graph->kernels();
}

// A captured fused step launches one kernel for all of its parameters (Adam one more, that advances
// the step counts), one per kLargeTable (384) parameters beyond, and replays the eager update.
TEST(OptimStepCuda, OneLaunchUpdatesEveryParameter) {
  TG_REQUIRE_CUDA();
  NoGradGuard no_grad;
  for (auto [n, launches] : {std::pair{1, 1}, {6, 1}, {300, 1}, {400, 2}}) {
    manual_seed(9);
    AdamState eager = make_state(n, kFloat32, cuda_device());
    AdamState captured = copy_state(eager, cuda_device());
    const SgdStepOptions sgd{.lr = 0.1, .momentum = 0.9};
    const AdamStepOptions adam{.lr = 0.01};
    sgd_step_(eager.params, eager.grads, eager.exp_avgs, sgd);
    step(eager, adam);
    EXPECT_EQ(replayed_kernels([&] { sgd_step_(captured.params, captured.grads, captured.exp_avgs, sgd); }), launches)
        << n << " parameters";
    EXPECT_EQ(replayed_kernels([&] { step(captured, adam); }), 2 * launches) << n << " parameters";
    for (size_t i = 0; i < eager.params.size(); ++i) {
      testing::expect_close(captured.params[i].to(kCPU), eager.params[i].to(kCPU), 0, 0);
      testing::expect_close(captured.steps[i].to(kCPU), eager.steps[i].to(kCPU), 0, 0);
    }
  }
}

}  // namespace
}  // namespace tg
