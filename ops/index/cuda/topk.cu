// topk on CUDA. Rows of at most kSmallRow elements: one thread per row keeps a sorted list of its k
// best (order key, index) pairs. Longer rows (vocabulary-sized ones included): order keys and
// positions are written to scratch buffers and sorted by CUB's radix sort (device-wide for a single
// row or, packed with their row number, for a few rows; segmented for many; all stable, so equal
// keys stay in index order), and the first k of each row gathered out. Nothing synchronizes and the
// scratch comes from the tensor allocator, so the op records into CUDA graphs.
#include "ops/index/cuda/topk.h"

#include "ops/index/cuda/radix_sort.h"

#include <algorithm>
#include <climits>

#include "ops/factory/factory.h"
#include "ops/index/row_layout.h"
#include "ops/index/topk_key.h"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSmallRow = 32;
// Elements sorted per pass of the segmented sort: bounds the scratch (24 bytes an element at most)
// and keeps CUB's int item count in range.
constexpr int64_t kBatchElements = int64_t{1} << 26;
// Up to this many rows of 16- or 32-bit keys, (row, key) packed into 64 bits go through one
// device-wide sort that keeps the whole GPU busy; the segmented sort gives each row one block, which
// suits many rows but leaves a few vocabulary-sized rows on a few SMs.
constexpr int64_t kPackedRows = 128;

// Grid size for a grid-stride loop over n items.
unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>(blocks_for(n, kThreads), 65535 * 8)); }

template <typename T>
__global__ void small_rows_kernel(const T* x, RowLayout in, int64_t rows, int64_t n, int64_t k, bool largest,
                                  T* values, RowLayout out, int64_t* indices, RowLayout out_idx) {
  using Key = topk_key_t<T>;
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    Key keys[kSmallRow];
    int pos[kSmallRow];
    int count = 0;
    const T* row = x + in.row_offset(r);
    for (int j = 0; j < n; ++j) {
      const Key key = topk_rank_key(row[j * in.dim_stride], largest);
      // A later element displaces a kept one only when strictly preferred: ties keep index order.
      if (count == k && !(key < keys[k - 1])) continue;
      int p = count < k ? count++ : static_cast<int>(k) - 1;
      while (p > 0 && key < keys[p - 1]) {
        keys[p] = keys[p - 1];
        pos[p] = pos[p - 1];
        --p;
      }
      keys[p] = key;
      pos[p] = j;
    }
    const int64_t o = values ? out.row_offset(r) : 0, oi = out_idx.row_offset(r);
    for (int j = 0; j < k; ++j) {
      if (values) values[o + j * out.dim_stride] = row[pos[j] * in.dim_stride];
      indices[oi + j * out_idx.dim_stride] = pos[j];
    }
  }
}

// Order keys and in-row positions of rows [r0, r0 + count / n) into contiguous scratch; with
// row_shift >= 0 the row within the batch is packed above the order key (bit row_shift up).
template <typename T, typename SortKey>
__global__ void keys_kernel(const T* x, RowLayout in, int64_t r0, int64_t count, int64_t n, bool largest,
                            SortKey* keys, int* pos, int row_shift) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t local = i / n, j = i % n;
    SortKey key = topk_rank_key(x[in.row_offset(r0 + local) + j * in.dim_stride], largest);
    if (row_shift >= 0) key |= static_cast<SortKey>(local) << row_shift;
    keys[i] = key;
    pos[i] = static_cast<int>(j);
  }
}

// The first k sorted positions of each row in the batch, and the values found there.
template <typename T>
__global__ void gather_kernel(const T* x, RowLayout in, int64_t r0, int64_t rows, int64_t n, int64_t k,
                              const int* sorted_pos, T* values, RowLayout out, int64_t* indices, RowLayout out_idx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * k; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t local = i / k, j = i % k, r = r0 + local;
    const int p = sorted_pos[local * n + j];
    if (values) values[out.row_offset(r) + j * out.dim_stride] = x[in.row_offset(r) + p * in.dim_stride];
    indices[out_idx.row_offset(r) + j * out_idx.dim_stride] = p;
  }
}

// Scratch of `count` values of U from the tensor allocator (a private pool while recording a graph).
template <typename U>
U* scratch(Tensor& keep, int64_t count, Device device) {
  keep = empty({std::max<int64_t>(1, count * static_cast<int64_t>(sizeof(U)))}, {.dtype = kBool, .device = device});
  return static_cast<U*>(keep.raw_data());
}

template <typename T>
void sorted_rows(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices) {
  using Key = topk_key_t<T>;
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  const int64_t rows = x.numel() / n;
  const RowLayout in = row_layout(x, dim, "topk");
  const RowLayout out = values.defined() ? row_layout(values, dim, "topk") : RowLayout{};
  const RowLayout out_idx = row_layout(indices, dim, "topk");
  T* vals = values.defined() ? values.data_ptr<T>() : nullptr;
  int64_t* idx = indices.data_ptr<int64_t>();
  const Device device = x.device();
  cudaStream_t stream = current_stream();
  if (n <= kSmallRow) {
    small_rows_kernel<T><<<grid_for(rows), kThreads, 0, stream>>>(x.data_ptr<T>(), in, rows, n, k, largest, vals, out,
                                                                  idx, out_idx);
    TG_CUDA_CHECK_LAUNCH();
    return;
  }
  TG_CHECK(n <= INT_MAX, "[topk] rows of more than ", INT_MAX, " elements are not supported on CUDA, got ", n);
  const int64_t batch_rows = std::max<int64_t>(1, kBatchElements / n);
  for (int64_t r0 = 0; r0 < rows; r0 += batch_rows) {
    const int64_t count_rows = std::min(batch_rows, rows - r0);
    const int64_t count = count_rows * n;
    Tensor p_in, p_out;
    int* pos_in = scratch<int>(p_in, count, device);
    int* pos_out = scratch<int>(p_out, count, device);
    constexpr int kKeyBits = static_cast<int>(sizeof(Key) * 8);
    if (sizeof(Key) <= 4 && count_rows > 1 && count_rows <= kPackedRows) {
      int row_bits = 0;
      while ((int64_t{1} << row_bits) < count_rows) ++row_bits;
      Tensor k_in, k_out;
      uint64_t* keys_in = scratch<uint64_t>(k_in, count, device);
      uint64_t* keys_out = scratch<uint64_t>(k_out, count, device);
      keys_kernel<T, uint64_t><<<grid_for(count), kThreads, 0, stream>>>(x.data_ptr<T>(), in, r0, count, n, largest,
                                                                         keys_in, pos_in, kKeyBits);
      TG_CUDA_CHECK_LAUNCH();
      sort_pairs(keys_in, keys_out, pos_in, pos_out, count, 1, n, kKeyBits + row_bits, device, stream);
    } else {
      Tensor k_in, k_out;
      Key* keys_in = scratch<Key>(k_in, count, device);
      Key* keys_out = scratch<Key>(k_out, count, device);
      keys_kernel<T, Key><<<grid_for(count), kThreads, 0, stream>>>(x.data_ptr<T>(), in, r0, count, n, largest,
                                                                    keys_in, pos_in, -1);
      TG_CUDA_CHECK_LAUNCH();
      sort_pairs(keys_in, keys_out, pos_in, pos_out, count, count_rows, n, kKeyBits, device, stream);
    }
    gather_kernel<T><<<grid_for(count_rows * k), kThreads, 0, stream>>>(x.data_ptr<T>(), in, r0, count_rows, n, k,
                                                                        pos_out, vals, out, idx, out_idx);
    TG_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices) {
  if (x.numel() == 0 || k == 0) return;
  TG_DISPATCH_NUMERIC(x.dtype(), "topk", [&] { sorted_rows<scalar_t>(x, k, dim, largest, values, indices); });
}

}  // namespace tg::cuda
