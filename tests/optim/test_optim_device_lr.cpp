// The learning rate on the device: fused updates read it from a 0-dim tensor, so a compiled step
// follows a changing learning rate without re-tracing (CPU, aot_eager) or re-recording (CUDA graphs),
// while an update that reads the host value guards it and recompiles.
#include <gtest/gtest.h>

#include <functional>

#include "graphs/cudagraphs/graph_recorder.h"
#include "ops/optim/optim_step.h"
#include "optim/optim.h"
#include "support/test_support.h"

namespace tg::optim {
namespace {

// Learning rates of the steps below: every step changes it.
double lr_of_step(int i) { return 0.1 / (1.0 + i); }

// Two copies of the same parameters and gradients: one stepped by an eager optimizer that is not
// capturable (host learning rate, the reference), one by a CompiledStep; the learning rate changes
// before every step. Returns the compiled step's counters.
template <typename Opt, typename Options>
graphs::CompileCounters run_with_changing_lr(Options options, CompileOptions compile, Device device, int steps = 6) {
  manual_seed(5);
  TensorList a, b;
  for (const Shape& s : {Shape{4, 3}, Shape{3}}) {
    Tensor p = randn(s, {.dtype = kFloat64}).to(device);
    a.push_back(p.clone().requires_grad_(true));
    b.push_back(p.clone().requires_grad_(true));
  }
  Opt eager(a, options), compiled_opt(b, options);
  CompiledStep compiled(compiled_opt, compile);
  for (int i = 0; i < steps; ++i) {
    eager.set_lr(lr_of_step(i));
    compiled_opt.set_lr(lr_of_step(i));
    for (size_t k = 0; k < a.size(); ++k) {
      Tensor g = randn(a[k].sizes(), {.dtype = kFloat64}).to(device);
      a[k].set_grad(g.clone());
      b[k].set_grad(g.clone());
    }
    eager.step();
    compiled.step();
    for (size_t k = 0; k < a.size(); ++k)
      testing::expect_close(b[k].detach().to(kCPU), a[k].detach().to(kCPU), 1e-12, 1e-12);
  }
  return compiled.counters();
}

TEST(DeviceLr, CompiledSgdFollowsTheLearningRateWithoutRetracing) {
  for (const SGDOptions& o : {SGDOptions{.lr = 0.1}, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01},
                              SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}}) {
    const graphs::CompileCounters c = run_with_changing_lr<SGD>(o, {.backend = "aot_eager"}, kCPU);
    EXPECT_EQ(c.compilations, 1);
    EXPECT_EQ(c.recompiles, 0);
    EXPECT_EQ(c.compiled_calls, 5);  // the first step runs eagerly
  }
}

TEST(DeviceLr, CompiledAdamAndAdamWFollowTheLearningRateWithoutRetracing) {
  // AdamW's decay (1 - lr*wd) reads the device learning rate too.
  for (bool decoupled : {false, true}) {
    const AdamOptions o{.lr = 0.01, .weight_decay = 0.1};
    const graphs::CompileCounters c = decoupled ? run_with_changing_lr<AdamW>(o, {.backend = "aot_eager"}, kCPU)
                                                : run_with_changing_lr<Adam>(o, {.backend = "aot_eager"}, kCPU);
    EXPECT_EQ(c.compilations, 1);
    EXPECT_EQ(c.recompiles, 0);
  }
}

// The optimizer keeps one float64 copy per device; set_lr fills it in place (same address).
TEST(DeviceLr, SetLrFillsTheDeviceCopyInPlace) {
  Tensor p = randn({3}).requires_grad_(true);
  SGD sgd({p}, {.lr = 0.25});
  Tensor lr = sgd.lr_on(kCPU);
  EXPECT_EQ(lr.dtype(), kFloat64);
  EXPECT_EQ(lr.dim(), 0);
  EXPECT_EQ(lr.item<double>(), 0.25);
  const void* address = lr.raw_data();
  sgd.set_lr(0.125);
  EXPECT_EQ(sgd.lr(), 0.125);
  EXPECT_EQ(sgd.lr_on(kCPU).raw_data(), address);
  EXPECT_EQ(lr.item<double>(), 0.125);
  EXPECT_THROW_MSG(sgd.set_lr(-1.0), "invalid learning rate");
}

// An update that reads the host learning rate (the unfused, non-capturable CPU path) bakes it into
// the trace: the read is guarded, so a new learning rate recompiles with the reason.
TEST(DeviceLr, HostLearningRateReadUnderTracingIsGuarded) {
  Tensor p = ones({3}, {.dtype = kFloat64}).requires_grad_(true);
  SGD sgd({p}, {.lr = 0.5});
  graphs::CompiledFunction step(
      [&](const TensorList& gs) {
        sgd.update(gs);
        return TensorList{};
      },
      {.backend = "aot_eager"});
  const Tensor g = ones({3}, {.dtype = kFloat64});
  step.call({g});
  step.call({g});
  sgd.set_lr(0.25);
  step.call({g});
  testing::expect_close(p.detach(), full({3}, 1.0 - 0.5 - 0.5 - 0.25, {.dtype = kFloat64}), 0, 0);
  EXPECT_EQ(step.counters().recompiles, 1);
  ASSERT_EQ(step.counters().recompile_reasons.size(), 1u);
  EXPECT_NE(step.counters().recompile_reasons[0].find("'lr'"), std::string::npos)
      << step.counters().recompile_reasons[0];
}

// The fused ops take the learning rate as a float32 or float64 scalar; its value replaces options.lr.
TEST(DeviceLr, FusedOpsReadTheLearningRateTensor) {
  NoGradGuard no_grad;
  for (DType lr_dtype : {kFloat32, kFloat64}) {
    Tensor p1 = ones({4}, {.dtype = kFloat64}), p2 = p1.clone(), g = full({4}, 2.0, {.dtype = kFloat64});
    sgd_step_({p1}, {g}, {}, {.lr = 0.25});
    sgd_step_({p2}, {g}, {}, {.lr = 99.0}, Tensor(), full({}, 0.25, {.dtype = lr_dtype}));
    testing::expect_close(p2, p1, 0, 0);
    Tensor q1 = ones({4}), q2 = q1.clone(), m1 = zeros({4}), m2 = zeros({4}), v1 = zeros({4}), v2 = zeros({4});
    Tensor s1 = zeros({}), s2 = zeros({});
    adam_step_({q1}, {g.to(kFloat32)}, {m1}, {v1}, {s1}, {.lr = 0.5, .weight_decay = 0.1, .decoupled = true});
    adam_step_({q2}, {g.to(kFloat32)}, {m2}, {v2}, {s2}, {.lr = 99.0, .weight_decay = 0.1, .decoupled = true},
               Tensor(), full({}, 0.5, {.dtype = lr_dtype}));
    testing::expect_close(q2, q1, 0, 0);
  }
}

TEST(DeviceLr, FusedOpsRejectABadLearningRateTensor) {
  NoGradGuard no_grad;
  Tensor p = ones({4}), g = ones({4});
  EXPECT_THROW_MSG(sgd_step_({p}, {g}, {}, {}, Tensor(), full({2}, 0.1)),
                   "[sgd_step_] lr must be one float32 or float64 value on cpu, got float32 of shape [2]");
  EXPECT_THROW_MSG(sgd_step_({p}, {g}, {}, {}, Tensor(), full({}, 1, {.dtype = kInt64})),
                   "lr must be one float32 or float64 value");
  Tensor m = zeros({4}), v = zeros({4}), s = zeros({});
  EXPECT_THROW_MSG(adam_step_({p}, {g}, {m}, {v}, {s}, {}, zeros({}), full({}, 1, {.dtype = kInt32})),
                   "[adam_step_] lr must be one float32 or float64 value");
}

TEST(DeviceLrCuda, CudaGraphStepFollowsTheLearningRateWithoutReRecording) {
  TG_REQUIRE_CUDA();
  const graphs::CompileCounters sgd =
      run_with_changing_lr<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9}, {.backend = "cudagraphs"}, cuda_device(), 8);
  EXPECT_EQ(sgd.compilations, 1);
  EXPECT_EQ(sgd.graphs_captured, 1);
  EXPECT_EQ(sgd.rerecords, 0);
  const graphs::CompileCounters adam =
      run_with_changing_lr<AdamW>(AdamOptions{.lr = 0.01, .weight_decay = 0.1}, {.backend = "cudagraphs"},
                                  cuda_device(), 8);
  EXPECT_EQ(adam.compilations, 1);
  EXPECT_EQ(adam.graphs_captured, 1);
  EXPECT_EQ(adam.rerecords, 0);
}

// A recorded fused update reads the learning rate when replayed, not when recorded.
TEST(DeviceLrCuda, ReplayedFusedUpdateReadsTheCurrentLearningRate) {
  TG_REQUIRE_CUDA();
  NoGradGuard no_grad;
  for (DType lr_dtype : {kFloat32, kFloat64}) {
    Tensor p = ones({1000}, {.device = cuda_device()}), g = ones({1000}, {.device = cuda_device()});
    Tensor lr = full({}, 0.5, {.dtype = lr_dtype, .device = cuda_device()});
    auto [graph, outputs] = graphs::cuda_graph_recorder(cuda_device())->record([&] {
      sgd_step_({p}, {g}, {}, {.lr = 99.0}, Tensor(), lr);
      return TensorList{};
    });
    p.fill_(1.0);
    lr.fill_(0.25);
    graph->replay();
    testing::expect_close(p.to(kCPU), full({1000}, 0.75), 0, 0);
  }
}

}  // namespace
}  // namespace tg::optim
