#include "data/sampler.h"

#include "tensor/check.h"

namespace tg::data {

std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch) {
  TG_CHECK(n >= 0, "[permutation] n must be non-negative, got ", n);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  // splitmix64 of (seed, epoch) seeds a PCG-style LCG; Fisher-Yates with it.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(epoch + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  uint64_t state = z ^ (z >> 31);
  for (size_t i = v.size(); i > 1; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(v[i - 1], v[(state >> 33) % i]);
  }
  return v;
}

namespace {

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace

std::vector<int64_t> SequentialSampler::indices(int64_t) const { return iota(n_); }

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const { return permutation(n_, seed_, epoch); }

DistributedSampler::DistributedSampler(int64_t n, int64_t world_size, int64_t rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(n), world_size_(world_size), rank_(rank), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  TG_CHECK(world_size >= 1, "[DistributedSampler] world_size must be at least 1, got ", world_size);
  TG_CHECK(rank >= 0 && rank < world_size, "[DistributedSampler] rank ", rank, " is outside [0, ", world_size, ")");
  TG_CHECK(n >= 0, "[DistributedSampler] data set size must be non-negative, got ", n);
  num_samples_ = drop_last ? n / world_size : (n + world_size - 1) / world_size;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all = shuffle_ ? permutation(n_, seed_, epoch) : iota(n_);
  const int64_t total = num_samples_ * world_size_;
  if (drop_last_) {
    all.resize(static_cast<size_t>(total));
  } else {
    for (size_t i = 0; all.size() < static_cast<size_t>(total) && !all.empty(); ++i) all.push_back(all[i]);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += world_size_) mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace tg::data
