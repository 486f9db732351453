// tg::data: TensorDataset, samplers (DistributedSampler's shards), DataLoader batching, shuffling,
// drop_last, device delivery, and batches feeding compiled functions without re-recording.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/dataloader.h"
#include "graphs/counters.h"
#include "support/test_support.h"
#include "tapegraph.h"
#include "tensor/memory/pinned.h"

namespace tg {
namespace {

using data::DataLoader;
using data::TensorDataset;

// 10 samples: x row i = [2i, 2i + 1] (float32), y = i (int64).
TensorDataset ten() {
  return TensorDataset({arange(20, {.dtype = kFloat32}).reshape({10, 2}), arange(10, {.dtype = kInt64})});
}

// The labels of every batch of one epoch, checking that x and y rows stay together.
std::vector<std::vector<int64_t>> epoch_labels(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<std::vector<int64_t>> out;
  while (auto batch = loader.next()) {
    const Tensor x = (*batch)[0].cpu();
    const Tensor y = (*batch)[1].cpu();
    EXPECT_EQ(x.size(0), y.size(0));
    const auto xs = x.to_vector<float>();
    const auto ys = y.to_vector<int64_t>();
    for (size_t r = 0; r < ys.size(); ++r) EXPECT_EQ(xs[2 * r], 2.0f * static_cast<float>(ys[r]));
    out.push_back(ys);
  }
  return out;
}

TEST(TensorDataset, RejectsMismatchedLengths) {
  EXPECT_THROW_MSG(TensorDataset({zeros({3, 2}), zeros({4})}), "tensor 1 has 4 rows but tensor 0 has 3");
  EXPECT_THROW_MSG(TensorDataset({zeros({})}), "tensor 0 must be defined with at least 1 dimension");
  EXPECT_THROW_MSG(TensorDataset({}), "expected at least one tensor");
}

TEST(DataLoader, SequentialBatchesWithAndWithoutDropLast) {
  DataLoader keep(ten(), {.batch_size = 4});
  EXPECT_EQ(keep.num_batches(), 3);
  EXPECT_EQ(epoch_labels(keep, 0), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  // Static buffers give the same batches, the short last one included (checked row by row above).
  DataLoader fixed(ten(), {.batch_size = 4, .static_buffers = true});
  EXPECT_EQ(epoch_labels(fixed, 0), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  DataLoader drop(ten(), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(drop.num_batches(), 2);
  EXPECT_EQ(epoch_labels(drop, 0), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_THROW_MSG(DataLoader(ten(), {.batch_size = 0}), "batch_size must be at least 1, got 0");
}

TEST(DataLoader, ShuffleIsSeededAndChangesPerEpoch) {
  DataLoader a(ten(), {.batch_size = 3, .shuffle = true, .seed = 7});
  DataLoader b(ten(), {.batch_size = 3, .shuffle = true, .seed = 7});
  DataLoader c(ten(), {.batch_size = 3, .shuffle = true, .seed = 8});
  const auto a0 = epoch_labels(a, 0), a1 = epoch_labels(a, 1);
  EXPECT_EQ(a0, epoch_labels(b, 0));
  EXPECT_EQ(a1, epoch_labels(b, 1));
  EXPECT_NE(a0, a1);
  EXPECT_NE(a0, epoch_labels(c, 0));
  // Every sample exactly once per epoch.
  std::vector<int64_t> all;
  for (auto& v : a0) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Restarting an epoch (also mid-way) gives the same order again.
  a.start_epoch(1);
  a.next();
  EXPECT_EQ(epoch_labels(a, 1), a1);
}

TEST(DistributedSampler, ShardsAreDisjointEqualAndReshuffledPerEpoch) {
  std::set<int64_t> seen;
  std::vector<int64_t> rank0_epoch0;
  for (int64_t rank = 0; rank < 3; ++rank) {
    data::DistributedSampler s(10, 3, rank, true, 5);
    EXPECT_EQ(s.num_samples(), 4);
    const auto idx = s.indices(0);
    EXPECT_EQ(idx.size(), 4u);
    seen.insert(idx.begin(), idx.end());
    if (rank == 0) rank0_epoch0 = idx;
    EXPECT_EQ(idx, data::DistributedSampler(10, 3, rank, true, 5).indices(0)) << "same seed, same shard";
  }
  EXPECT_EQ(seen.size(), 10u) << "the padded shards cover every sample";
  EXPECT_NE(data::DistributedSampler(10, 3, 0, true, 5).indices(1), rank0_epoch0);
  data::DistributedSampler dropped(10, 3, 2, false, 0, true);
  EXPECT_EQ(dropped.indices(0), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_THROW_MSG(data::DistributedSampler(10, 2, 2), "rank 2 is outside [0, 2)");
  // A loader over one rank's shard.
  DataLoader loader(ten(), {.batch_size = 2}, std::make_shared<data::DistributedSampler>(10, 2, 1, false));
  EXPECT_EQ(epoch_labels(loader, 0), (std::vector<std::vector<int64_t>>{{1, 3}, {5, 7}, {9}}));
}

TEST(DataLoader, DeliversToCudaThroughPinnedMemory) {
  TG_REQUIRE_CUDA();
  const Tensor pinned = cuda::empty_pinned({4, 2}, kFloat32);
  EXPECT_TRUE(pinned.is_cpu());
  // Fresh device tensors (a side-stream copy), then static buffers (one copy per full batch, tensor by
  // tensor for the short last one).
  for (bool fixed : {false, true}) {
    DataLoader loader(ten(), {.batch_size = 4, .shuffle = true, .seed = 3, .device = cuda_device(0),
                              .static_buffers = fixed});
    DataLoader on_cpu(ten(), {.batch_size = 4, .shuffle = true, .seed = 3});
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      loader.start_epoch(epoch);
      on_cpu.start_epoch(epoch);
      while (auto batch = loader.next()) {
        auto ref = on_cpu.next();
        ASSERT_TRUE(ref.has_value());
        EXPECT_TRUE((*batch)[0].is_cuda());
        EXPECT_EQ((*batch)[1].cpu().to_vector<int64_t>(), (*ref)[1].to_vector<int64_t>());
        EXPECT_EQ((*batch)[0].cpu().to_vector<float>(), (*ref)[0].to_vector<float>());
      }
    }
  }
}

// Loader batches of equal shapes replay the compiled graphs: one compilation, no recompiles, and
// with cudagraphs one recording then replays.
void expect_no_rerecording(const std::string& backend, Device device) {
  DataLoader loader(ten(), {.batch_size = 4, .shuffle = true, .drop_last = true, .device = device,
                            .static_buffers = backend == "cudagraphs"});
  Tensor w = ones({2}, {.device = device}).requires_grad_();
  auto f = [&](const Tensor& x, const Tensor& y) { return (x.mul(w).sum(Shape{1}) - y.to(kFloat32)).pow(2).mean(); };
  Compiled<decltype(f)> compiled(f, {.backend = backend});
  int steps = 0;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      Tensor loss = compiled((*batch)[0], (*batch)[1]);
      const double expected = f((*batch)[0], (*batch)[1]).item<float>();
      EXPECT_NEAR(loss.item<float>(), expected, 1e-4 * std::max(1.0, expected));
      loss.backward();
      ++steps;
    }
  }
  const auto& c = compiled.counters();
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(c.compilations, 1);
  EXPECT_EQ(c.recompiles, 0);
  EXPECT_EQ(c.eager_fallbacks, 0);
  EXPECT_EQ(c.compiled_calls, 8);
  if (backend == "cudagraphs") {
    EXPECT_EQ(c.rerecords, 0);
    EXPECT_EQ(c.cudagraph_skips.size(), 0u);
    EXPECT_GT(c.replays, 0);
  }
}

TEST(DataLoader, BatchesFeedCompiledFunctionsWithoutRecompiling) { expect_no_rerecording("aot_eager", kCPU); }

TEST(DataLoader, StaticBuffersKeepTheirAddresses) {
  DataLoader loader(ten(), {.batch_size = 4, .shuffle = true, .seed = 1, .static_buffers = true});
  DataLoader fresh(ten(), {.batch_size = 4, .shuffle = true, .seed = 1});
  loader.start_epoch(0);
  fresh.start_epoch(0);
  const void* first = nullptr;
  while (auto batch = loader.next()) {
    auto ref = fresh.next();
    if (!first) first = (*batch)[0].raw_data();
    EXPECT_EQ((*batch)[0].raw_data(), first);
    EXPECT_EQ((*batch)[1].to_vector<int64_t>(), (*ref)[1].to_vector<int64_t>());
  }
}

// The labels of each batch a range-for over the loader visits.
std::vector<std::vector<int64_t>> range_labels(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (TensorList& batch : loader) out.push_back(batch[1].to_vector<int64_t>());
  return out;
}

TEST(DataLoader, RangeForRunsOneEpochPerLoopInOrder) {
  DataLoader loader(ten(), {.batch_size = 3, .shuffle = true, .seed = 5});
  DataLoader reference(ten(), {.batch_size = 3, .shuffle = true, .seed = 5});
  EXPECT_EQ(loader.epoch(), -1);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(range_labels(loader), epoch_labels(reference, epoch)) << "epoch " << epoch;
    EXPECT_EQ(loader.epoch(), epoch);
    EXPECT_EQ(loader.batch_index(), 4);
  }
}

TEST(DataLoader, RangeForContinuesAnEpochLeftByBreak) {
  DataLoader loader(ten(), {.batch_size = 2, .shuffle = true, .seed = 3});
  DataLoader reference(ten(), {.batch_size = 2, .shuffle = true, .seed = 3});
  const auto whole = epoch_labels(reference, 0);
  std::vector<std::vector<int64_t>> seen;
  for (TensorList& batch : loader) {
    seen.push_back(batch[1].to_vector<int64_t>());
    if (seen.size() == 2) break;
  }
  EXPECT_EQ(loader.batch_index(), 2);
  for (auto& labels : range_labels(loader)) seen.push_back(labels);
  EXPECT_EQ(seen, whole);
  EXPECT_EQ(range_labels(loader), epoch_labels(reference, 1));  // then the next epoch
}

TEST(DataLoader, StartEpochAtABatchResumesMidEpoch) {
  DataLoader loader(ten(), {.batch_size = 3, .shuffle = true, .seed = 9, .drop_last = true});
  DataLoader reference(ten(), {.batch_size = 3, .shuffle = true, .seed = 9, .drop_last = true});
  const auto whole = epoch_labels(reference, 4);
  loader.start_epoch(4, 1);
  EXPECT_EQ(loader.epoch(), 4);
  EXPECT_EQ(loader.batch_index(), 1);
  EXPECT_EQ(range_labels(loader), std::vector<std::vector<int64_t>>(whole.begin() + 1, whole.end()));
  EXPECT_EQ(loader.batch_index(), 3);
  // Resuming at the very end of an epoch: the range-for goes on with the next one.
  loader.start_epoch(4, 3);
  EXPECT_EQ(range_labels(loader), epoch_labels(reference, 5));
  EXPECT_EQ(loader.epoch(), 5);
}

TEST(DataLoader, StartEpochRejectsABatchPastTheEpoch) {
  DataLoader loader(ten(), {.batch_size = 3});
  EXPECT_THROW_MSG(loader.start_epoch(0, 5), "first_batch must be in [0, 4]");
  EXPECT_THROW_MSG(loader.start_epoch(0, -1), "got -1");
}

TEST(DataLoader, BatchesReplayCudaGraphsWithoutReRecording) {
  TG_REQUIRE_CUDA();
  expect_no_rerecording("cudagraphs", cuda_device(0));
}

}  // namespace
}  // namespace tg
