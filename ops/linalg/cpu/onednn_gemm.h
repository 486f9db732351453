// float32 matrix products through oneDNN's sgemm, whose kernels are generated at run time for the
// running CPU (AVX2, AVX-512): on a Xeon with AVX-512 it runs the mlp_small step's products about a
// fifth faster than OpenBLAS's kernels on one thread. Products of fewer than
// kOneDnnMinMultiplyAdds multiply-adds stay with the BLAS, whose small-matrix kernels start faster.
#pragma once

#include <cstdint>

#include "ops/linalg/gemm.h"

namespace tg::cpu {

// Below this many multiply-adds (n*m*k) a product is left to the BLAS.
inline constexpr int64_t kOneDnnMinMultiplyAdds = int64_t{1} << 16;

// Runs the float32 product g (every matrix of its batch) through oneDNN and returns true; false,
// having done nothing, without oneDNN, for another dtype, below the size threshold, or for layouts
// it does not take (leading dimensions shorter than a row).
bool onednn_sgemm(const Gemm& g);

// Makes this thread's OpenMP thread count (which oneDNN's kernels use) tg::get_num_threads().
void sync_onednn_threads();

}  // namespace tg::cpu
