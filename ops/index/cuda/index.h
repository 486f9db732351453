// CUDA launchers for index_select and index_add; defined in index.cu.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg::cuda {

// out (contiguous) = x gathered along `dim` at `index` (int32/int64 vector on the same device).
// Never synchronizes: an index outside [0, x.size(dim)) zeroes its output element and is reported
// through the device error record, raised at the next host synchronization.
void index_select(const Tensor& x, int64_t dim, const Tensor& index, Tensor& out);
// out (contiguous) += source scattered along `dim` at `index`; repeated indices accumulate atomically.
// An out-of-range index adds nothing and is reported as index_select's.
void index_add(Tensor& out, int64_t dim, const Tensor& index, const Tensor& source);

}  // namespace tg::cuda
