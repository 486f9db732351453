// The counter-based Philox4x32-10 generator shared by the CPU and CUDA random kernels.
#pragma once

#include <cstdint>

#include "ops/hd.h"

namespace tg {

// A seed plus an offset into the Philox counter stream; each random op reserves a range of offsets.
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// Global generator: hands each random op its own state and advances the offset past its draws.
class Generator {
 public:
  static Generator& global();
  void set_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  // Reserves `count` 128-bit blocks and returns the state to draw them from.
  PhiloxState reserve(uint64_t count);
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }

 private:
  uint64_t seed_ = 67280421310721ull;
  uint64_t offset_ = 0;
};

}  // namespace tg
