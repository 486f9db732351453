// The kernels behind the random ops: one call that writes the draws of a generator state into a
// contiguous tensor on the host or a CUDA device, for the factories (rand, randn, randint) and the
// in-place fills alike, so that both produce the same element i for the same state.
#pragma once

#include <cstdint>
#include <string_view>

#include "ops/random/random.h"
#include "tensor/tensor.h"

namespace tg {

// Which distribution a random op draws.
enum class RandomKind : uint8_t { Uniform, Normal, Randint };

// Elements per Philox block for a distribution and dtype (see ops/random/random_dist.h).
int64_t elements_per_block(RandomKind kind, DType dtype);
// The Philox blocks a draw of `numel` elements reserves: ceil(numel / elements_per_block).
uint64_t random_blocks(RandomKind kind, DType dtype, int64_t numel);

// Writes the draws of `state` into the contiguous tensor `out` (CPU or CUDA); Randint draws on
// [low, low + range). `op` names the caller in errors.
void draw_random(const Tensor& out, RandomKind kind, PhiloxState state, std::string_view op, int64_t low = 0,
                 uint64_t range = 0);

}  // namespace tg
