// Samplers: the order in which a DataLoader visits a data set's indices, per epoch.
#pragma once

#include <cstdint>
#include <vector>

namespace tg::data {

// Decides which indices an epoch visits, and in which order.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices of epoch `epoch` (a function of the epoch: the same epoch gives the same order).
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
};

// A reproducible permutation of 0..n-1 from (seed, epoch); the same on every platform.
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch);

// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n) : n_(n) {}
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t n_;
};

// A new permutation each epoch, drawn from a generator seeded with `seed`.
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t n_;
  uint64_t seed_;
};

// torch.utils.data.DistributedSampler: every rank draws the same permutation (shared seed,
// reshuffled per epoch), pads it by wrapping around to a multiple of world_size (or, with
// drop_last, cuts it down), and takes every world_size-th index starting at its rank, so the
// ranks' shards are disjoint and of equal length.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t n, int64_t world_size, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<int64_t> indices(int64_t epoch) const override;
  // Samples per rank and epoch.
  int64_t num_samples() const { return num_samples_; }

 private:
  int64_t n_, world_size_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
};

}  // namespace tg::data
