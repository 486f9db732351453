// Sums down the columns of a row-major [rows, cols] matrix: the bias-gradient shape, shared by
// sum's column kernel and the fused ReLU and GELU backwards. A 1024-thread block takes 32 adjacent
// columns (one warp reads a row segment coalesced) over a chunk of rows. A small matrix is one
// chunk (one launch); a larger one is cut into chunks of at least 8 rows per thread when the column
// tiles alone are too few blocks to fill the device, and a second pass adds the chunks' partial sums
// (thinner chunks, towards a row per thread, were a third slower on GPT-2's 8,192-row gradients: more
// blocks reducing in shared memory, and longer chains in the second pass). Every partial is summed in
// a fixed order and the chunking depends only on the shape, so every run gives the same sums.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/factory/factory.h"
#include "ops/reduce/cuda/reduce_access.cuh"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {

inline constexpr int kSumColumns = 32;    // columns per block: one warp reads a row segment coalesced
inline constexpr int kSumRowGroups = 32;  // threads down each column
inline constexpr int64_t kSumTargetBlocks = 512;  // enough blocks to fill a large GPU a few times over
// Matrices of at most this many elements are summed in one pass: at that size the second launch
// costs more than the parallelism it buys.
inline constexpr int64_t kSumOnePassElements = int64_t{1} << 18;

// How the rows of a column sum are cut: `chunks` chunks of `chunk_rows` rows (the last shorter).
struct ColumnSumChunks {
  int64_t chunks = 1;
  int64_t chunk_rows = 0;
};

// The chunking of a [rows, cols] column sum whose blocks take `tile` columns each: one chunk for a
// small matrix or when the column tiles fill the device, else chunks of at least 8 rows per thread.
inline ColumnSumChunks column_sum_chunks(int64_t rows, int64_t cols, int64_t tile = kSumColumns) {
  if (rows * cols <= kSumOnePassElements) return {1, std::max<int64_t>(rows, 1)};
  const int64_t tiles = std::max<int64_t>(1, (cols + tile - 1) / tile);
  const int64_t by_device = (kSumTargetBlocks + tiles - 1) / tiles;
  const int64_t by_rows = std::max<int64_t>(1, rows / (8 * kSumRowGroups));
  const int64_t want = std::max<int64_t>(1, std::min(by_device, by_rows));
  const int64_t chunk_rows = (rows + want - 1) / want;
  return {(rows + chunk_rows - 1) / std::max<int64_t>(chunk_rows, 1), std::max<int64_t>(chunk_rows, 1)};
}

// The calling block's share of a column sum: columns [blockIdx.x * 32, +32) over the rows of chunk
// blockIdx.y. `element(at)` is the Acc value at flat index at = i * cols + j (it may write side
// outputs there); each column's total goes to partial[chunk * cols + j], or to store(j, total)
// when `partial` is null (a single chunk).
template <typename Acc, typename Element, typename Store>
__device__ void sum_block_columns(int64_t rows, int64_t cols, int64_t chunk_rows, Element element, Store store,
                                  Acc* partial) {
  __shared__ Acc sums[kSumRowGroups][kSumColumns];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kSumColumns + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  Acc sum = 0;
  if (j < cols) {
#pragma unroll 4
    for (int64_t i = r0 + threadIdx.y; i < r1; i += kSumRowGroups) sum += element(i * cols + j);
  }
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    Acc total = 0;
    for (int r = 0; r < kSumRowGroups; ++r) total += sums[r][threadIdx.x];
    if (partial) partial[blockIdx.y * cols + j] = total;
    else store(j, total);
  }
}

// sum_block_columns for threads that each take VEC adjacent columns at a time (cols % VEC == 0): a
// block takes 32 * VEC columns, and `pack(at, v)` fills v[0..VEC) with the Acc values at flat
// indices at..at+VEC-1 (at = i * cols + j, j a multiple of VEC; it may write side outputs there).
template <typename Acc, int VEC, typename Pack, typename Store>
__device__ void sum_block_column_packs(int64_t rows, int64_t cols, int64_t chunk_rows, Pack pack, Store store,
                                       Acc* partial) {
  __shared__ Acc sums[kSumRowGroups][kSumColumns * VEC];
  const int64_t j0 = (static_cast<int64_t>(blockIdx.x) * kSumColumns + threadIdx.x) * VEC;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  Acc sum[VEC] = {};
  if (j0 < cols) {
#pragma unroll 4
    for (int64_t i = r0 + threadIdx.y; i < r1; i += kSumRowGroups) {
      Acc v[VEC];
      pack(i * cols + j0, v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum[k] += v[k];
    }
  }
#pragma unroll
  for (int k = 0; k < VEC; ++k) sums[threadIdx.y][threadIdx.x * VEC + k] = sum[k];
  __syncthreads();
  // Each of the block's 32 * VEC columns is finished by one thread, rows added in order.
  const int t = threadIdx.y * kSumColumns + threadIdx.x;
  if (t >= kSumColumns * VEC) return;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kSumColumns * VEC + t;
  if (j >= cols) return;
  Acc total = 0;
  for (int r = 0; r < kSumRowGroups; ++r) total += sums[r][t];
  if (partial) partial[blockIdx.y * cols + j] = total;
  else store(j, total);
}

// sum_block_column_packs over a contiguous T matrix read in aligned VEC-element vectors (x 16-byte
// aligned).
template <typename Acc, int VEC, typename T, typename Store>
__device__ void sum_block_column_vectors(const T* __restrict__ x, int64_t rows, int64_t cols, int64_t chunk_rows,
                                         Store store, Acc* partial) {
  sum_block_column_packs<Acc, VEC>(
      rows, cols, chunk_rows,
      [x](int64_t at, Acc(&v)[VEC]) {
        const AlignedVector<T, VEC> p = *reinterpret_cast<const AlignedVector<T, VEC>*>(x + at);
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = static_cast<Acc>(p.v[k]);
      },
      store, partial);
}

// store(j, sum over the chunks of partial[chunk * cols + j]): a block of 32 columns x kFinishRows
// threads, each thread adding every kFinishRows-th chunk in order, then a column's threads in order.
inline constexpr int kFinishRows = 8;

template <typename Acc, typename Store>
__global__ void finish_column_sums(const Acc* __restrict__ partial, int64_t chunks, int64_t cols, Store store) {
  __shared__ Acc sums[kFinishRows][kSumColumns];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kSumColumns + threadIdx.x;
  Acc total = 0;
  if (j < cols)
    for (int64_t c = threadIdx.y; c < chunks; c += kFinishRows) total += partial[c * cols + j];
  sums[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols) return;
  for (int r = 1; r < kFinishRows; ++r) total += sums[r][threadIdx.x];
  store(j, total);
}

// Runs a column sum of [rows, cols] on the current stream: launch(grid, block, chunk_rows, partial)
// starts the kernel that calls sum_block_columns (or whose threads take `vec` adjacent columns
// each: sum_block_column_vectors); partial is null for a single chunk. The chunk totals are then
// added into store, a functor of (j, Acc) usable on the device.
template <typename Acc, typename Store, typename Launch>
void run_column_sum(int64_t rows, int64_t cols, Device device, Store store, Launch&& launch, int vec = 1) {
  const ColumnSumChunks c = column_sum_chunks(rows, cols, int64_t{kSumColumns} * vec);
  const dim3 grid(blocks_for(cols, kSumColumns * vec), static_cast<unsigned>(c.chunks));
  const dim3 block(kSumColumns, kSumRowGroups);
  if (c.chunks == 1) {
    launch(grid, block, c.chunk_rows, static_cast<Acc*>(nullptr));
    TG_CUDA_CHECK_LAUNCH();
    return;
  }
  const Tensor scratch =
      empty({c.chunks * cols}, {.dtype = sizeof(Acc) == 8 ? kFloat64 : kFloat32, .device = device});
  launch(grid, block, c.chunk_rows, static_cast<Acc*>(scratch.raw_data()));
  TG_CUDA_CHECK_LAUNCH();
  finish_column_sums<Acc><<<blocks_for(cols, kSumColumns), dim3(kSumColumns, kFinishRows), 0, current_stream()>>>(
      static_cast<const Acc*>(scratch.raw_data()), c.chunks, cols, store);
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace tg::cuda
