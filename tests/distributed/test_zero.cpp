// ZeroRedundancyOptimizer in one process (a group of one): the flat layout and its re-sharding,
// parameters equal to the wrapped optimizer's step for step (stages 1 and 2, clipping, compiled
// steps), state dicts in the plain optimizer's format, sharded checkpoints and their errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "distributed/collectives/collectives.h"
#include "distributed/ddp/ddp.h"
#include "distributed/zero/zero_optimizer.h"
#include "support/test_support.h"

namespace tg::distributed {
namespace {

namespace fs = std::filesystem;

class SingleProcessGroup : public ::testing::Environment {
 public:
  void SetUp() override { init(distributed::Environment{}); }
  void TearDown() override { destroy(); }
};
const auto* const g_group = ::testing::AddGlobalTestEnvironment(new SingleProcessGroup);

Device test_device() { return default_group()->device(); }

std::shared_ptr<nn::Sequential> make_mlp(Device device, int64_t hidden = 32) {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, hidden));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(hidden, 4));
  m->to(device);
  return m;
}

std::pair<Tensor, Tensor> batch(int step, Device device) {
  manual_seed(100 + static_cast<uint64_t>(step));
  return {randn({8, 6}).to(device), randint(0, 4, {8}).to(device)};
}

// A fresh empty directory under the system's temporary directory.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("tg_zero_" + std::to_string(std::random_device{}()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void expect_params_close(const TensorList& a, const TensorList& b, double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) testing::expect_close(a[k].detach(), b[k].detach(), rtol, atol);
}

TEST(ZeroLayout, BucketsArePaddedAndShardsRoundTrip) {
  // Parameters of 5, 7 (float32) and 3 (float64) elements: groups by dtype, reverse order in each.
  const TensorList params = {zeros({5}), zeros({3}, {.dtype = kFloat64}), zeros({7})};
  const ZeroLayout one = ZeroLayout::build(params, 3, 0.0);
  ASSERT_EQ(one.groups.size(), 2u);
  EXPECT_EQ(one.groups[0].members, (std::vector<size_t>{2, 0}));
  EXPECT_EQ(one.groups[0].offsets, (std::vector<int64_t>{0, 7}));
  ASSERT_EQ(one.groups[0].buckets.size(), 1u);
  EXPECT_EQ(one.groups[0].buckets[0].size, 12);  // 12 elements padded to a multiple of 3
  EXPECT_EQ(one.shard_size(0), 4);
  EXPECT_EQ(one.groups[1].buckets[0].size, 3);
  // Rank 1 owns flat [4, 8): the last 3 elements of parameter 2 and the first of parameter 0.
  const auto pieces = one.pieces(0, 1);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].member, 0u);
  EXPECT_EQ(pieces[0].param_offset, 4);
  EXPECT_EQ(pieces[0].length, 3);
  EXPECT_EQ(pieces[1].member, 1u);
  EXPECT_EQ(pieces[1].param_offset, 0);
  EXPECT_EQ(pieces[1].shard_offset, 3);

  // Buckets of a small cap (stage 2): a bucket closes once it holds the cap.
  const TensorList big = {zeros({100}), zeros({300}), zeros({50})};
  const ZeroLayout capped = ZeroLayout::build(big, 4, 1000.0 / (1024.0 * 1024.0));  // 1000 bytes: 250 floats
  ASSERT_EQ(capped.groups[0].buckets.size(), 2u);
  EXPECT_EQ(capped.groups[0].buckets[0].size, 352);  // 50 + 300, padded to a multiple of 4
  EXPECT_EQ(capped.groups[0].buckets[1].offset, 352);
  EXPECT_EQ(capped.groups[0].buckets[1].size, 100);

  // Every world size and cap: the shards of all ranks give back the parameters.
  manual_seed(1);
  const TensorList values = {randn({5}), randn({3}, {.dtype = kFloat64}), randn({7})};
  for (int world : {1, 2, 3, 4, 8})
    for (double cap : {0.0, 20.0 / (1024.0 * 1024.0)}) {
      const ZeroLayout layout = ZeroLayout::build(values, world, cap);
      for (size_t g = 0; g < layout.groups.size(); ++g) {
        TensorList members, shards;
        for (size_t k : layout.groups[g].members) members.push_back(values[k]);
        for (int r = 0; r < world; ++r) shards.push_back(layout.shard_of(g, r, members, members[0]));
        const TensorList back = layout.unshard(g, shards);
        for (size_t m = 0; m < members.size(); ++m) testing::expect_close(back[m], members[m], 0, 0);
      }
    }
}

// ZeRO over one model and the plain optimizer over a copy: the same parameters after every step.
template <typename Opt, typename Options>
void expect_zero_matches_plain(Options options, int stage, double max_norm = 0.0, const CompileOptions* compile = nullptr,
                               int steps = 6) {
  const Device device = test_device();
  auto plain = make_mlp(device), sharded = make_mlp(device);
  Opt reference(plain->parameters(), options);
  ZeroRedundancyOptimizer zero(sharded->parameters(), optimizer_class<Opt>(options),
                               {.stage = stage, .bucket_cap_mb = 0.0005, .max_grad_norm = max_norm});
  std::unique_ptr<optim::CompiledStep> compiled;
  if (compile) compiled = std::make_unique<optim::CompiledStep>(zero, *compile);
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = batch(step, device);
    reference.zero_grad();
    cross_entropy((*plain)(x), y).backward();
    if (max_norm > 0) nn::utils::clip_grad_norm_(plain->parameters(), max_norm);
    reference.step();
    zero.zero_grad();
    cross_entropy((*sharded)(x), y).backward();
    if (compiled) {
      compiled->step();
    } else {
      zero.step();
    }
    expect_params_close(sharded->parameters(), plain->parameters());
  }
  if (compiled) {
    const auto& c = compiled->counters();
    EXPECT_EQ(c.compilations, 1);
    EXPECT_EQ(c.eager_fallbacks, 0);
    EXPECT_EQ(c.compiled_calls, steps - 1) << "the first step runs eagerly, the others compiled";
    EXPECT_GT(c.forward_ops.count("all_gather"), 0u);
    if (stage == 1) EXPECT_GT(c.forward_ops.count("reduce_scatter"), 0u);
    if (max_norm > 0) EXPECT_EQ(c.forward_ops.count("all_reduce"), 1u);
  }
}

TEST(ZeroRedundancyOptimizer, Stage1MatchesTheWrappedOptimizer) {
  expect_zero_matches_plain<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}, 1);
  expect_zero_matches_plain<optim::Adam>(optim::AdamOptions{.lr = 0.01}, 1);
  expect_zero_matches_plain<optim::AdamW>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}, 1);
}

TEST(ZeroRedundancyOptimizer, Stage2MatchesTheWrappedOptimizer) {
  expect_zero_matches_plain<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}, 2);
  expect_zero_matches_plain<optim::AdamW>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}, 2);
}

TEST(ZeroRedundancyOptimizer, ClipsByTheGlobalNormOfTheShards) {
  expect_zero_matches_plain<optim::Adam>(optim::AdamOptions{.lr = 0.01}, 1, 0.05);
  expect_zero_matches_plain<optim::SGD>(optim::SGDOptions{.lr = 0.1}, 2, 0.05);
  // The norm it reports is clip_grad_norm_'s.
  auto m = make_mlp(kCPU), ref = make_mlp(kCPU);
  ZeroRedundancyOptimizer zero(m->parameters(), optimizer_class<optim::SGD>(optim::SGDOptions{.lr = 0.1}),
                               {.max_grad_norm = 1e-3});
  auto [x, y] = batch(0, kCPU);
  cross_entropy((*m)(x), y).backward();
  cross_entropy((*ref)(x), y).backward();
  zero.step();
  testing::expect_close(zero.last_grad_norm(), nn::utils::get_total_norm([&] {
    TensorList g;
    for (const Tensor& p : ref->parameters()) g.push_back(p.grad());
    return g;
  }()), 1e-5, 1e-7);
  EXPECT_THROW_MSG(zero.set_max_grad_norm(-1), "max_grad_norm -1: expected a norm >= 0");
}

TEST(ZeroRedundancyOptimizer, CompiledStepTracesTheCollectives) {
  const CompileOptions aot{.backend = "aot_eager"};
  expect_zero_matches_plain<optim::Adam>(optim::AdamOptions{.lr = 0.01}, 1, 0.0, &aot);
  expect_zero_matches_plain<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9}, 1, 0.5, &aot);
  expect_zero_matches_plain<optim::AdamW>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}, 2, 0.5, &aot);
}

TEST(ZeroRedundancyOptimizer, NewLearningRateAndClipThresholdReplayWithoutARetrace) {
  auto plain = make_mlp(kCPU), sharded = make_mlp(kCPU);
  optim::Adam reference(plain->parameters(), {.lr = 0.01});
  ZeroRedundancyOptimizer zero(sharded->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}),
                               {.max_grad_norm = 0.5});
  optim::CompiledStep step(zero, {.backend = "aot_eager"});
  for (int i = 0; i < 6; ++i) {
    if (i == 3) {
      reference.set_lr(0.05);
      zero.set_lr(0.05);
      zero.set_max_grad_norm(0.1);
    }
    auto [x, y] = batch(i, kCPU);
    reference.zero_grad();
    cross_entropy((*plain)(x), y).backward();
    nn::utils::clip_grad_norm_(plain->parameters(), i < 3 ? 0.5 : 0.1);
    reference.step();
    zero.zero_grad();
    cross_entropy((*sharded)(x), y).backward();
    step.step();
    expect_params_close(sharded->parameters(), plain->parameters());
  }
  EXPECT_DOUBLE_EQ(zero.optimizer().lr(), 0.05);
  EXPECT_EQ(step.counters().compilations, 1);
  EXPECT_EQ(step.counters().compiled_calls, 5);
}

TEST(ZeroRedundancyOptimizer, CudaGraphsCaptureTheStep) {
  TG_REQUIRE_CUDA();
  const CompileOptions cg{.backend = "cudagraphs"};
  expect_zero_matches_plain<optim::Adam>(optim::AdamOptions{.lr = 0.01}, 1, 0.5, &cg);
  expect_zero_matches_plain<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9}, 2, 0.0, &cg);
}

TEST(ZeroRedundancyOptimizer, MixedDtypesShardPerDtype) {
  // A float64 parameter between float32 ones: two groups, each its own shard, both stages.
  for (int stage : {1, 2}) {
    manual_seed(4);
    TensorList a = {randn({4, 3}), randn({5}, {.dtype = kFloat64}), randn({2})}, b;
    for (Tensor& p : a) {
      p.requires_grad_(true);
      b.push_back(p.detach().clone().requires_grad_(true));
    }
    optim::Adam reference(a, {.lr = 0.05});
    ZeroRedundancyOptimizer zero(b, optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.05}), {.stage = stage});
    EXPECT_EQ(zero.shard_params().size(), 2u);
    auto loss = [](const TensorList& p) {
      return ((p[0] * p[0]).sum().to(kFloat64) + p[1].sin().sum() + (p[2] * 3.0).sum().to(kFloat64));
    };
    for (int step = 0; step < 4; ++step) {
      reference.zero_grad();
      zero.zero_grad();
      loss(a).backward();
      loss(b).backward();
      if (stage == 2)
        for (const Tensor& p : b) EXPECT_FALSE(p.grad().defined()) << "stage 2 keeps only the gradient shards";
      reference.step();
      zero.step();
      expect_params_close(b, a, 1e-6, 1e-7);
    }
  }
}

TEST(ZeroRedundancyOptimizer, Stage2AccumulatesGradientShardsOverBackwards) {
  auto plain = make_mlp(kCPU), sharded = make_mlp(kCPU);
  optim::SGD reference(plain->parameters(), {.lr = 0.1});
  ZeroRedundancyOptimizer zero(sharded->parameters(), optimizer_class<optim::SGD>(optim::SGDOptions{.lr = 0.1}),
                               {.stage = 2});
  for (int micro = 0; micro < 3; ++micro) {
    auto [x, y] = batch(micro, kCPU);
    cross_entropy((*plain)(x), y).backward();
    cross_entropy((*sharded)(x), y).backward();
  }
  reference.step();
  zero.step();
  expect_params_close(sharded->parameters(), plain->parameters());
  // A backward that leaves a parameter without a gradient is an error at the step, naming it.
  zero.zero_grad();
  sharded->parameters().back().sum().backward();
  EXPECT_THROW_MSG(zero.step(), "produced no gradient for parameter(s) 0, 1, 2");
}

TEST(ZeroRedundancyOptimizer, Stage1UnderDistributedDataParallelTakesItsShardOfTheAverages) {
  auto plain = make_mlp(kCPU);
  auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(kCPU));
  optim::Adam reference(plain->parameters(), {.lr = 0.01});
  ZeroRedundancyOptimizer zero(ddp->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}));
  for (int step = 0; step < 4; ++step) {
    auto [x, y] = batch(step, kCPU);
    reference.zero_grad();
    zero.zero_grad();
    cross_entropy((*plain)(x), y).backward();
    cross_entropy((*ddp)(x), y).backward();
    reference.step();
    zero.step();
    expect_params_close(ddp->parameters(), plain->parameters());
  }
  EXPECT_THROW_MSG(ZeroRedundancyOptimizer(ddp->parameters(), optimizer_class<optim::SGD>(optim::SGDOptions{}),
                                           {.stage = 2}),
                   "stage 2 reduces the gradients itself");
}

TEST(ZeroRedundancyOptimizer, StateIsTheWrappedOptimizersForTheShard) {
  auto m = make_mlp(kCPU);
  ZeroRedundancyOptimizer zero(m->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}));
  EXPECT_EQ(zero.state_numel(), 0);
  auto [x, y] = batch(0, kCPU);
  cross_entropy((*m)(x), y).backward();
  zero.step();
  // Two moments of every element of the shard (the whole model on one rank: 6*32+32+32*4+4 = 356).
  EXPECT_EQ(zero.layout().shard_size(0), 356);
  EXPECT_EQ(zero.state_numel(), 2 * 356 + 1);
  // Learning rates set on the wrapper (as schedulers do) reach the wrapped optimizer.
  optim::StepLR sched(zero, 1, 0.5);
  sched.step();
  EXPECT_DOUBLE_EQ(zero.optimizer().lr(), 0.005);
  EXPECT_THROW_MSG(ZeroRedundancyOptimizer(m->parameters(), optimizer_class<optim::SGD>(optim::SGDOptions{}),
                                           {.stage = 3}),
                   "stage 3: expected 1 or 2");
}

TEST(ZeroRedundancyOptimizer, StateDictIsThePlainOptimizers) {
  auto plain = make_mlp(kCPU), sharded = make_mlp(kCPU);
  optim::Adam reference(plain->parameters(), {.lr = 0.01});
  ZeroRedundancyOptimizer zero(sharded->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}));
  auto train = [&](optim::Optimizer& a, nn::Module& ma, optim::Optimizer& b, nn::Module& mb, int from, int to) {
    for (int step = from; step < to; ++step) {
      auto [x, y] = batch(step, kCPU);
      a.zero_grad();
      b.zero_grad();
      cross_entropy(ma(x), y).backward();
      cross_entropy(mb(x), y).backward();
      a.step();
      b.step();
    }
  };
  train(reference, *plain, zero, *sharded, 0, 3);
  zero.consolidate_state_dict(0);
  const auto ours = zero.state_dict(), theirs = reference.state_dict();
  ASSERT_EQ(ours.size(), theirs.size());
  for (const auto& [key, t] : theirs) {
    ASSERT_TRUE(ours.count(key)) << key;
    testing::expect_close(ours.at(key), t, 1e-6, 1e-8);
  }
  // Each loads the other's: training goes on in step.
  auto plain2 = make_mlp(kCPU), sharded2 = make_mlp(kCPU);
  for (size_t k = 0; k < plain->parameters().size(); ++k) {
    plain2->parameters()[k].detach().copy_(sharded->parameters()[k].detach());
    sharded2->parameters()[k].detach().copy_(plain->parameters()[k].detach());
  }
  optim::Adam reference2(plain2->parameters(), {.lr = 0.5});
  ZeroRedundancyOptimizer zero2(sharded2->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.5}));
  reference2.load_state_dict(ours);
  zero2.load_state_dict(theirs);
  train(reference, *plain, zero, *sharded, 3, 6);
  train(reference2, *plain2, zero2, *sharded2, 3, 6);
  expect_params_close(plain2->parameters(), plain->parameters());
  expect_params_close(sharded2->parameters(), plain->parameters());
}

TEST(ZeroRedundancyOptimizer, StateDictErrorsChangeNothing) {
  auto m = make_mlp(kCPU);
  ZeroRedundancyOptimizer zero(m->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}));
  auto [x, y] = batch(0, kCPU);
  cross_entropy((*m)(x), y).backward();
  zero.step();
  const auto before = zero.state_dict();
  auto bad = before;
  bad["state.2.step"] = full({}, 7.0);
  EXPECT_THROW_MSG(zero.load_state_dict(bad), "counts one step for all the parameters of a dtype");
  bad = before;
  bad.erase("state.1.exp_avg");
  bad.erase("state.1.exp_avg_sq");
  bad.erase("state.1.step");
  EXPECT_THROW_MSG(zero.load_state_dict(bad), "hold different optimizer state");
  bad = before;
  bad["state.0.exp_avg"] = zeros({3});
  EXPECT_THROW_MSG(zero.load_state_dict(bad), "entry \"state.0.exp_avg\" has shape [3] but the parameter has shape [32, 6]");
  bad = before;
  bad["state.9.exp_avg"] = zeros({3});
  EXPECT_THROW_MSG(zero.load_state_dict(bad), "unexpected key \"state.9.exp_avg\"");
  bad = before;
  bad["param_groups.0.beta1"] = full({}, 2.0, {.dtype = kFloat64});
  EXPECT_THROW_MSG(zero.load_state_dict(bad), "invalid hyperparameters");
  const auto after = zero.state_dict();
  for (const auto& [key, t] : before) testing::expect_close(after.at(key), t, 0, 0);
}

// Trains `steps` steps from `from`, returning the losses.
std::vector<double> train_losses(nn::Module& m, optim::Optimizer& opt, int from, int steps) {
  std::vector<double> losses;
  for (int step = from; step < from + steps; ++step) {
    auto [x, y] = batch(step, test_device());
    opt.zero_grad();
    Tensor loss = cross_entropy(m(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

TEST(ZeroCheckpoint, ResumeGivesTheUninterruptedLosses) {
  for (int stage : {1, 2}) {
    TempDir dir;
    const optim::AdamOptions o{.lr = 0.01, .weight_decay = 0.01};
    auto m = make_mlp(test_device());
    ZeroRedundancyOptimizer zero(m->parameters(), optimizer_class<optim::AdamW>(o), {.stage = stage});
    train_losses(*m, zero, 0, 3);
    zero.save_sharded(dir.str());
    EXPECT_TRUE(fs::exists(dir / "zero_index.json"));
    EXPECT_TRUE(fs::exists(dir / "zero_shard_00000_of_00001.safetensors"));
    TensorList saved_params;
    for (const Tensor& p : m->parameters()) saved_params.push_back(p.detach().clone());
    const std::vector<double> expected = train_losses(*m, zero, 3, 10);

    auto resumed = make_mlp(test_device());
    for (size_t k = 0; k < saved_params.size(); ++k) resumed->parameters()[k].detach().copy_(saved_params[k]);
    ZeroRedundancyOptimizer zero2(resumed->parameters(), optimizer_class<optim::AdamW>(o), {.stage = 3 - stage});
    zero2.load_sharded(dir.str());
    const std::vector<double> got = train_losses(*resumed, zero2, 3, 10);
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5 * std::abs(expected[i])) << i;
  }
}

TEST(ZeroCheckpoint, DamagedOrMismatchedCheckpointsAreErrorsThatChangeNothing) {
  TempDir dir, other;
  auto m = make_mlp(test_device());
  ZeroRedundancyOptimizer zero(m->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}));
  train_losses(*m, zero, 0, 2);
  zero.save_sharded(dir.str());
  train_losses(*m, zero, 2, 1);
  zero.save_sharded(other.str());
  const auto before = zero.state_dict();
  auto unchanged = [&] {
    const auto after = zero.state_dict();
    for (const auto& [key, t] : before) testing::expect_close(after.at(key), t, 0, 0);
  };

  TempDir empty;
  EXPECT_THROW_MSG(zero.load_sharded(empty.str()), "zero_index.json (no sharded checkpoint there?)");
  // Another model: the index names the parameter that differs.
  auto small = make_mlp(test_device(), 16);
  ZeroRedundancyOptimizer zero_small(small->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{}));
  EXPECT_THROW_MSG(zero_small.load_sharded(dir.str()), "parameter 2 was float32 of shape [4, 32]; this model's is "
                   "float32 of shape [4, 16]");
  // Another optimizer class.
  ZeroRedundancyOptimizer zero_sgd(make_mlp(test_device())->parameters(), optimizer_class<optim::SGD>(optim::SGDOptions{}));
  EXPECT_THROW_MSG(zero_sgd.load_sharded(dir.str()), "unexpected key");
  // A shard of another save.
  TempDir mixed;
  fs::copy_file(dir / "zero_index.json", mixed / "zero_index.json");
  fs::copy_file(other / "zero_shard_00000_of_00001.safetensors", mixed / "zero_shard_00000_of_00001.safetensors");
  EXPECT_THROW_MSG(zero.load_sharded(mixed.str()), "belongs to another save than the index");
  // A missing shard.
  fs::remove(mixed / "zero_shard_00000_of_00001.safetensors");
  EXPECT_THROW_MSG(zero.load_sharded(mixed.str()), "shard 0 of 1 is missing");
  // A truncated shard.
  const auto shard = dir / "zero_shard_00000_of_00001.safetensors";
  fs::copy_file(shard, mixed / "zero_shard_00000_of_00001.safetensors");
  fs::resize_file(mixed / "zero_shard_00000_of_00001.safetensors", fs::file_size(shard) - 16);
  EXPECT_THROW_MSG(zero.load_sharded(mixed.str()), "zero_shard_00000_of_00001.safetensors");
  // A damaged index.
  {
    std::ofstream out(mixed / "zero_index.json", std::ios::trunc);
    out << "{\"format\": \"tapegraph-zero-checkpoint\", \"version\": 1, \"num_par";
  }
  EXPECT_THROW_MSG(zero.load_sharded(mixed.str()), "zero_index.json is damaged");
  unchanged();
}

TEST(ZeroCheckpoint, ACheckpointOfTwoRanksLoadsOnOne) {
  // The files two ranks would write (each rank's block of the state, the index of a world of two),
  // made here from a one-rank save: loading them re-shards to the same full state.
  TempDir one, two;
  auto m = make_mlp(test_device());
  ZeroRedundancyOptimizer zero(m->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}));
  train_losses(*m, zero, 0, 3);
  zero.save_sharded(one.str());
  const auto full = zero.state_dict();

  nlohmann::json index = nlohmann::json::parse(std::ifstream(one / "zero_index.json"));
  const ZeroLayout layout = ZeroLayout::build(m->parameters(), 2, 0.0);
  ASSERT_EQ(layout.groups.size(), 1u);
  const ZeroGroup& g = layout.groups[0];
  nlohmann::json params = nlohmann::json::array();
  for (size_t k = 0; k < g.members.size(); ++k)
    params.push_back({{"index", g.members[k]}, {"shape", g.shapes[k]}, {"offset", g.offsets[k]}});
  index["world_size"] = 2;
  index["groups"][0]["params"] = params;
  index["groups"][0]["buckets"] = nlohmann::json::array({{0, g.buckets[0].size}});
  index["shards"] = {"a.safetensors", "b.safetensors"};
  std::ofstream(two / "zero_index.json") << index.dump();
  for (int r = 0; r < 2; ++r) {
    TensorDict tensors;
    for (const auto& [key, t] : full)
      if (key.rfind("param_groups.", 0) == 0) tensors[key] = t;
    tensors["state.0.step"] = full.at("state.0.step");
    for (const char* field : {"exp_avg", "exp_avg_sq"}) {
      TensorList members;
      for (size_t k : g.members) members.push_back(full.at("state." + std::to_string(k) + "." + field));
      tensors[std::string("state.0.") + field] = layout.shard_of(0, r, members, members[0]);
    }
    save_safetensors(two / (r == 0 ? "a.safetensors" : "b.safetensors"), tensors,
                     {{"format", "tapegraph-zero-shard"}, {"rank", std::to_string(r)}, {"world_size", "2"},
                      {"checkpoint_id", index["checkpoint_id"].get<std::string>()}});
  }
  auto m2 = make_mlp(test_device());
  ZeroRedundancyOptimizer zero2(m2->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.3}));
  zero2.load_sharded(two.str());
  const auto loaded = zero2.state_dict();
  ASSERT_EQ(loaded.size(), full.size());
  for (const auto& [key, t] : full) testing::expect_close(loaded.at(key), t, 0, 0);

  // A shard whose metadata names another rank is refused.
  fs::rename(two / "a.safetensors", two / "tmp.safetensors");
  fs::rename(two / "b.safetensors", two / "a.safetensors");
  fs::rename(two / "tmp.safetensors", two / "b.safetensors");
  EXPECT_THROW_MSG(zero2.load_sharded(two.str()), "a.safetensors is not shard 0 of 2 (its metadata says rank '1' of '2')");
}

TEST(ZeroRedundancyOptimizer, Stage2UnderACompiledModel) {
  // The compiled backward graph reduce-scatters each bucket itself and delivers the blocks to the
  // shard parameters' .grad (the hooks see no gradient of the parameters).
  auto plain = make_mlp(kCPU), sharded = make_mlp(kCPU);
  optim::AdamW reference(plain->parameters(), {.lr = 0.01, .weight_decay = 0.1});
  ZeroRedundancyOptimizer zero(sharded->parameters(),
                               optimizer_class<optim::AdamW>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}),
                               {.stage = 2, .bucket_cap_mb = 0.0005});
  auto loss_fn = [&sharded](const Tensor& x, const Tensor& y) { return cross_entropy((*sharded)(x), y); };
  Compiled<decltype(loss_fn)> compiled(loss_fn, {.backend = "aot_eager"});
  optim::CompiledStep step(zero, {.backend = "aot_eager"});
  for (int i = 0; i < 5; ++i) {
    auto [x, y] = batch(i, kCPU);
    reference.zero_grad();
    cross_entropy((*plain)(x), y).backward();
    reference.step();
    zero.zero_grad();
    compiled(x, y).backward();
    for (const Tensor& p : sharded->parameters()) EXPECT_FALSE(p.grad().defined());
    step.step();
    expect_params_close(sharded->parameters(), plain->parameters());
  }
  EXPECT_EQ(compiled.counters().compilations, 1);
  EXPECT_EQ(compiled.counters().backward_ops.at("reduce_scatter"), static_cast<int>(zero.layout().groups[0].buckets.size()));
  EXPECT_EQ(step.counters().compilations, 1);
}

}  // namespace
}  // namespace tg::distributed
