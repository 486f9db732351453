// Hyperparameters on the device: momentum, dampening, betas, eps, weight decay and the clip threshold
// change every step of a compiled optimizer step without re-tracing (CPU, aot_eager) or re-recording
// (CUDA graphs), ending where the eager loop ends.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "graphs/cudagraphs/graph_recorder.h"
#include "nn/nn.h"
#include "ops/optim/optim_step.h"
#include "optim/optim.h"
#include "support/test_support.h"
#include "tensor/grad_mode.h"

namespace tg::optim {
namespace {

constexpr int kSteps = 1000;

// Sets every changing hyperparameter of an optimizer for step i.
using Schedule = std::function<void(Optimizer& opt, int i)>;

void sgd_schedule(Optimizer& opt, int i) {
  auto& sgd = dynamic_cast<SGD&>(opt);
  sgd.set_momentum(0.5 + 0.4 * std::sin(0.1 * i));
  sgd.set_dampening(0.1 * (i % 3));
  sgd.set_weight_decay(1e-3 * (1 + i % 5));
}

void nesterov_schedule(Optimizer& opt, int i) {
  auto& sgd = dynamic_cast<SGD&>(opt);
  sgd.set_momentum(0.6 + 0.3 * std::cos(0.07 * i));
  sgd.set_weight_decay(i % 2 == 0 ? 0.0 : 2e-3);
}

void adam_schedule(Optimizer& opt, int i) {
  auto& adam = dynamic_cast<Adam&>(opt);
  const double f = 0.5 + 0.5 * std::sin(0.05 * i);
  adam.set_betas(0.8 + 0.15 * f, 0.99 + 0.009 * (1.0 - f));
  adam.set_eps(i % 4 == 0 ? 1e-8 : 1e-6);
  adam.set_weight_decay(0.01 * (i % 7));
}

// The clip threshold of step i (small enough that clipping engages on most steps).
double max_norm_of_step(int i) { return 0.05 + 0.04 * std::sin(0.03 * i); }

struct Run {
  graphs::CompileCounters counters;
  int clipped_steps = 0;  // steps where the threshold was below the gradients' norm
};

// Trains two copies of a small float64 model for kSteps on fresh batches: eagerly (host hyperparameters,
// clip_grad_norm_ with a number before each step) and with a CompiledStep (the clip inside the
// compiled update, reading a device threshold); `schedule` changes the hyperparameters of both every
// step. Checks the parameters agree and returns the compiled step's counters.
template <typename Opt, typename Options>
Run train(Options options, const Schedule& schedule, CompileOptions compile, Device device) {
  manual_seed(11);
  auto make = [] {
    return nn::Sequential{std::make_shared<nn::Linear>(5, 8), std::make_shared<nn::Tanh>(),
                          std::make_shared<nn::Linear>(8, 2)};
  };
  nn::Sequential eager_model = make(), compiled_model = make();
  for (nn::Sequential* m : {&eager_model, &compiled_model}) {
    m->to(kFloat64);
    m->to(device);
  }
  compiled_model.load_state_dict(eager_model.state_dict());
  Opt eager_opt(eager_model.parameters(), options), compiled_opt(compiled_model.parameters(), options);
  DeviceScalar max_norm("max_norm", max_norm_of_step(0));
  const Tensor threshold = max_norm.on(device);
  CompiledStep step(compiled_opt, compile);
  step.set_grad_transform([threshold](const TensorList& grads) { nn::utils::clip_norm_(grads, threshold); });
  Run run;
  for (int i = 0; i < kSteps; ++i) {
    const Tensor x = randn({16, 5}, {.dtype = kFloat64}).to(device);
    const Tensor y = randn({16, 2}, {.dtype = kFloat64}).to(device);
    schedule(eager_opt, i);
    schedule(compiled_opt, i);
    max_norm.set(max_norm_of_step(i));
    eager_opt.zero_grad();
    compiled_opt.zero_grad();
    mse_loss(eager_model(x), y).backward();
    mse_loss(compiled_model(x), y).backward();
    const Tensor norm = nn::utils::clip_grad_norm_(eager_model.parameters(), max_norm_of_step(i));
    if (norm.to(kCPU).item<double>() > max_norm_of_step(i)) ++run.clipped_steps;
    eager_opt.step();
    step.step();
    if (i % 250 == 0 || i == kSteps - 1) {
      const TensorList a = eager_model.parameters(), b = compiled_model.parameters();
      for (size_t k = 0; k < a.size(); ++k)
        testing::expect_close(b[k].detach().to(kCPU), a[k].detach().to(kCPU), 1e-9, 1e-11);
    }
  }
  run.counters = step.counters();
  return run;
}

void expect_traced_once(const Run& run) {
  const graphs::CompileCounters& c = run.counters;
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.recompiles, 0) << (c.recompile_reasons.empty() ? "" : c.recompile_reasons[0]);
  EXPECT_EQ(c.eager_fallbacks, 0);
  EXPECT_EQ(c.compiled_calls, kSteps - 1);  // the first step runs eagerly to create the state
  EXPECT_GT(run.clipped_steps, kSteps / 2);  // the changing threshold mattered
}

TEST(DeviceHyperparams, CompiledSgdFollowsMomentumDampeningWeightDecayAndClip) {
  expect_traced_once(train<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9}, sgd_schedule, {.backend = "aot_eager"}, kCPU));
}

TEST(DeviceHyperparams, CompiledNesterovSgdFollowsMomentum) {
  expect_traced_once(train<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true}, nesterov_schedule,
                                {.backend = "aot_eager"}, kCPU));
}

TEST(DeviceHyperparams, CompiledAdamFollowsBetasEpsWeightDecayAndClip) {
  expect_traced_once(train<Adam>(AdamOptions{.lr = 1e-2}, adam_schedule, {.backend = "aot_eager"}, kCPU));
}

TEST(DeviceHyperparams, CompiledAdamWFollowsBetasEpsWeightDecayAndClip) {
  expect_traced_once(train<AdamW>(AdamOptions{.lr = 1e-2}, adam_schedule, {.backend = "aot_eager"}, kCPU));
}

void expect_recorded_once(const Run& run) {
  const graphs::CompileCounters& c = run.counters;
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.recompiles, 0) << (c.recompile_reasons.empty() ? "" : c.recompile_reasons[0]);
  EXPECT_EQ(c.graphs_captured, 1);
  EXPECT_EQ(c.rerecords, 0);
  EXPECT_EQ(c.eager_nodes, 0);
}

TEST(DeviceHyperparamsCuda, CompiledSgdRecordsOneGraph) {
  TG_REQUIRE_CUDA();
  expect_recorded_once(
      train<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9}, sgd_schedule, {.backend = "cudagraphs"}, cuda_device()));
}

TEST(DeviceHyperparamsCuda, CompiledAdamAndAdamWRecordOneGraph) {
  TG_REQUIRE_CUDA();
  expect_recorded_once(train<Adam>(AdamOptions{.lr = 1e-2}, adam_schedule, {.backend = "cudagraphs"}, cuda_device()));
  expect_recorded_once(train<AdamW>(AdamOptions{.lr = 1e-2}, adam_schedule, {.backend = "cudagraphs"}, cuda_device()));
}

// Four steps of a 3-element parameter with fixed gradients, the hyperparameters changed before steps
// 2-4 as `change(opt, step)` says; the first step runs eagerly, the other three compiled.
template <typename Opt, typename Options>
Tensor four_compiled_steps(Options options, const std::function<void(Opt&, int)>& change,
                           graphs::CompileCounters* counters) {
  Tensor p = tensor({1.0, -2.0, 0.5}).requires_grad_(true);
  Opt opt({p}, options);
  CompiledStep step(opt, {.backend = "aot_eager"});
  const std::vector<std::vector<double>> grads = {{0.3, -0.1, 0.7}, {-0.5, 0.2, 0.1}, {0.25, 0.4, -0.3}, {0.1, -0.6, 0.2}};
  for (int i = 0; i < 4; ++i) {
    change(opt, i);
    p.set_grad(from_vector(grads[static_cast<size_t>(i)], {3}));
    step.step();
  }
  *counters = step.counters();
  return p.detach();
}

// PyTorch 1.13, float64: p = [1, -2, 0.5], SGD(lr=0.1, momentum=0.9); before steps 2, 3 and 4
// param_groups[0].update(momentum=0.5, dampening=0.2, weight_decay=0.1), then (momentum=0.8,
// dampening=0, weight_decay=0), then (momentum=0.3, dampening=0.5, weight_decay=0.05); gradients as
// above.
TEST(DeviceHyperparams, SgdMatchesPyTorchWithChangingHyperparameters) {
  graphs::CompileCounters c;
  const Tensor p = four_compiled_steps<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9}, [](SGD& opt, int i) {
    if (i == 1) { opt.set_momentum(0.5); opt.set_dampening(0.2); opt.set_weight_decay(0.1); }
    if (i == 2) { opt.set_momentum(0.8); opt.set_dampening(0.0); opt.set_weight_decay(0.0); }
    if (i == 3) { opt.set_momentum(0.3); opt.set_dampening(0.5); opt.set_weight_decay(0.05); }
  }, &c);
  testing::expect_close(p, tensor({0.96522952000000006, -1.9969103400000001, 0.36332138000000003}), 1e-14, 1e-15);
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.recompiles, 0);
}

// Adam's changes: before step 2 betas=(0.5, 0.9), weight_decay=0.1, eps=1e-3; step 3 betas=(0.7,
// 0.99), weight_decay=0, eps=1e-8; step 4 betas=(0.95, 0.5), weight_decay=0.2, eps=0.1.
void adam_changes(Adam& opt, int i) {
  if (i == 1) { opt.set_betas(0.5, 0.9); opt.set_weight_decay(0.1); opt.set_eps(1e-3); }
  if (i == 2) { opt.set_betas(0.7, 0.99); opt.set_weight_decay(0.0); opt.set_eps(1e-8); }
  if (i == 3) { opt.set_betas(0.95, 0.5); opt.set_weight_decay(0.2); opt.set_eps(0.1); }
}

// PyTorch 1.13, float64: Adam(lr=0.1) and AdamW(lr=0.1) on p = [1, -2, 0.5] with adam_changes made
// through param_groups[0].update(...): the bias corrections 1 - beta^t use the betas of each step.
TEST(DeviceHyperparams, AdamAndAdamWMatchPyTorchWithChangingHyperparameters) {
  graphs::CompileCounters c;
  const Tensor a = four_compiled_steps<Adam>(AdamOptions{.lr = 0.1}, adam_changes, &c);
  testing::expect_close(a, tensor({1.0601058206161738, -2.0200614200035929, 0.28934793511275025}), 1e-13, 1e-14);
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.recompiles, 0);
  const Tensor w = four_compiled_steps<AdamW>(AdamOptions{.lr = 0.1, .weight_decay = 0.01},
                                              [](AdamW& opt, int i) { adam_changes(opt, i); }, &c);
  testing::expect_close(w, tensor({1.1525540341536924, -2.1370658397615316, 0.31864036007552915}), 1e-13, 1e-14);
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.recompiles, 0);
}

// Momentum turning from zero to nonzero is structural (PyTorch makes a buffer from the gradient):
// the compiled step runs that step eagerly and traces a second graph; back to zero, the first graph
// applies again. The parameters still follow the eager loop.
TEST(DeviceHyperparams, MomentumFromZeroIsStructural) {
  Tensor a = tensor({1.0, -2.0, 0.5}).requires_grad_(true);
  Tensor b = a.detach().clone().requires_grad_(true);
  SGD eager({a}, {.lr = 0.1, .dampening = 0.3}), compiled_opt({b}, {.lr = 0.1, .dampening = 0.3});
  CompiledStep step(compiled_opt, {.backend = "aot_eager"});
  for (int i = 0; i < 30; ++i) {
    const double momentum = i < 10 ? 0.0 : i < 20 ? 0.9 - 0.01 * i : 0.0;
    eager.set_momentum(momentum);
    compiled_opt.set_momentum(momentum);
    const Tensor g = tensor({std::sin(i + 1.0), std::cos(i * 0.5), 0.1 * i});
    a.set_grad(g.clone());
    b.set_grad(g.clone());
    eager.step();
    step.step();
    testing::expect_close(b.detach(), a.detach(), 1e-13, 1e-15);
  }
  const graphs::CompileCounters& c = step.counters();
  EXPECT_EQ(c.compilations, 2);
  EXPECT_EQ(c.recompiles, 1);
  ASSERT_FALSE(c.recompile_reasons.empty());
  EXPECT_NE(c.recompile_reasons[0].find("momentum != 0"), std::string::npos) << c.recompile_reasons[0];
}

// The setters check their values as the constructors do, and fill the device copies in place.
TEST(DeviceHyperparams, SettersCheckAndFillInPlace) {
  Tensor p = randn({3}).requires_grad_(true);
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  const Tensor m = sgd.momentum_on(kCPU);
  EXPECT_EQ(m.dtype(), kFloat64);
  EXPECT_EQ(m.dim(), 0);
  const void* address = m.raw_data();
  sgd.set_momentum(0.75);
  EXPECT_EQ(sgd.momentum(), 0.75);
  EXPECT_EQ(sgd.options().momentum, 0.75);
  EXPECT_EQ(sgd.momentum_on(kCPU).raw_data(), address);
  EXPECT_EQ(m.item<double>(), 0.75);
  EXPECT_THROW_MSG(sgd.set_momentum(-0.1), "[SGD] invalid momentum value: -0.1");
  EXPECT_THROW_MSG(sgd.set_momentum(0.0), "[SGD] Nesterov momentum requires a momentum");
  EXPECT_THROW_MSG(sgd.set_dampening(0.5), "[SGD] Nesterov momentum requires zero dampening");
  EXPECT_THROW_MSG(sgd.set_weight_decay(-1.0), "[SGD] invalid weight_decay value: -1");
  Adam adam({p}, {});
  const Tensor b2 = adam.beta2_on(kCPU);
  adam.set_betas(0.8, 0.95);
  EXPECT_EQ(adam.betas(), std::make_pair(0.8, 0.95));
  EXPECT_EQ(b2.item<double>(), 0.95);
  EXPECT_THROW_MSG(adam.set_betas(1.0, 0.9), "[Adam] invalid beta parameter at index 0: 1");
  EXPECT_THROW_MSG(adam.set_betas(0.9, -0.5), "[Adam] invalid beta parameter at index 1: -0.5");
  EXPECT_THROW_MSG(adam.set_eps(-1e-8), "[Adam] invalid epsilon value");
  AdamW adamw({p});
  EXPECT_THROW_MSG(adamw.set_weight_decay(-0.1), "[AdamW] invalid weight_decay value: -0.1");
  EXPECT_EQ(adamw.betas(), std::make_pair(0.9, 0.999));
  EXPECT_EQ(adamw.weight_decay(), 0.01);
}

// State dicts save the values last set under PyTorch's names and load them back into the device
// copies in place (a compiled step that reads them follows).
TEST(DeviceHyperparams, StateDictRoundTripsTheValues) {
  Tensor p = randn({3}, {.dtype = kFloat64}).requires_grad_(true);
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
  sgd.set_momentum(0.7);
  sgd.set_dampening(0.2);
  sgd.set_weight_decay(0.03);
  const auto dict = sgd.state_dict();
  EXPECT_EQ(dict.at("param_groups.0.momentum").item<double>(), 0.7);
  EXPECT_EQ(dict.at("param_groups.0.dampening").item<double>(), 0.2);
  EXPECT_EQ(dict.at("param_groups.0.weight_decay").item<double>(), 0.03);
  SGD other({p}, {.lr = 0.5, .momentum = 0.1});
  const Tensor momentum = other.momentum_on(kCPU), dampening = other.dampening_on(kCPU);
  other.load_state_dict(dict);
  EXPECT_EQ(other.momentum(), 0.7);
  EXPECT_EQ(other.dampening(), 0.2);
  EXPECT_EQ(other.weight_decay(), 0.03);
  EXPECT_EQ(momentum.item<double>(), 0.7);
  EXPECT_EQ(dampening.item<double>(), 0.2);
  EXPECT_EQ(other.weight_decay_on(kCPU).item<double>(), 0.03);

  Adam adam({p}, {.lr = 0.01});
  adam.set_betas(0.8, 0.95);
  adam.set_eps(1e-6);
  adam.set_weight_decay(0.02);
  const auto adict = adam.state_dict();
  EXPECT_EQ(adict.at("param_groups.0.beta1").item<double>(), 0.8);
  EXPECT_EQ(adict.at("param_groups.0.beta2").item<double>(), 0.95);
  EXPECT_EQ(adict.at("param_groups.0.eps").item<double>(), 1e-6);
  EXPECT_EQ(adict.at("param_groups.0.weight_decay").item<double>(), 0.02);
  Adam loaded({p}, {});
  const Tensor beta1 = loaded.beta1_on(kCPU), eps = loaded.eps_on(kCPU);
  loaded.load_state_dict(adict);
  EXPECT_EQ(loaded.betas(), std::make_pair(0.8, 0.95));
  EXPECT_EQ(loaded.eps(), 1e-6);
  EXPECT_EQ(loaded.weight_decay(), 0.02);
  EXPECT_EQ(beta1.item<double>(), 0.8);
  EXPECT_EQ(eps.item<double>(), 1e-6);
  // A bad value is refused before anything changes.
  auto bad = adict;
  bad["param_groups.0.beta1"] = full({}, 1.5, {.dtype = kFloat64});
  EXPECT_THROW_MSG(loaded.load_state_dict(bad), "[load_state_dict] invalid hyperparameters");
  EXPECT_EQ(loaded.betas(), std::make_pair(0.8, 0.95));
}

// clip_norm_ with a tensor threshold clips as with the number, and checks the threshold.
TEST(DeviceHyperparams, ClipNormTakesATensorThreshold) {
  const Tensor g1 = tensor({3.0, 4.0}), g2 = tensor({12.0});
  TensorList a = {g1.clone(), g2.clone()}, b = {g1.clone(), g2.clone()};
  const Tensor na = nn::utils::clip_norm_(a, 6.5);
  const Tensor nb = nn::utils::clip_norm_(b, full({}, 6.5, {.dtype = kFloat64}));
  EXPECT_EQ(nb.item<double>(), 13.0);
  testing::expect_close(nb, na, 0, 0);
  for (size_t k = 0; k < a.size(); ++k) testing::expect_close(b[k], a[k], 0, 0);
  // 6.5 / (13 + 1e-6) of the gradients: [1.5, 2.0] and [6.0], up to the 1e-6.
  testing::expect_close(b[0], tensor({1.5, 2.0}), 1e-6, 0);
  EXPECT_THROW_MSG(nn::utils::clip_norm_(b, full({2}, 1.0)),
                   "[clip_norm_] max_norm must be one floating-point number, got float32 of shape [2]");
  Tensor p = tensor({1.0}).requires_grad_(true);
  p.set_grad(tensor({2.0}));
  EXPECT_THROW_MSG(nn::utils::clip_grad_norm_({p}, full({}, 1, {.dtype = kInt64})),
                   "[clip_grad_norm_] max_norm must be one floating-point number, got int64");
  nn::utils::clip_grad_norm_({p}, full({}, 1.0));
  EXPECT_NEAR(p.grad().item<double>(), 1.0, 1e-6);
}

// The fused ops' device scalars replace the options of their names (values exact in float32, so
// either dtype gives the same update as the options).
struct FusedCase {
  TensorList params, grads, m, v, steps;
};

FusedCase fused_case(Device device) {
  manual_seed(3);
  FusedCase c;
  for (const Shape& s : {Shape{5}, Shape{2, 3}}) {
    c.params.push_back(randn(s, {.dtype = kFloat64}).to(device));
    c.grads.push_back(randn(s, {.dtype = kFloat64}).to(device));
    c.m.push_back(randn(s, {.dtype = kFloat64}).to(device));
    c.v.push_back(rand(s, {.dtype = kFloat64}).to(device));
    c.steps.push_back(full({}, 2.0, {.dtype = kFloat32, .device = device}));
  }
  return c;
}

// Runs sgd_step_ and adam_step_ (with momentum, and AdamW) on copies of fused_case: once from the
// options, once from device scalars of `dtype` with the options set to wrong values. Returns both
// results, parameters then moments.
std::pair<TensorList, TensorList> fused_both_ways(Device device, DType dtype) {
  NoGradGuard no_grad;
  auto scalar = [&](double v) { return full({}, v, {.dtype = dtype, .device = device}); };
  std::pair<TensorList, TensorList> out;
  for (int way = 0; way < 2; ++way) {
    FusedCase c = fused_case(device);
    TensorList& result = way == 0 ? out.first : out.second;
    const SgdStepOptions sgd_true{.lr = 0.25, .momentum = 0.75, .dampening = 0.125, .weight_decay = 0.0625};
    const SgdStepOptions sgd_wrong{.lr = 9.0, .momentum = 0.5, .dampening = 0.5, .weight_decay = 9.0};
    if (way == 0) {
      sgd_step_(c.params, c.grads, c.m, sgd_true);
    } else {
      sgd_step_(c.params, c.grads, c.m, sgd_wrong, Tensor(),
                SgdStepScalars{scalar(0.25), scalar(0.75), scalar(0.125), scalar(0.0625)});
    }
    for (bool decoupled : {false, true}) {
      const AdamStepOptions adam_true{.lr = 0.5, .beta1 = 0.75, .beta2 = 0.875, .eps = 0.0625,
                                      .weight_decay = 0.125, .decoupled = decoupled};
      const AdamStepOptions adam_wrong{.lr = 9.0, .beta1 = 0.1, .beta2 = 0.2, .eps = 9.0, .weight_decay = 9.0,
                                       .decoupled = decoupled};
      if (way == 0) {
        adam_step_(c.params, c.grads, c.m, c.v, c.steps, adam_true);
      } else {
        adam_step_(c.params, c.grads, c.m, c.v, c.steps, adam_wrong, Tensor(),
                   AdamStepScalars{scalar(0.5), scalar(0.75), scalar(0.875), scalar(0.0625), scalar(0.125)});
      }
    }
    for (const TensorList* l : {&c.params, &c.m, &c.v, &c.steps})
      for (const Tensor& t : *l) result.push_back(t.to(kCPU));
  }
  return out;
}

TEST(DeviceHyperparams, FusedOpsReadEveryScalar) {
  for (DType dtype : {kFloat32, kFloat64}) {
    const auto [from_options, from_scalars] = fused_both_ways(kCPU, dtype);
    for (size_t k = 0; k < from_options.size(); ++k) testing::expect_close(from_scalars[k], from_options[k], 0, 0);
  }
}

TEST(DeviceHyperparams, FusedOpsRejectBadScalars) {
  NoGradGuard no_grad;
  Tensor p = ones({4}), g = ones({4}), m = zeros({4}), v = zeros({4}), s = zeros({});
  SgdStepScalars sgd;
  sgd.dampening = full({2}, 0.1);
  EXPECT_THROW_MSG(sgd_step_({p}, {g}, {m}, {.momentum = 0.9}, Tensor(), sgd),
                   "[sgd_step_] dampening must be one float32 or float64 value on cpu, got float32 of shape [2]");
  AdamStepScalars adam;
  adam.beta2 = full({}, 1, {.dtype = kInt64});
  EXPECT_THROW_MSG(adam_step_({p}, {g}, {m}, {v}, {s}, {}, Tensor(), adam),
                   "[adam_step_] beta2 must be one float32 or float64 value on cpu, got int64 of shape []");
}

TEST(DeviceHyperparamsCuda, FusedOpsReadEveryScalarLikeTheCpu) {
  TG_REQUIRE_CUDA();
  for (DType dtype : {kFloat32, kFloat64}) {
    const auto [cpu_options, cpu_scalars] = fused_both_ways(kCPU, dtype);
    const auto [gpu_options, gpu_scalars] = fused_both_ways(cuda_device(), dtype);
    for (size_t k = 0; k < cpu_options.size(); ++k) {
      testing::expect_close(gpu_scalars[k], gpu_options[k], 0, 0);
      testing::expect_close(gpu_scalars[k], cpu_options[k], 1e-12, 1e-14);
    }
  }
}

// A recorded Adam update reads the betas when replayed: its bias corrections follow them.
TEST(DeviceHyperparamsCuda, ReplayedAdamReadsTheCurrentBetas) {
  TG_REQUIRE_CUDA();
  NoGradGuard no_grad;
  const Device dev = cuda_device();
  FusedCase c = fused_case(dev), ref = fused_case(kCPU);
  AdamStepScalars scalars{full({}, 0.5, {.dtype = kFloat64, .device = dev}),
                                full({}, 0.9, {.dtype = kFloat64, .device = dev}),
                                full({}, 0.999, {.dtype = kFloat64, .device = dev}),
                                full({}, 1e-8, {.dtype = kFloat64, .device = dev}),
                                full({}, 0.0, {.dtype = kFloat64, .device = dev})};
  auto [graph, outputs] = graphs::cuda_graph_recorder(dev)->record([&] {
    adam_step_(c.params, c.grads, c.m, c.v, c.steps, {}, Tensor(), scalars);
    return TensorList{};
  });
  // Recording ran nothing: restore the state, then replay with new betas.
  const FusedCase fresh = fused_case(dev);
  for (size_t k = 0; k < c.params.size(); ++k) {
    c.params[k].copy_(fresh.params[k]);
    c.m[k].copy_(fresh.m[k]);
    c.v[k].copy_(fresh.v[k]);
    c.steps[k].copy_(fresh.steps[k]);
  }
  scalars.beta1.fill_(0.6);
  scalars.beta2.fill_(0.7);
  graph->replay();
  adam_step_(ref.params, ref.grads, ref.m, ref.v, ref.steps, {.lr = 0.5, .beta1 = 0.6, .beta2 = 0.7, .eps = 1e-8});
  for (size_t k = 0; k < c.params.size(); ++k) testing::expect_close(c.params[k].to(kCPU), ref.params[k], 1e-12, 1e-14);
}

}  // namespace
}  // namespace tg::optim
