// The host random fill: runs a distribution over the Philox blocks of a contiguous output, the
// words generated a batch of blocks at a time (ops/random/cpu/philox_batch.h) and large outputs
// split over threads. Element i still comes from block offset + i / kPerBlock, so the values do
// not depend on the split (ops/random/random_dist.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/core/cpu/parallel_for.h"
#include "ops/random/cpu/philox_batch.h"
#include "ops/random/random.h"

namespace tg::cpu {

// Elements below which a fill stays on one thread, and the least each thread gets.
inline constexpr int64_t kRandomFillGrain = int64_t{1} << 16;

// Writes block(words of block offset + b) to elements [b * kPerBlock, (b + 1) * kPerBlock) of
// out[0, n), for every block b the n elements need (the last one possibly in part).
template <typename T, typename Block>
void philox_fill(T* out, int64_t n, PhiloxState state, const Block& block) {
  constexpr int64_t per = Block::kPerBlock;
  constexpr int64_t batch_elements = kPhiloxBatch * per;
  const int64_t blocks = (n + per - 1) / per;
  const int64_t batches = (blocks + kPhiloxBatch - 1) / kPhiloxBatch;
  const int64_t grain = std::max<int64_t>(1, kRandomFillGrain / batch_elements);
  parallel_for(batches, grain, [&](int64_t batch_begin, int64_t batch_end) {
    PhiloxBatch words;
    for (int64_t g = batch_begin; g < batch_end; ++g) {
      const int64_t first = g * kPhiloxBatch;
      philox_batch(state.seed, state.offset + static_cast<uint64_t>(first), words);
      const int64_t count = std::min<int64_t>(kPhiloxBatch, blocks - first);
      T* dst = out + first * per;
      const int64_t left = n - first * per;  // elements this batch may write
      for (int64_t b = 0; b < count; ++b) {
        const uint32_t w[4] = {words.w[0][b], words.w[1][b], words.w[2][b], words.w[3][b]};
        T v[4];
        block(w, v);
        if ((b + 1) * per <= left) {
          for (int64_t j = 0; j < per; ++j) dst[b * per + j] = v[j];
        } else {
          for (int64_t j = 0; b * per + j < left; ++j) dst[b * per + j] = v[j];
        }
      }
    }
  });
}

}  // namespace tg::cpu
