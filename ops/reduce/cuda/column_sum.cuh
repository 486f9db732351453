// Sums down the columns of a row-major [rows, cols] matrix, one 1024-thread block per 32 adjacent
// columns in one pass: the bias-gradient shape, shared by sum's column kernel and the fused ReLU
// backward. Each column is summed by 32 threads whose partial sums are added in a fixed order, so
// every run gives the same sums.
#pragma once

#include <cstdint>

#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {

inline constexpr int kSumColumns = 32;    // columns per block: one warp reads a row segment coalesced
inline constexpr int kSumRowGroups = 32;  // threads down each column

// The block shape and grid of a column-sum kernel over `cols` columns.
inline dim3 column_sum_threads() { return dim3(kSumColumns, kSumRowGroups); }
inline unsigned column_sum_blocks(int64_t cols) { return blocks_for(cols, kSumColumns); }

// The calling block's share of a column sum: `element(at)` is the Acc value at flat index at = i *
// cols + j (it may write side outputs there), and store(j, total) receives each column's total.
template <typename Acc, typename Element, typename Store>
__device__ void sum_block_columns(int64_t rows, int64_t cols, Element element, Store store) {
  __shared__ Acc partial[kSumRowGroups][kSumColumns];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kSumColumns + threadIdx.x;
  Acc sum = 0;
  if (j < cols)
    for (int64_t i = threadIdx.y; i < rows; i += kSumRowGroups) sum += element(i * cols + j);
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    Acc total = 0;
    for (int r = 0; r < kSumRowGroups; ++r) total += partial[r][threadIdx.x];
    store(j, total);
  }
}

}  // namespace tg::cuda
