// Learning-rate schedulers against PyTorch: every expected value below was printed by PyTorch 1.13
// (torch.optim.lr_scheduler, SGD with lr=0.1 unless said otherwise): get_last_lr()[0] after the
// constructor, then after each of the following optimizer.step(); scheduler.step() pairs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "optim/optim.h"
#include "support/test_support.h"

namespace tg::optim {
namespace {

// An SGD over one parameter with learning rate `lr`.
struct Fixture {
  explicit Fixture(double lr = 0.1) : p(zeros({1}).requires_grad_(true)), sgd({p}, {.lr = lr}) {}
  Tensor p;
  SGD sgd;
};

// The scheduler's get_last_lr() after construction and after each of expected.size() - 1 steps; each
// must also be the optimizer's learning rate.
void expect_schedule(LRScheduler& s, const std::vector<double>& expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    if (i > 0) s.step();
    ASSERT_EQ(s.get_last_lr().size(), 1u);
    EXPECT_DOUBLE_EQ(s.get_last_lr()[0], expected[i]) << "after " << i << " steps";
    EXPECT_EQ(s.optimizer().lr(), s.get_last_lr()[0]);
    EXPECT_EQ(s.last_epoch(), static_cast<int64_t>(i));
  }
}

TEST(LRScheduler, StepLR) {
  Fixture f;
  StepLR s(f.sgd, 3, 0.5);  // StepLR(opt, step_size=3, gamma=0.5)
  expect_schedule(s, {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125});
}

TEST(LRScheduler, LinearLR) {
  {
    Fixture f;
    LinearLR s(f.sgd, 0.25, 1.0, 4);  // LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=4)
    expect_schedule(s, {0.025, 0.043750000000000004, 0.06250000000000001, 0.08125000000000002, 0.10000000000000002,
                        0.10000000000000002, 0.10000000000000002, 0.10000000000000002, 0.10000000000000002});
  }
  {
    Fixture f;
    LinearLR s(f.sgd);  // LinearLR(opt): start_factor=1/3, end_factor=1, total_iters=5
    expect_schedule(s, {0.03333333333333333, 0.04666666666666667, 0.060000000000000005, 0.07333333333333335,
                        0.08666666666666668, 0.1, 0.1, 0.1});
  }
  {
    Fixture f;
    LinearLR s(f.sgd, 1.0, 0.5, 3);  // LinearLR(opt, start_factor=1.0, end_factor=0.5, total_iters=3)
    expect_schedule(s, {0.1, 0.08333333333333334, 0.06666666666666668, 0.05000000000000001, 0.05000000000000001,
                        0.05000000000000001});
  }
}

TEST(LRScheduler, CosineAnnealingLRThroughAndPastTMax) {
  Fixture f;
  CosineAnnealingLR s(f.sgd, 5, 0.01);  // CosineAnnealingLR(opt, T_max=5, eta_min=0.01)
  expect_schedule(s, {0.1, 0.09140576474687263, 0.06890576474687263, 0.04109423525312736, 0.018594235253127367, 0.01,
                      0.018594235253127367, 0.04109423525312739, 0.06890576474687267, 0.09140576474687269,
                      0.10000000000000006, 0.09140576474687272, 0.06890576474687268, 0.0410942352531274,
                      0.01859423525312738});
}

TEST(LRScheduler, LambdaLR) {
  Fixture f;
  LambdaLR s(f.sgd, [](int64_t e) { return std::pow(0.95, static_cast<double>(e)); });  // lambda e: 0.95**e
  expect_schedule(s, {0.1, 0.095, 0.09025, 0.0857375, 0.081450625, 0.07737809374999999, 0.07350918906249998});
}

TEST(LRScheduler, SequentialWarmupThenCosine) {
  Fixture f;
  // SequentialLR(opt, [LinearLR(opt, start_factor=0.1, total_iters=3),
  //                    CosineAnnealingLR(opt, T_max=6, eta_min=0.001)], milestones=[3])
  auto warmup = std::make_shared<LinearLR>(f.sgd, 0.1, 1.0, 3);
  auto cosine = std::make_shared<CosineAnnealingLR>(f.sgd, 6, 0.001);
  SequentialLR s(f.sgd, {warmup, cosine}, {3});
  expect_schedule(s, {0.010000000000000002, 0.04, 0.07, 0.1, 0.09336825748732973, 0.07525000000000001, 0.0505,
                      0.025750000000000012, 0.007631742512670284, 0.001, 0.007631742512670284, 0.025750000000000002,
                      0.05050000000000004});
}

TEST(LRScheduler, SequentialOfThreeStartsEachAtItsClosedForm) {
  Fixture f;
  // SequentialLR(opt, [LinearLR(opt, start_factor=0.5, total_iters=2), StepLR(opt, step_size=2, gamma=0.1),
  //                    CosineAnnealingLR(opt, T_max=4)], milestones=[2, 5])
  auto a = std::make_shared<LinearLR>(f.sgd, 0.5, 1.0, 2);
  auto b = std::make_shared<StepLR>(f.sgd, 2, 0.1);
  auto c = std::make_shared<CosineAnnealingLR>(f.sgd, 4);
  SequentialLR s(f.sgd, {a, b, c}, {2, 5});
  expect_schedule(s, {0.05, 0.07500000000000001, 0.1, 0.1, 0.010000000000000002, 0.1, 0.08535533905932738, 0.05,
                      0.014644660940672627, 0.0, 0.014644660940672622});
}

// The acceptance schedule: 100 warm-up steps from 1% of lr=0.001, then cosine over 900 steps.
TEST(LRScheduler, ThousandStepWarmupCosineSchedule) {
  Fixture f(0.001);
  SequentialLR s(f.sgd,
                 {std::make_shared<LinearLR>(f.sgd, 0.01, 1.0, 100), std::make_shared<CosineAnnealingLR>(f.sgd, 900)},
                 {100});
  // The same in PyTorch, at steps 0, 1, 50, 99, 100, 101, 102, 500, 998, 999.
  const std::map<int, double> expected{{0, 1e-05},
                                       {1, 1.9900000000000003e-05},
                                       {50, 0.0005049999999999999},
                                       {99, 0.0009901},
                                       {100, 0.001},
                                       {101, 0.0009999969538288952},
                                       {102, 0.0009999878153526974},
                                       {500, 0.0005868240888334659},
                                       {998, 1.2184647302626558e-08},
                                       {999, 3.0461711048035346e-09}};
  for (int i = 0; i < 1000; ++i) {
    if (i > 0) s.step();
    if (auto it = expected.find(i); it != expected.end())
      EXPECT_DOUBLE_EQ(s.get_last_lr()[0], it->second) << "step " << i;
  }
}

// Resuming with last_epoch requires the initial_lr a first scheduler recorded; the resumed
// scheduler's first step takes the closed form. CosineAnnealingLR(opt, T_max=10) stepped 5 times,
// then CosineAnnealingLR(opt, T_max=10, last_epoch=4): get_last_lr 0.05 at last_epoch 5, then
// 0.03454915028125263.
TEST(LRScheduler, ResumingWithLastEpoch) {
  Fixture f;
  EXPECT_THROW_MSG(CosineAnnealingLR(f.sgd, 10, 0.0, 4), "'initial_lr' is not specified");
  CosineAnnealingLR first(f.sgd, 10);
  for (int i = 0; i < 5; ++i) first.step();
  CosineAnnealingLR resumed(f.sgd, 10, 0.0, 4);
  EXPECT_EQ(resumed.last_epoch(), 5);
  EXPECT_DOUBLE_EQ(resumed.get_last_lr()[0], 0.05);
  resumed.step();
  EXPECT_DOUBLE_EQ(resumed.get_last_lr()[0], 0.03454915028125263);
}

// A state dict saved mid-schedule and loaded into a fresh scheduler continues the same schedule.
TEST(LRScheduler, StateDictRoundTrip) {
  Fixture a, b;
  CosineAnnealingLR sa(a.sgd, 5, 0.01);
  CosineAnnealingLR sb(b.sgd, 7, 0.5);  // other options: the state dict carries them
  for (int i = 0; i < 3; ++i) sa.step();
  const auto dict = sa.state_dict();
  // PyTorch's keys (less verbose and _get_lr_called_within_step), one entry per learning rate.
  std::vector<std::string> keys;
  for (const auto& [k, v] : dict) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"T_max", "_last_lr.0", "_step_count", "base_lrs.0", "eta_min",
                                            "last_epoch"}));
  EXPECT_EQ(dict.at("last_epoch").item<double>(), 3.0);
  EXPECT_EQ(dict.at("_step_count").item<double>(), 4.0);
  sb.load_state_dict(dict);
  b.sgd.set_lr(a.sgd.lr());  // the optimizer's own state dict restores its learning rate
  for (int i = 0; i < 8; ++i) {
    sa.step();
    sb.step();
    EXPECT_EQ(sb.get_last_lr()[0], sa.get_last_lr()[0]);
  }
}

TEST(LRScheduler, SequentialStateDictRoundTrip) {
  auto make = [](Fixture& f) {
    return std::make_unique<SequentialLR>(
        f.sgd, std::vector<std::shared_ptr<LRScheduler>>{std::make_shared<LinearLR>(f.sgd),
                                                         std::make_shared<StepLR>(f.sgd, 2)},
        std::vector<int64_t>{3});
  };
  Fixture a, b;
  auto sa = make(a), sb = make(b);
  // PyTorch's SequentialLR state: last_epoch 0, the schedulers' last_epoch 0 and -1.
  auto dict = sa->state_dict();
  EXPECT_EQ(dict.at("last_epoch").item<double>(), 0.0);
  EXPECT_EQ(dict.at("_schedulers.0.last_epoch").item<double>(), 0.0);
  EXPECT_EQ(dict.at("_schedulers.1.last_epoch").item<double>(), -1.0);
  EXPECT_EQ(dict.at("_milestones.0").item<double>(), 3.0);
  for (int i = 0; i < 4; ++i) sa->step();
  sb->load_state_dict(sa->state_dict());
  b.sgd.set_lr(a.sgd.lr());
  for (int i = 0; i < 6; ++i) {
    sa->step();
    sb->step();
    EXPECT_EQ(sb->get_last_lr()[0], sa->get_last_lr()[0]);
  }
}

// As in PyTorch, the optimizer's state dict carries the initial_lr a scheduler recorded, so a
// resumed optimizer can take a scheduler resumed with last_epoch.
TEST(LRScheduler, OptimizerStateDictKeepsInitialLr) {
  Fixture a, b;
  EXPECT_EQ(a.sgd.state_dict().count("param_groups.0.initial_lr"), 0u);
  CosineAnnealingLR sa(a.sgd, 10);
  for (int i = 0; i < 5; ++i) sa.step();
  const auto dict = a.sgd.state_dict();
  EXPECT_EQ(dict.at("param_groups.0.initial_lr").item<double>(), 0.1);
  b.sgd.load_state_dict(dict);
  EXPECT_EQ(b.sgd.initial_lr(), std::optional<double>(0.1));
  CosineAnnealingLR resumed(b.sgd, 10, 0.0, 4);  // PyTorch: 0.05 at last_epoch 5
  EXPECT_DOUBLE_EQ(resumed.get_last_lr()[0], 0.05);
}

TEST(LRScheduler, LoadStateDictChecksEveryKeyFirst) {
  Fixture f;
  StepLR s(f.sgd, 3);
  auto dict = s.state_dict();
  dict["gamma"] = full({}, 0.5, {.dtype = kFloat64});
  dict["T_max"] = full({}, 3.0, {.dtype = kFloat64});
  EXPECT_THROW_MSG(s.load_state_dict(dict), "[StepLR] load_state_dict: unexpected key \"T_max\"");
  dict.erase("T_max");
  dict.erase("step_size");
  EXPECT_THROW_MSG(s.load_state_dict(dict), "missing key \"step_size\"");
  dict["step_size"] = zeros({2});
  EXPECT_THROW_MSG(s.load_state_dict(dict), "entry \"step_size\" should hold one number");
  s.step();
  EXPECT_EQ(s.get_last_lr()[0], 0.1);  // nothing was loaded: gamma and step_size as before
}

TEST(LRScheduler, RejectsBadArguments) {
  Fixture f;
  EXPECT_THROW_MSG(StepLR(f.sgd, 0), "[StepLR] step_size must be positive, got 0");
  EXPECT_THROW_MSG(LinearLR(f.sgd, 0.0), "Starting multiplicative factor expected to be greater than 0");
  EXPECT_THROW_MSG(LinearLR(f.sgd, 0.5, 1.5), "Ending multiplicative factor expected to be between 0 and 1");
  EXPECT_THROW_MSG(CosineAnnealingLR(f.sgd, 0), "T_max must be positive");
  EXPECT_THROW_MSG(LambdaLR(f.sgd, nullptr), "lr_lambda is an empty function");
  Fixture other;
  auto a = std::make_shared<LinearLR>(f.sgd);
  auto b = std::make_shared<StepLR>(other.sgd, 2);
  EXPECT_THROW_MSG(SequentialLR(f.sgd, {a, b}, {3}), "schedulers at index 1 to be different than the optimizer");
  auto c = std::make_shared<StepLR>(f.sgd, 2);
  EXPECT_THROW_MSG(SequentialLR(f.sgd, {a, c}, {3, 4}), "number of schedulers 2 and the number of milestones to be "
                                                        "equal to 2");
}

}  // namespace
}  // namespace tg::optim
