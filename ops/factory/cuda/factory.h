// CUDA launchers for the non-random factories that need a kernel of their own; defined in factory.cu.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace tg {

// Writes start + i * step (double math) or, when `exact`, istart + i * istep (int64 math) into n
// contiguous elements of a numeric device buffer.
void arange_cuda(void* out, DType dtype, int64_t n, double start, double step, bool exact, int64_t istart,
                 int64_t istep);

}  // namespace tg
