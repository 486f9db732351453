// Optimizer state_dict / load_state_dict: PyTorch's entry names, continuing from a loaded state
// equals continuing the original, compiled steps count on the device, bad entries change nothing.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/safetensors.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "support/test_support.h"
#include "tapegraph.h"

namespace tg {
namespace {

// A linear model, a fixed batch, and `steps` updates with `opt`.
struct Rig {
  nn::Linear model{3, 2};
  Tensor x, y;
  explicit Rig(uint64_t seed) {
    manual_seed(seed);
    model.load_state_dict({{"weight", randn({2, 3})}, {"bias", randn({2})}});
    x = randn({5, 3});
    y = randn({5, 2});
  }
  void train(optim::Optimizer& opt, int steps, optim::CompiledStep* compiled = nullptr) {
    for (int i = 0; i < steps; ++i) {
      Tensor loss = (model(x) - y).pow(2).mean();
      opt.zero_grad();
      loss.backward();
      compiled ? compiled->step() : opt.step();
    }
  }
};

void expect_same_params(nn::Module& a, nn::Module& b) {
  auto sa = a.state_dict(), sb = b.state_dict();
  for (auto& [k, t] : sa) EXPECT_EQ(t.ne(sb.at(k)).sum().item<int64_t>(), 0) << k;
}

TEST(OptimizerState, AdamContinuesExactlyAfterASaveAndLoad) {
  Rig a(1), b(1);
  optim::Adam oa(a.model.parameters(), {.lr = 0.05, .weight_decay = 0.01});
  optim::Adam ob(b.model.parameters(), {.lr = 0.5});  // options come from the loaded state
  a.train(oa, 3);
  const auto sd = oa.state_dict();
  EXPECT_EQ(sd.count("state.0.exp_avg"), 1u);
  EXPECT_EQ(sd.count("state.1.exp_avg_sq"), 1u);
  EXPECT_EQ(sd.at("state.0.step").item<float>(), 3.0f);
  EXPECT_EQ(sd.at("param_groups.0.lr").item<double>(), 0.05);
  // Through a file, as a checkpoint goes.
  const auto file = (std::filesystem::temp_directory_path() / "tg_test_optim_state.safetensors").string();
  save_safetensors(file, sd);
  b.model.load_state_dict(a.model.state_dict());
  ob.load_state_dict(load_safetensors(file).tensors);
  std::filesystem::remove(file);
  EXPECT_EQ(ob.options().weight_decay, 0.01);
  EXPECT_EQ(ob.step_count(), 3);
  a.train(oa, 4);
  b.train(ob, 4);
  expect_same_params(a.model, b.model);
}

TEST(OptimizerState, CompiledAdamCountsStepsOnTheDevice) {
  Rig a(2), b(2);
  optim::Adam oa(a.model.parameters(), {.lr = 0.05});
  optim::CompiledStep ca(oa, {.backend = "aot_eager"});
  a.train(oa, 5, &ca);
  EXPECT_EQ(oa.state_dict().at("state.0.step").item<float>(), 5.0f) << "replayed steps are counted";
  optim::Adam ob(b.model.parameters(), {.lr = 0.05});
  optim::CompiledStep cb(ob, {.backend = "aot_eager"});
  b.model.load_state_dict(a.model.state_dict());
  ob.load_state_dict(oa.state_dict());
  a.train(oa, 3, &ca);
  b.train(ob, 3, &cb);
  expect_same_params(a.model, b.model);
}

TEST(OptimizerState, SgdMomentumRoundTrip) {
  Rig a(3), b(3);
  optim::SGD oa(a.model.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  optim::SGD ob(b.model.parameters(), {.lr = 0.1});
  a.train(oa, 2);
  EXPECT_EQ(oa.state_dict().count("state.1.momentum_buffer"), 1u);
  b.model.load_state_dict(a.model.state_dict());
  ob.load_state_dict(oa.state_dict());
  EXPECT_TRUE(ob.options().nesterov);
  a.train(oa, 3);
  b.train(ob, 3);
  expect_same_params(a.model, b.model);
}

TEST(OptimizerState, BadEntriesNameTheKeyAndChangeNothing) {
  Rig a(4);
  optim::Adam opt(a.model.parameters(), {.lr = 0.05});
  a.train(opt, 2);
  const auto good = opt.state_dict();
  std::map<std::string, Tensor> before;
  for (auto& [k, t] : good) before[k] = t.clone();

  auto extra = good;
  extra["state.7.exp_avg"] = zeros({2, 3});
  EXPECT_THROW_MSG(opt.load_state_dict(extra), "unexpected key \"state.7.exp_avg\"");
  auto shape = good;
  shape["state.1.exp_avg_sq"] = zeros({3});
  shape["param_groups.0.lr"] = full({}, 9.0, {.dtype = kFloat64});
  EXPECT_THROW_MSG(opt.load_state_dict(shape),
                   "entry \"state.1.exp_avg_sq\" has shape [3] but the parameter has shape [2]");
  auto partial = good;
  partial.erase("state.0.exp_avg");
  EXPECT_THROW_MSG(opt.load_state_dict(partial), "missing key \"state.0.exp_avg\"");
  auto no_lr = good;
  no_lr.erase("param_groups.0.lr");
  EXPECT_THROW_MSG(opt.load_state_dict(no_lr), "missing key \"param_groups.0.lr\"");
  EXPECT_EQ(opt.lr(), 0.05);
  for (auto& [k, t] : opt.state_dict()) EXPECT_EQ(t.ne(before.at(k)).sum().item<int64_t>(), 0) << k << " changed";
}

}  // namespace
}  // namespace tg
