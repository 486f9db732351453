// ZeroRedundancyOptimizer over 2 to 4 ranks of the CPU backend, ranks as threads of this process:
// parameters equal DistributedDataParallel with the same optimizer (stages 1 and 2, clipping),
// optimizer state per rank is 1/world_size of the whole, the consolidated state is the plain
// optimizer's, and a checkpoint saved by two ranks resumes on one, two, three or four with the
// losses of the uninterrupted run; an incomplete checkpoint fails on every rank.
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <random>

#include "distributed/collectives/collectives.h"
#include "distributed/ddp/ddp.h"
#include "distributed/zero/zero_optimizer.h"
#include "support/test_support.h"
#include "support/thread_ranks.h"

namespace tg::distributed {
namespace {

namespace fs = std::filesystem;
using testing::run_ranks;

constexpr int64_t kRows = 12;  // the whole batch: divides evenly over 1 to 4 ranks
constexpr int kMaxWorld = 4;

std::shared_ptr<nn::Sequential> make_mlp() {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, 32));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(32, 4));
  return m;
}

// The whole batches of `steps` steps, made on the main thread (the generator is global).
std::vector<std::pair<Tensor, Tensor>> make_batches(int steps) {
  std::vector<std::pair<Tensor, Tensor>> out;
  manual_seed(77);
  for (int s = 0; s < steps; ++s) out.emplace_back(randn({kRows, 6}), randint(0, 4, {kRows}));
  return out;
}

// Rank r's rows of a whole batch.
std::pair<Tensor, Tensor> slice(const std::pair<Tensor, Tensor>& b, int rank, int world) {
  const int64_t n = kRows / world;
  return {b.first.narrow(0, rank * n, n), b.second.narrow(0, rank * n, n)};
}

// The group as the shared handle the optimizers take (the thread owns it).
std::shared_ptr<ProcessGroup> handle(ProcessGroup& g) { return {&g, [](ProcessGroup*) {}}; }

// Models for every rank, made on the main thread.
std::vector<std::shared_ptr<nn::Sequential>> models(int count) {
  std::vector<std::shared_ptr<nn::Sequential>> out;
  for (int i = 0; i < count; ++i) out.push_back(make_mlp());
  return out;
}

void expect_params_close(const TensorList& a, const TensorList& b, double rtol, double atol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) testing::expect_close(a[k].detach(), b[k].detach(), rtol, atol);
}

// ZeRO and DDP side by side on every rank, each rank on its rows of the batch: equal parameters
// after every step.
template <typename Opt, typename Options>
void expect_zero_matches_ddp(int world, Options options, int stage, double max_norm) {
  SCOPED_TRACE("world " + std::to_string(world) + " stage " + std::to_string(stage));
  const auto batches = make_batches(6);
  auto zero_models = models(world), ddp_models = models(world);
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    nn::DistributedDataParallel ddp(ddp_models[r], {.process_group = handle(group)});
    Opt ddp_opt(ddp.parameters(), options);
    ZeroRedundancyOptimizer zero(zero_models[r]->parameters(), optimizer_class<Opt>(options),
                                 {.process_group = handle(group), .stage = stage, .bucket_cap_mb = 0.0005,
                                  .max_grad_norm = max_norm});
    for (const auto& b : batches) {
      auto [x, y] = slice(b, r, world);
      ddp_opt.zero_grad();
      cross_entropy(ddp(x), y).backward();
      if (max_norm > 0) nn::utils::clip_grad_norm_(ddp.parameters(), max_norm);
      ddp_opt.step();
      zero.zero_grad();
      cross_entropy((*zero_models[r])(x), y).backward();
      zero.step();
      expect_params_close(zero_models[r]->parameters(), ddp_models[r]->parameters(), 1e-5, 1e-6);
    }
  });
}

TEST(ZeroRanks, Stage1MatchesDistributedDataParallel) {
  for (int world : {2, 3, 4}) {
    expect_zero_matches_ddp<optim::Adam>(world, optim::AdamOptions{.lr = 0.01}, 1, 0.0);
    expect_zero_matches_ddp<optim::SGD>(world, optim::SGDOptions{.lr = 0.1, .momentum = 0.9}, 1, 0.0);
  }
  expect_zero_matches_ddp<optim::AdamW>(2, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}, 1, 0.05);
}

TEST(ZeroRanks, Stage2MatchesDistributedDataParallel) {
  for (int world : {2, 3}) {
    expect_zero_matches_ddp<optim::AdamW>(world, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}, 2, 0.0);
    expect_zero_matches_ddp<optim::SGD>(world, optim::SGDOptions{.lr = 0.1, .momentum = 0.9}, 2, 0.05);
  }
}

TEST(ZeroRanks, CompiledStepsMatchDistributedDataParallel) {
  // The collectives of the step (reduce_scatter, all_reduce of the norm, all_gather) as graph nodes.
  const int world = 2;
  const auto batches = make_batches(5);
  for (int stage : {1, 2}) {
    auto zero_models = models(world), ddp_models = models(world);
    run_ranks(world, [&](ProcessGroup& group) {
      const int r = group.rank();
      nn::DistributedDataParallel ddp(ddp_models[r], {.process_group = handle(group)});
      optim::Adam ddp_opt(ddp.parameters(), {.lr = 0.01});
      ZeroRedundancyOptimizer zero(zero_models[r]->parameters(),
                                   optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}),
                                   {.process_group = handle(group), .stage = stage, .max_grad_norm = 0.5});
      optim::CompiledStep step(zero, {.backend = "aot_eager"});
      for (const auto& b : batches) {
        auto [x, y] = slice(b, r, world);
        ddp_opt.zero_grad();
        cross_entropy(ddp(x), y).backward();
        nn::utils::clip_grad_norm_(ddp.parameters(), 0.5);
        ddp_opt.step();
        zero.zero_grad();
        cross_entropy((*zero_models[r])(x), y).backward();
        step.step();
        expect_params_close(zero_models[r]->parameters(), ddp_models[r]->parameters(), 1e-5, 1e-6);
      }
      EXPECT_EQ(step.counters().compilations, 1);
      EXPECT_EQ(step.counters().compiled_calls, 4);
    });
  }
}

TEST(ZeroRanks, ASkipFlagOfOneRankSkipsEveryRank) {
  // GradScaler's found-inf flag, set on rank 1 only: no rank updates, and both flags read 1 after.
  const int world = 2;
  const auto batches = make_batches(1);
  auto ms = models(world);
  std::vector<Tensor> flags;
  for (int r = 0; r < world; ++r) flags.push_back(full({}, r == 1 ? 1.0 : 0.0));
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    for (int stage : {1, 2}) {
      ZeroRedundancyOptimizer zero(ms[r]->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.1}),
                                   {.process_group = handle(group), .stage = stage});
      TensorList before;
      for (const Tensor& p : ms[r]->parameters()) before.push_back(p.detach().clone());
      auto [x, y] = slice(batches[0], r, world);
      zero.zero_grad();
      cross_entropy((*ms[r])(x), y).backward();
      zero.set_skip_if(flags[r]);
      zero.step();
      EXPECT_EQ(flags[r].item<float>(), 1.f);
      expect_params_close(ms[r]->parameters(), before, 0, 0);
    }
  });
}

TEST(ZeroRanks, Stage1UnderDistributedDataParallel) {
  // PyTorch's arrangement: DDP averages the gradients, ZeRO updates its shard and gathers.
  const int world = 2;
  const auto batches = make_batches(4);
  auto zero_models = models(world), ddp_models = models(world);
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    nn::DistributedDataParallel ddp(ddp_models[r], {.process_group = handle(group)});
    nn::DistributedDataParallel wrapped(zero_models[r], {.process_group = handle(group)});
    optim::Adam ddp_opt(ddp.parameters(), {.lr = 0.01});
    ZeroRedundancyOptimizer zero(wrapped.parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}),
                                 {.process_group = handle(group)});
    for (const auto& b : batches) {
      auto [x, y] = slice(b, r, world);
      ddp_opt.zero_grad();
      zero.zero_grad();
      cross_entropy(ddp(x), y).backward();
      cross_entropy(wrapped(x), y).backward();
      ddp_opt.step();
      zero.step();
      expect_params_close(wrapped.parameters(), ddp.parameters(), 1e-5, 1e-6);
    }
  });
}

TEST(ZeroRanks, StatePerRankIsOneWorldSizeth) {
  // 6*32 + 32 + 32*4 + 4 = 356 parameters: two Adam moments per element of the shard, and a step.
  for (int world : {1, 2, 4}) {
    auto ms = models(world);
    const auto batches = make_batches(1);
    std::vector<int64_t> state(static_cast<size_t>(world));
    run_ranks(world, [&](ProcessGroup& group) {
      const int r = group.rank();
      ZeroRedundancyOptimizer zero(ms[r]->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{}),
                                   {.process_group = handle(group)});
      auto [x, y] = slice(batches[0], r, world);
      cross_entropy((*ms[r])(x), y).backward();
      zero.step();
      state[static_cast<size_t>(r)] = zero.state_numel();
      EXPECT_EQ(zero.shard_params()[0].numel(), (356 + world - 1) / world);
    });
    for (int64_t n : state) EXPECT_EQ(n, 2 * ((356 + world - 1) / world) + 1) << "world " << world;
  }
}

TEST(ZeroRanks, ConsolidatedStateIsThePlainOptimizers) {
  const int world = 2;
  const auto batches = make_batches(3);
  // The plain optimizer on the whole batches.
  auto plain = make_mlp();
  optim::Adam reference(plain->parameters(), {.lr = 0.01});
  for (const auto& [x, y] : batches) {
    reference.zero_grad();
    cross_entropy((*plain)(x), y).backward();
    reference.step();
  }
  const auto expected = reference.state_dict();
  auto ms = models(world);
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    ZeroRedundancyOptimizer zero(ms[r]->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}),
                                 {.process_group = handle(group), .stage = 2});
    for (const auto& b : batches) {
      auto [x, y] = slice(b, r, world);
      zero.zero_grad();
      cross_entropy((*ms[r])(x), y).backward();
      zero.step();
    }
    zero.consolidate_state_dict(1);
    if (r == 0) {
      EXPECT_THROW_MSG(zero.state_dict(), "Optimizer state has not been consolidated on this rank (0)");
      return;
    }
    const auto got = zero.state_dict();
    ASSERT_EQ(got.size(), expected.size());
    for (const auto& [key, t] : expected) {
      ASSERT_TRUE(got.count(key)) << key;
      testing::expect_close(got.at(key), t, 1e-4, 1e-7);
    }
  });
}

// Trains steps [from, to) on `world` ranks from `params` (or the initial model) and the checkpoint in
// `load_dir` (if any), saving a checkpoint to `save_dir` after step `save_at`; returns the losses of the
// whole batches (the mean of the ranks' equal slices) and, through `saved`, the parameters at the save.
std::vector<double> run(int world, int stage, int from, int to, const TensorList* params, const std::string& load_dir,
                        const std::string& save_dir = "", int save_at = -1, TensorList* saved = nullptr) {
  const auto batches = make_batches(to);
  auto ms = models(world);
  if (params)
    for (auto& m : ms)
      for (size_t k = 0; k < params->size(); ++k) m->parameters()[k].detach().copy_((*params)[k]);
  std::vector<std::vector<double>> losses(static_cast<size_t>(world));
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    ZeroRedundancyOptimizer zero(ms[r]->parameters(),
                                 optimizer_class<optim::AdamW>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.05}),
                                 {.process_group = handle(group), .stage = stage, .max_grad_norm = 1.0});
    if (!load_dir.empty()) zero.load_sharded(load_dir);
    for (int step = from; step < to; ++step) {
      auto [x, y] = slice(batches[static_cast<size_t>(step)], r, world);
      zero.zero_grad();
      Tensor loss = cross_entropy((*ms[r])(x), y);
      loss.backward();
      zero.step();
      losses[static_cast<size_t>(r)].push_back(loss.item<double>());
      if (step == save_at) {
        zero.save_sharded(save_dir);
        if (r == 0 && saved)
          for (const Tensor& p : ms[0]->parameters()) saved->push_back(p.detach().clone());
      }
    }
  });
  std::vector<double> mean(losses[0].size(), 0.0);
  for (const auto& l : losses)
    for (size_t i = 0; i < l.size(); ++i) mean[i] += l[i] / world;
  return mean;
}

TEST(ZeroRanks, CheckpointOfTwoRanksResumesOnOneToFour) {
  const fs::path dir = fs::temp_directory_path() / ("tg_zero_ranks_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  for (int stage : {1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    TensorList saved;
    // The uninterrupted run: 3 steps, a save, 10 more.
    const std::vector<double> uninterrupted = run(2, stage, 0, 13, nullptr, "", dir.string(), 2, &saved);
    const std::vector<double> expected(uninterrupted.begin() + 3, uninterrupted.end());
    ASSERT_EQ(saved.size(), 4u);
    for (int world : {1, 2, 3, 4}) {
      const std::vector<double> got = run(world, 3 - stage, 3, 13, &saved, dir.string());
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], expected[i], 1e-5 * std::abs(expected[i])) << "world " << world << ", step " << 3 + i;
    }
  }
  fs::remove_all(dir);
}

TEST(ZeroRanks, AnIncompleteCheckpointFailsOnEveryRankAndChangesNothing) {
  const fs::path dir = fs::temp_directory_path() / ("tg_zero_ranks_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const int world = 2;
  const auto batches = make_batches(2);
  auto ms = models(world);
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    ZeroRedundancyOptimizer zero(ms[r]->parameters(), optimizer_class<optim::Adam>(optim::AdamOptions{.lr = 0.01}),
                                 {.process_group = handle(group)});
    for (const auto& b : batches) {
      auto [x, y] = slice(b, r, world);
      zero.zero_grad();
      cross_entropy((*ms[r])(x), y).backward();
      zero.step();
    }
    zero.save_sharded(dir.string());
    const auto before = zero.optimizer().state_dict();
    group.barrier("saved");
    if (r == 0) fs::remove(dir / "zero_shard_00001_of_00002.safetensors");
    group.barrier("removed");
    EXPECT_THROW_MSG(zero.load_sharded(dir.string()), "shard 1 of 2 is missing");
    const auto after = zero.optimizer().state_dict();
    for (const auto& [key, t] : before) testing::expect_close(after.at(key), t, 0, 0);
  });
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tg::distributed
