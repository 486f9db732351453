// The counter-based Philox4x32-10 generator shared by the CPU and CUDA random kernels.
#pragma once

#include <cstdint>

#include "tensor/hd.h"

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
  // Restarts the stream from offset 0 under a new seed.
  void set_seed(uint64_t seed);
  // Reserves `count` 128-bit blocks and returns the state to draw them from.
  PhiloxState reserve(uint64_t count);
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  // The seed and offset the next reservation starts from.
  PhiloxState state() const;
  // Continues the stream from `state` (tracing restores the state it found, so that it draws nothing).
  void set_state(PhiloxState state);

 private:
  uint64_t seed_ = 67280421310721ull;
  uint64_t offset_ = 0;
};

// Randomness inside a CUDA graph being recorded on this thread: random kernels add device_shift[0]
// to their offsets and draw under the seed device_shift[1], so each replay can move every draw to
// fresh counters of the generator's current seed by writing two values, and they report the range
// of Philox blocks they drew.
struct CaptureRandomness {
  const int64_t* device_shift = nullptr;  // two values: offset shift, seed
  uint64_t min_offset = UINT64_MAX;  // lowest block offset any recorded kernel drew
  uint64_t end_offset = 0;           // one past the highest
  // Notes a kernel drawing `blocks` blocks from `offset`.
  void note(uint64_t offset, uint64_t blocks) {
    if (offset < min_offset) min_offset = offset;
    if (offset + blocks > end_offset) end_offset = offset + blocks;
  }
  bool any() const { return end_offset > 0; }
};

// The randomness context of the graph being recorded on this thread (null when none).
CaptureRandomness* current_capture_randomness();
// Installs (or, with null, clears) the context for this thread.
void set_capture_randomness(CaptureRandomness* context);

}  // namespace tg
