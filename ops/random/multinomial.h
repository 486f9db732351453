// multinomial: indices drawn from rows of non-negative weights.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg {

// torch.multinomial: int64 indices of shape [num_samples] (1-D input) or [rows, num_samples] (2-D),
// each row drawn in proportion to its non-negative weights (which need not sum to 1); without
// replacement no index repeats within a row. Draws from the global Philox generator (manual_seed
// makes them reproducible, CPU and CUDA alike; inside CUDA graphs every replay draws afresh).
// Negative, infinite or NaN weights and rows summing to zero are errors: on the CPU at once, on
// CUDA (which never synchronizes for them) raised at the next synchronization, as index errors are.
// Without replacement, rows with fewer positive weights than num_samples fill up with zero-weight
// categories in index order (PyTorch 2.x returns them too). No gradient.
Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement = false);

}  // namespace tg
