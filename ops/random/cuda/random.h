// CUDA launchers for the random factories (curand's Philox device API); defined in random.cu.
#pragma once

#include <cstdint>

#include "ops/random/random.h"
#include "tensor/dtype.h"

namespace tg {

// Fills n contiguous elements of a float32/float64 device buffer with uniform [0, 1) draws.
void philox_uniform_cuda(void* out, DType dtype, int64_t n, PhiloxState state);
// Fills n contiguous elements of a float32/float64 device buffer with standard normal draws.
void philox_normal_cuda(void* out, DType dtype, int64_t n, PhiloxState state);
// Fills n contiguous elements of any dtype with integers on [low, low + range).
void philox_randint_cuda(void* out, DType dtype, int64_t n, int64_t low, uint64_t range, PhiloxState state);

}  // namespace tg
