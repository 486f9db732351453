// Philox4x32-10 over runs of consecutive blocks, laid out lane by lane so that the compiler
// vectorizes the rounds (AVX2 or AVX-512 where the CPU has them). The words are exactly those of
// philox_block (ops/random/philox.h): integer arithmetic, the same on every instruction set.
#pragma once

#include <cstdint>

namespace tg::cpu {

// Blocks one PhiloxBatch holds.
inline constexpr int kPhiloxBatch = 32;

// The four output words of kPhiloxBatch consecutive blocks: word j of block b at w[j][b].
struct PhiloxBatch {
  alignas(64) uint32_t w[4][kPhiloxBatch];
};

// Fills `out` with philox_block(seed, first + b) for b in [0, kPhiloxBatch).
void philox_batch(uint64_t seed, uint64_t first, PhiloxBatch& out);

}  // namespace tg::cpu
